"""The detail of one memory: full text, metadata, the score with its parts and its decay curve,
access history, and why retrieval found it."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Sparkline, Static

from tiermem.core import curate, hygiene, links
from tiermem.core.curate import Listed, ScoreParts
from tiermem.core.engine import Memory
from tiermem.core.retrieve import Explanation
from tiermem.tui.app.widgets.format import literal, stamp

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
    )


def describe(data: DetailData) -> str:
    """The pane's text as Rich markup."""
    m = data.listed.record
    p = data.parts
    flags = (
        [m.tier] + (["pinned"] if data.listed.pinned else []) + (["in hot"] if data.in_hot else [])
    )
    lines = [
        f"[b]{' · '.join(flags)}[/b]  [dim]{m.id}[/dim]",
        "",
        literal(m.text),
        "",
        f"[b]category[/b] {literal(m.category)}   [b]source[/b] {literal(m.source) or '-'}",
        f"[b]created[/b] {stamp(m.created_at)}   [b]in tier since[/b] {stamp(m.tier_changed_at)}",
        f"[b]size[/b] {m.size_bytes} B, {m.tokens} tokens",
    ]
    if data.tags:
        lines.append(f"[b]tags[/b] {literal(', '.join(data.tags))}")
    if data.related_to:
        lines.append(f"[b]linked to[/b] {literal(', '.join(data.related_to))}")
    for label, values in (("urls", m.urls), ("commands", m.commands), ("paths", m.paths)):
        for value in values:
            lines.append(f"[b]{label[:-1]}[/b] {literal(value)}")
    lines += [
        "",
        f"[b]score {p.score:.3f}[/b] = importance {p.importance:.2f} × decay {p.decay:.3f} "
        f"× reinforcement {p.reinforcement:.2f}",
        f"  decay: age {p.age_days:.1f} d, τ {p.tau_days:g} d (half-life {p.half_life_days:.1f} d)",
        f"  reinforcement: {p.access_count} access{'es' if p.access_count != 1 else ''}",
        f"  the score alone points to [b]{p.band}[/b]",
    ]
    return "\n".join(lines)


def describe_rest(data: DetailData) -> str:
    lines = [
        f"[dim]score over the next {CURVE_DAYS} days if unused: "
        f"{data.curve[0]:.3f} → {data.curve[-1]:.3f}[/dim]",
        "",
    ]
    if data.history:
        lines.append(f"[b]accessed[/b] {len(data.history)} time(s), newest first:")
        lines += [f"  {stamp(t)}" for t in data.history[:10]]
    else:
        lines.append("[b]accessed[/b] never")
    lines.append("")
    e = data.explanation
    if e is None:
        lines.append("[b]why here[/b] listed, not searched: type to search")
    else:
        lines.append("[b]why retrieval found it[/b]")
        lines.append(f"  tree path {literal(e.path) or 'root'}")
        if e.tree_match:
            lines.append(f"  tree match {literal(e.tree_match)}")
        lines.append(f"  matched terms {literal(', '.join(e.matched_terms)) or '-'}")
        boost = f" + {e.category_boost:.0%} category" if e.category_boost else ""
        length = f", length ×{e.length_factor:.2f}" if e.length_factor != 1.0 else ""
        lines.append(f"  relevance {e.relevance:.2f} (bm25 {e.bm25:.2f}{length}){boost}")
        if e.time_match:
            lines.append(f"  time {literal(e.time_match)} (+{e.time_boost:.0%})")
        if e.found_by != "keyword":
            lines.append(f"  found by {literal(e.found_by)}")
        if e.via:
            lines.append(f"  via {literal(e.via)}")
        lines.append(f"  tier score {e.tier_score:.3f} (tie-break) → final {e.score:.3f}")
    return "\n".join(lines)


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
