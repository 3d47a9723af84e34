"""Consolidation: the periodic maintenance of the memory model, mode by mode.

- quick   (every few hours): recalculate warm scores, promote (score ≥ 0.7) into hot lessons,
          archive expired warm facts (age > 30 d and score < 0.3) to cold or frozen, evict the
          lowest-scored while warm is over 50 KB, rebuild MEMORY.md.
- daily   quick + prune tree nodes idle for 60 days.
- monthly daily + tree rebuild (re-derive nodes for the categories warm memories use) + cold
          cleanup (delete frozen facts older than the retention period).
- full    monthly + recalculation of every cold/frozen score (re-tiering, revival of cold facts
          that were reinforced back over the warm threshold) + deep tree analysis + the report.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from tiermem.core import dreaming, episodes, outbox, provenance, supersession
from tiermem.core.curate import pinned_ids
from tiermem.core.errors import InvalidInput
from tiermem.core.rows import MemoryRow, Tier
from tiermem.core.scoring import DAY, classify
from tiermem.core.tree import normalize_path

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.ingest import IngestReport
    from tiermem.core.memory_md import MemoryMdReport

Mode = Literal["quick", "daily", "monthly", "full"]
MODES: tuple[Mode, ...] = ("quick", "daily", "monthly", "full")
Progress = Callable[[str, int, int], None]
"""`progress(step, done, total)`: called before each step (and once with done == total)."""
YEAR = 365.25 * DAY
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Move:
    id: str
    text: str
    from_tier: str
    to_tier: str
    score: float
    reason: str


@dataclass(frozen=True)
class Sizes:
    warm_count: int
    warm_bytes: int
    cold_count: int
    frozen_count: int
    hot_bytes: int
    tree_nodes: int
    tree_bytes: int


@dataclass
class ConsolidationReport:
    mode: Mode
    before: Sizes
    after: Sizes | None = None
    moves: list[Move] = field(default_factory=list)
    hot_pruned: list[str] = field(default_factory=list)
    deleted_frozen: int = 0
    tree_pruned: list[str] = field(default_factory=list)
    tree_added: list[str] = field(default_factory=list)
    analysis: list[str] = field(default_factory=list)
    ingested: IngestReport | None = None
    """Daily notes ingested first (daily, monthly and full modes)."""
    memory_md: MemoryMdReport | None = None
    """Hand edits of MEMORY.md read back first."""
    episodes_pruned: list[str] = field(default_factory=list)
    """Expired episodes deleted."""
    dream: dreaming.DreamReport | None = None
    """Unpromoted episodes synthesised into facts (when enough waited)."""

    @property
    def evicted(self) -> list[Move]:
        return [m for m in self.moves if m.from_tier == "warm" and m.to_tier in ("cold", "frozen")]

    @property
    def promoted(self) -> list[Move]:
        return [m for m in self.moves if m.to_tier == "hot"]


def check_mode(mode: str) -> Mode:
    if mode not in MODES:
        raise InvalidInput(f"unknown consolidation mode {mode!r}: use {', '.join(MODES)}")
    return mode


def steps(mode: Mode) -> list[str]:
    """The steps a mode runs, in order (what `progress` reports)."""
    out = ["re-score archive"] if mode == "full" else []
    out.append("re-score, promote, archive and evict warm")
    out.append("prune episodes, index the graph, dream")
    if mode in ("daily", "monthly", "full"):
        out.append("prune idle tree nodes")
    if mode in ("monthly", "full"):
        out += ["rebuild tree", "delete expired frozen"]
    if mode == "full":
        out.append("analyse tree")
    return [*out, "write MEMORY.md", "record metrics"]


def consolidate(mem: Memory, mode: str, progress: Progress | None = None) -> ConsolidationReport:
    """Run one consolidation in a single transaction (all of it happens, or none).

    `progress` (optional) hears of each step as it starts, for a progress bar."""
    chosen = check_mode(mode)
    names = steps(chosen)
    done = iter(range(len(names) + 1))

    def step() -> None:
        index = next(done)
        if progress is not None:
            progress(names[index] if index < len(names) else "done", index, len(names))

    report = ConsolidationReport(mode=chosen, before=sizes(mem))
    now = mem.now()
    with mem.db.transaction():
        if chosen == "full":
            step()
            _rescore_archive(mem, now, report)
        step()
        _quick(mem, now, report)
        step()
        report.episodes_pruned = episodes.prune(mem.db, mem.agent_id, now)
        supersession.catch_up(mem)
        report.dream = dreaming.dream(mem)
        if chosen in ("daily", "monthly", "full"):
            step()
            report.tree_pruned = mem.trees.prune(now)
        if chosen in ("monthly", "full"):
            step()
            report.tree_added = _rebuild_tree(mem, now)
            step()
            cutoff = now - mem.cfg.cold.retention_years * YEAR
            report.deleted_frozen = mem.memories.delete_frozen_before(cutoff)
        if chosen == "full":
            step()
            report.analysis = _analyse_tree(mem)
        mem.metrics.bump(now, evictions=len(report.evicted), promotions=len(report.promoted))
        if report.promoted or report.tree_pruned or report.tree_added:
            outbox.enqueue(mem.db, mem.agent_id, "consolidation", now)
    step()
    mem.write_memory_md()
    report.after = sizes(mem)
    step()
    mem.snapshot_metrics()
    step()
    log.info(
        "consolidation %s of agent %s: %d promoted, %d evicted, %d frozen deleted, "
        "tree -%d +%d nodes",
        chosen,
        mem.agent_id,
        len(report.promoted),
        len(report.evicted),
        report.deleted_frozen,
        len(report.tree_pruned),
        len(report.tree_added),
    )
    return report


def sizes(mem: Memory) -> Sizes:
    counts = mem.memories.counts()
    tree = mem.trees.load()
    return Sizes(
        warm_count=counts["warm"],
        warm_bytes=mem.memories.warm_bytes(),
        cold_count=counts["cold"],
        frozen_count=counts["frozen"],
        hot_bytes=mem.hot_size_bytes(),
        tree_nodes=len(tree.nodes),
        tree_bytes=tree.size_bytes(),
    )


def _quick(mem: Memory, now: float, report: ConsolidationReport) -> None:
    scoring = mem.cfg.scoring
    warm = [(m, m.score(now, scoring)) for m in mem.memories.in_tier("warm")]
    _promote(mem, [(m, s) for m, s in warm if s >= scoring.hot_threshold], now, report)
    # a promotion can move hot items to warm memory: the size limit counts them too
    warm = [(m, m.score(now, scoring)) for m in mem.memories.in_tier("warm")]
    retention = mem.cfg.warm.retention_days * DAY
    kept = []
    pinned = pinned_ids(mem.db, mem.agent_id)  # a person pinned these: never evicted
    for memory, score in warm:
        if memory.id in pinned:
            continue
        if now - memory.created_at > retention and score < scoring.warm_threshold:
            _evict(mem, memory, score, "expired", now, report)
        else:
            kept.append((memory, score))
    total = sum(m.size_bytes for m, _ in kept) + sum(
        m.size_bytes for m, _ in warm if m.id in pinned
    )
    for memory, score in sorted(kept, key=lambda x: (x[1], x[0].created_at, x[0].id)):
        if total <= mem.cfg.warm.max_bytes:
            break
        _evict(mem, memory, score, "warm over size limit", now, report)
        total -= memory.size_bytes


def _evict(
    mem: Memory,
    memory: MemoryRow,
    score: float,
    reason: str,
    now: float,
    report: ConsolidationReport,
) -> None:
    target: Tier = "cold" if score >= mem.cfg.scoring.cold_threshold else "frozen"
    mem.memories.move([memory.id], target, now)
    report.moves.append(Move(memory.id, memory.text, "warm", target, score, reason))


def _promote(
    mem: Memory,
    candidates: list[tuple[MemoryRow, float]],
    now: float,
    report: ConsolidationReport,
) -> None:
    if not candidates:
        return
    state = mem.hot_store.load()
    known = {lesson.source_id for lesson in state.critical_lessons}
    # A memory is promoted once: a lesson a person removed from hot is not brought back.
    known |= _promoted_before(mem, [m.id for m, _ in candidates])
    fresh = [(m, s) for m, s in candidates if m.id not in known]
    if not fresh:
        return
    for memory, score in fresh:
        mem.hot_store.add_lesson(
            state, memory.text, memory.importance, memory.category, now, source_id=memory.id
        )
        report.moves.append(Move(memory.id, memory.text, "warm", "hot", score, "score ≥ hot"))
        provenance.note(mem, memory.id, f"score {score:.2f} ≥ hot threshold")
    report.hot_pruned += mem.hot_store.save(state, now)
    mem.db.executemany(
        "INSERT INTO promoted (agent_id, id, promoted_at) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO NOTHING",
        [(mem.agent_id, m.id, now) for m, _ in fresh],
    )


def _promoted_before(mem: Memory, ids: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = mem.db.query(
            f"SELECT id FROM promoted WHERE agent_id = ? AND id IN ({','.join('?' * len(chunk))})",
            (mem.agent_id, *chunk),
        )
        found |= {r[0] for r in rows}
    return found


def _rescore_archive(mem: Memory, now: float, report: ConsolidationReport) -> None:
    scoring = mem.cfg.scoring
    for tier in ("cold", "frozen"):
        changes: dict[Tier, list[tuple[MemoryRow, float]]] = {
            "warm": [],
            "cold": [],
            "frozen": [],
        }
        for chunk in mem.memories.iter_tier(tier):
            for memory in chunk:
                score = memory.score(now, scoring)
                cls = classify(score, scoring)
                target: Tier = "warm" if cls == "hot" else cls
                if target != tier:
                    changes[target].append((memory, score))
        for target, items in changes.items():
            mem.memories.move([m.id for m, _ in items], target, now)
            report.moves += [Move(m.id, m.text, tier, target, s, "rescored") for m, s in items]


def _rebuild_tree(mem: Memory, now: float) -> list[str]:
    """Give the categories of warm memories a node where the limits allow, busiest first."""
    before = set(mem.trees.load().nodes)
    usage = Counter(m.category for m in mem.memories.in_tier("warm"))
    index = mem.trees.load()
    for category, _ in sorted(usage.items(), key=lambda kv: (-kv[1], kv[0])):
        mem.trees.ensure(normalize_path(category), now, index)
    return sorted(set(mem.trees.load().nodes) - before)


def _analyse_tree(mem: Memory) -> list[str]:
    tree = mem.trees.load(with_counts=True)
    cfg = mem.cfg.tree
    notes = [
        f"tree: {len(tree.nodes)}/{cfg.max_nodes} nodes, {tree.size_bytes()}/{cfg.max_bytes} bytes",
    ]
    notes += [f"invariant broken: {p}" for p in tree.check()]
    empty = sorted(p for p, n in tree.nodes.items() if n.warm == 0 and n.cold == 0)
    if empty:
        notes.append(f"{len(empty)} empty nodes: {', '.join(empty[:10])}")
    full = sorted(
        p or "root" for p in {"", *tree.nodes} if len(tree.children(p)) >= cfg.max_children
    )
    if full:
        notes.append(f"nodes at the children limit: {', '.join(full)}")
    folded: Counter[str] = Counter()
    for category, n in mem.db.query(
        "SELECT category, COUNT(*) FROM memories WHERE agent_id = ? GROUP BY category",
        (mem.agent_id,),
    ):
        if category not in tree.nodes:
            folded[tree.node_for(category) or "root"] += n
    if folded:
        top = ", ".join(f"{p} ({n})" for p, n in folded.most_common(5))
        notes.append(f"memories whose exact category has no node, by the node holding them: {top}")
    heavy = sorted(tree.nodes.values(), key=lambda n: -(n.warm + n.cold))[:3]
    if heavy:
        notes.append("busiest: " + ", ".join(f"{n.path} ({n.warm}w/{n.cold}c)" for n in heavy))
    return notes
