"""The detail of one memory: full text, metadata, the score with its parts and its decay curve,
access history, and why retrieval found it."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Sparkline, Static

from tiermem.core import curate, hygiene, links, supersession
from tiermem.core.curate import Listed, ScoreParts
from tiermem.core.engine import Memory
from tiermem.core.retrieve import Explanation
from tiermem.core.rows import MemoryRow
from tiermem.tui.app.widgets.format import markup, markup_lines, stamp

CURVE_DAYS = 90


@dataclass(frozen=True)
class DetailData:
    listed: Listed
    parts: ScoreParts
    curve: list[float]
    history: list[float]
    in_hot: bool
    explanation: Explanation | None
    tags: tuple[str, ...] = ()
    related_to: tuple[str, ...] = ()
    chain: tuple[MemoryRow, ...] = ()
    """What it replaced and what replaced it, oldest first (itself included)."""


def load_detail(mem: Memory, memory_id: str, explanation: Explanation | None) -> DetailData:
    """Everything the pane shows (runs in a worker)."""
    listed = curate.get_listed(mem, memory_id)
    now = mem.now()
    return DetailData(
        listed=listed,
        parts=curate.score_parts(listed.record, now, mem.cfg.scoring),
        curve=curate.decay_curve(listed.record, now, mem.cfg.scoring, days=CURVE_DAYS),
        history=curate.access_history(mem, memory_id),
        in_hot=curate.hot_lesson_for(mem, memory_id) is not None,
        explanation=explanation,
        tags=hygiene.extras_for(mem, [memory_id]).get(memory_id, ((), None))[0],
        related_to=tuple(links.linked(mem, [memory_id]).get(memory_id, [])),
        chain=tuple(supersession.history(mem, memory_id)),
    )


def describe(data: DetailData) -> Content:
    """The pane's text: the memory, its metadata and its score."""
    m = data.listed.record
    p = data.parts
    flags = (
        [m.tier] + (["pinned"] if data.listed.pinned else []) + (["in hot"] if data.in_hot else [])
    )
    lines = [
        markup("[b]$flags[/b]  [dim]$id[/dim]", flags=" · ".join(flags), id=m.id),
        markup(""),
        markup("$text", text=m.text),
        markup(""),
        markup(
            "[b]category[/b] $category   [b]source[/b] $source",
            category=m.category,
            source=m.source or "-",
        ),
        markup(
            "[b]created[/b] $created   [b]in tier since[/b] $since",
            created=stamp(m.created_at),
            since=stamp(m.tier_changed_at),
        ),
        markup(f"[b]size[/b] {m.size_bytes} B, {m.tokens} tokens"),
    ]
    if data.tags:
        lines.append(markup("[b]tags[/b] $tags", tags=", ".join(data.tags)))
    if data.related_to:
        lines.append(markup("[b]linked to[/b] $ids", ids=", ".join(data.related_to)))
    for label, values in (("url", m.urls), ("command", m.commands), ("path", m.paths)):
        lines += [markup(f"[b]{label}[/b] $value", value=value) for value in values]
    lines += _history(data)
    lines += [
        markup(""),
        markup(
            f"[b]score {p.score:.3f}[/b] = importance {p.importance:.2f} × decay {p.decay:.3f} "
            f"× reinforcement {p.reinforcement:.2f}"
        ),
        markup(
            f"  decay: age {p.age_days:.1f} d, τ {p.tau_days:g} d "
            f"(half-life {p.half_life_days:.1f} d)"
        ),
        markup(f"  reinforcement: {p.access_count} access{'es' if p.access_count != 1 else ''}"),
        markup(f"  the score alone points to [b]{p.band}[/b]"),
    ]
    return markup_lines(lines)


def _history(data: DetailData) -> list[Content]:
    """The memory's place in its chain of changes; `U` makes a superseded one current again."""
    m = data.listed.record
    if len(data.chain) < 2:
        return []
    lines = [markup(""), markup("[b]history[/b] (oldest first)")]
    for item in data.chain:
        until = stamp(item.superseded_at) if item.superseded_at is not None else "now"
        mark = "▸" if item.id == m.id else " "
        lines.append(
            markup(
                f"{mark} $since – $until  $text  [dim]$id[/dim]",
                since=stamp(item.since),
                until=until,
                text=item.text,
                id=item.id,
            )
        )
    if m.superseded_at is not None:
        lines.append(markup("[dim]superseded: U makes it current again[/dim]"))
    return lines


def describe_rest(data: DetailData) -> Content:
    """The pane's text below the decay curve: accesses, and why retrieval found the memory."""
    lines = [
        markup(
            f"[dim]score over the next {CURVE_DAYS} days if unused: "
            f"{data.curve[0]:.3f} → {data.curve[-1]:.3f}[/dim]"
        ),
        markup(""),
    ]
    if data.history:
        lines.append(markup(f"[b]accessed[/b] {len(data.history)} time(s), newest first:"))
        lines += [markup(f"  {stamp(t)}") for t in data.history[:10]]
    else:
        lines.append(markup("[b]accessed[/b] never"))
    lines.append(markup(""))
    e = data.explanation
    if e is None:
        lines.append(markup("[b]why here[/b] listed, not searched: type to search"))
    else:
        lines += _why_found(e)
    return markup_lines(lines)


def _why_found(e: Explanation) -> list[Content]:
    lines = [
        markup("[b]why retrieval found it[/b]"),
        markup("  tree path $path", path=e.path or "root"),
    ]
    if e.tree_match:
        lines.append(markup("  tree match $match", match=e.tree_match))
    lines.append(markup("  matched terms $terms", terms=", ".join(e.matched_terms) or "-"))
    boost = f" + {e.category_boost:.0%} category" if e.category_boost else ""
    length = f", length ×{e.length_factor:.2f}" if e.length_factor != 1.0 else ""
    lines.append(markup(f"  relevance {e.relevance:.2f} (bm25 {e.bm25:.2f}{length}){boost}"))
    if e.time_match:
        lines.append(markup(f"  time $cue (+{e.time_boost:.0%})", cue=e.time_match))
    if e.found_by != "keyword":
        lines.append(markup("  found by $how", how=e.found_by))
    if e.via:
        lines.append(markup("  via $via", via=e.via))
    if e.supersession:
        lines.append(markup("  $note", note=e.supersession))
    lines.append(markup(f"  tier score {e.tier_score:.3f} (tie-break) → final {e.score:.3f}"))
    return lines


class MemoryDetail(VerticalScroll):
    """The detail pane; `show(None)` empties it."""

    def compose(self) -> ComposeResult:
        yield Static("[dim]select a memory[/dim]", id="detail-main")
        yield Sparkline([], id="detail-curve")
        yield Static("", id="detail-rest")

    def show(self, data: DetailData | None) -> None:
        curve = self.query_one(Sparkline)
        if data is None:
            self.query_one("#detail-main", Static).update("[dim]select a memory[/dim]")
            self.query_one("#detail-rest", Static).update("")
            curve.data = []
            return
        self.query_one("#detail-main", Static).update(describe(data))
        curve.data = data.curve
        self.query_one("#detail-rest", Static).update(describe_rest(data))
