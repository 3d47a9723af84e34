"""Index status and token audit (the original `memory_index_status` and `memory_audit` tools).

Both are reads measured now, in tokens (`core.tokens`, cl100k offline). The original tools'
words map to tiermem as: "legacy" = the markdown files (MEMORY.md and the daily notes),
"progressive" = the structured store (warm, cold and frozen memories), "always loaded" = the block
`tiermem context` always injects (hot + tree, under 1,500 tokens), "on-demand domains" = the
tree's top-level categories, whose memories are loaded only by recall.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.core import hygiene
from tiermem.core.context import (
    ALWAYS_LOADED_MAX_TOKENS,
    PRIORITY_FLOOR,
    AlwaysLoaded,
    always_loaded,
    iso,
)
from tiermem.core.dedup import NearIndex
from tiermem.core.errors import InvalidInput
from tiermem.core.hot import HotState
from tiermem.core.ingest import DAILY_NAME, daily_dir
from tiermem.core.scoring import DAY
from tiermem.core.tokens import count_tokens
from tiermem.core.tree import TreeIndex

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

SCOPES = ("all", "hot", "tree", "warm", "archive", "files")
LONG_MEMORY_TOKENS = 200
"""A memory longer than this costs a recall budget more than a distilled fact would."""
DISTILLED_TOKENS = 60
DUPLICATE_SIMILARITY = 0.8
MAX_DUPLICATES = 50
MAX_DAILY_FILES = 400
_TOP_CATEGORY = (
    "CASE WHEN instr(category, '/') > 0 THEN substr(category, 1, instr(category, '/') - 1) "
    "ELSE category END"
)


def _priority_case() -> str:
    floors = sorted(PRIORITY_FLOOR.items(), key=lambda kv: -kv[1])
    whens = " ".join(f"WHEN importance >= {floor} THEN '{name}'" for name, floor in floors[:-1])
    return f"CASE {whens} ELSE '{floors[-1][0]}' END"


def _daily_notes(mem: Memory) -> list[Any]:
    folder = daily_dir(mem)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if DAILY_NAME.match(p.name) and p.is_file())


def _file_tokens(paths: Iterable[Any]) -> int:
    total = 0
    for path in paths:
        try:
            total += count_tokens(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    return total


def index_status(mem: Memory) -> dict[str, Any]:
    """Health and statistics in the original tool's shape (legacy / progressive / index)."""
    tree = mem.trees.load()
    return {
        "legacy": _legacy_status(mem),
        "progressive": _progressive_status(mem, sorted(p for p in tree.nodes if "/" not in p)),
        "index": _index_status(mem, tree),
    }


def _legacy_status(mem: Memory) -> dict[str, Any]:
    """The markdown files: MEMORY.md and the daily notes."""
    memory_md = mem.home.memory_md(mem.agent_id)
    md_text = memory_md.read_text(encoding="utf-8", errors="replace") if memory_md.exists() else ""
    notes = _daily_notes(mem)
    chunks = int(
        mem.db.scalar(
            "SELECT COUNT(*) FROM ingest_items WHERE agent_id = ? AND source LIKE 'daily/%'",
            (mem.agent_id,),
        )
    )
    return {
        "files": (1 if md_text else 0) + len(notes),
        "chunks": chunks,
        "total_tokens_estimated": count_tokens(md_text) + _file_tokens(notes[-MAX_DAILY_FILES:]),
        "memory_md_size": len(md_text.encode()),
        "memory_md_tokens": count_tokens(md_text),
        "memory_dir_files": len(notes),
    }


def _progressive_status(mem: Memory, domain_files: list[str]) -> dict[str, Any]:
    """The structured store: memories by category, priority and tier."""
    agent = (mem.agent_id,)
    by_tier = mem.memories.counts()
    by_category = {
        str(r[0]): int(r[1])
        for r in mem.db.query(
            f"SELECT {_TOP_CATEGORY} AS top, COUNT(*) FROM memories "
            "WHERE agent_id = ? GROUP BY top ORDER BY COUNT(*) DESC",
            agent,
        )
    }
    by_priority = dict.fromkeys(PRIORITY_FLOOR, 0)
    for name, n in mem.db.query(
        f"SELECT {_priority_case()} AS p, COUNT(*) FROM memories WHERE agent_id = ? GROUP BY p",
        agent,
    ):
        by_priority[str(name)] = int(n)
    last_store, last_recall = mem.db.query_one(
        "SELECT MAX(created_at), MAX(last_access) FROM memories WHERE agent_id = ?", agent
    ) or (None, None)
    return {
        "total_entries": sum(by_tier.values()),
        "by_category": by_category,
        "by_priority": by_priority,
        "by_tier": by_tier,
        "total_tokens_estimated": mem.memories.total_tokens(),
        "last_store": None if last_store is None else iso(float(last_store)),
        "last_recall": None if last_recall is None else iso(float(last_recall)),
        "domain_files": domain_files,
        "pinned": int(
            mem.db.scalar("SELECT COUNT(*) FROM memories WHERE agent_id = ? AND pinned = 1", agent)
        ),
        "forgotten": int(mem.db.scalar("SELECT COUNT(*) FROM forgotten WHERE agent_id = ?", agent)),
    }


def _index_status(mem: Memory, tree: TreeIndex) -> dict[str, Any]:
    """What is always loaded, and the on-demand domains (top-level categories) by warm tokens."""
    domain_tokens = {
        str(r[0]): int(r[1])
        for r in mem.db.query(
            f"SELECT {_TOP_CATEGORY} AS top, SUM(tokens) FROM memories "
            "WHERE agent_id = ? AND tier = 'warm' GROUP BY top ORDER BY SUM(tokens) DESC",
            (mem.agent_id,),
        )
    }
    base = always_loaded(mem)
    return {
        "always_loaded_tokens": base.tokens,
        "always_loaded_limit": ALWAYS_LOADED_MAX_TOKENS,
        "always_loaded_left_out": base.left_out,
        "hot_tokens": count_tokens(mem.memory_md()),
        "tree_nodes": len(tree.nodes),
        "tree_tokens": count_tokens(tree.serialize()),
        "on_demand_domains": [
            {"name": name, "tokens": tokens} for name, tokens in domain_tokens.items()
        ],
    }


@dataclass(frozen=True)
class Source:
    source: str
    tokens: int
    category: str


def audit(mem: Memory, scope: str = "all", recommend: bool = True) -> dict[str, Any]:
    """Where the tokens are (by source), near-duplicate pairs, and recommendations with the
    tokens each would save."""
    if scope not in SCOPES:
        raise InvalidInput(f"unknown audit scope {scope!r}: use {', '.join(SCOPES)}")

    def wanted(*names: str) -> bool:
        return scope == "all" or scope in names

    agent = (mem.agent_id,)
    sources: list[Source] = []
    state = mem.hot()
    if wanted("hot"):
        sources.append(Source("MEMORY.md (hot memory)", count_tokens(mem.memory_md()), "hot"))
    tree = mem.trees.load(with_counts=True)
    if wanted("tree"):
        sources.append(Source("tree index", count_tokens(tree.serialize()), "tree"))
    if wanted("warm"):
        for category, tokens in mem.db.query(
            "SELECT category, SUM(tokens) FROM memories WHERE agent_id = ? AND tier = 'warm' "
            "GROUP BY category ORDER BY SUM(tokens) DESC",
            agent,
        ):
            sources.append(Source(f"warm: {category}", int(tokens), "warm"))
    if wanted("archive"):
        for tier, tokens in mem.db.query(
            "SELECT tier, SUM(tokens) FROM memories WHERE agent_id = ? AND tier != 'warm' "
            "GROUP BY tier",
            agent,
        ):
            sources.append(Source(f"{tier} archive", int(tokens), str(tier)))
    if wanted("files"):
        notes = _daily_notes(mem)
        if notes:
            sources.append(
                Source(
                    f"daily notes ({len(notes)} files)",
                    _file_tokens(notes[-MAX_DAILY_FILES:]),
                    "files",
                )
            )
    total = sum(s.tokens for s in sources)
    breakdown = [
        {
            "source": s.source,
            "tokens": s.tokens,
            "percentage": round(100.0 * s.tokens / total, 2) if total else 0.0,
            "category": s.category,
        }
        for s in sorted(sources, key=lambda s: -s.tokens)
    ]
    duplicates = _duplicates(mem) if wanted("hot", "warm") else []
    out: dict[str, Any] = {
        "scope": scope,
        "analysis": {"total_tokens": total, "breakdown": breakdown, "duplicates": duplicates},
    }
    if recommend:
        out["recommendations"] = _recommendations(mem, state, tree, duplicates)
    return out


def _duplicates(mem: Memory) -> list[dict[str, Any]]:
    """Near-duplicate pairs among hot lessons and warm memories (a lesson and the memory it was
    promoted from are one entry, not a pair)."""
    items: list[tuple[str, str, str, int]] = []  # (id, text, source, tokens)
    sources = set()
    for lesson in mem.hot().critical_lessons:
        items.append((lesson.id, lesson.text, "hot lesson", count_tokens(lesson.text)))
        sources.add(lesson.source_id)
    for record in mem.memories.in_tier("warm"):
        if record.id not in sources:
            items.append((record.id, record.text, f"warm: {record.category}", record.tokens))
    index = NearIndex(DUPLICATE_SIMILARITY)
    by_id = {i[0]: i for i in items}
    pairs: list[dict[str, Any]] = []
    for item_id, text, source, tokens in items:
        for other, ratio in index.find(text):
            o = by_id[other]
            pairs.append(
                {
                    "id_a": other,
                    "id_b": item_id,
                    "content_a": o[1],
                    "content_b": text,
                    "similarity": round(ratio, 3),
                    "sources": [o[2], source],
                    "tokens_saved_by_merging": min(o[3], tokens),
                }
            )
            if len(pairs) >= MAX_DUPLICATES:
                return pairs
        index.add(item_id, text)
    return pairs


def _recommendations(
    mem: Memory, state: HotState, tree: TreeIndex, duplicates: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    base = always_loaded(mem)
    recs = [_trim_hot(mem, tree, base), _merge_duplicates(duplicates)]
    health = hygiene.health(mem)
    recs += [
        _demote_unused(state, health),
        _distill_long(mem),
        _archive_cold(mem, health),
        _prune_empty_nodes(tree),
    ]
    flat = mem.memories.total_tokens() + count_tokens(mem.memory_md())
    recs.append(
        _recommend(
            "keep_tiered_context",
            f"a flat MEMORY.md with every memory would be {flat} tokens per prompt; the "
            f"always-loaded block is {base.tokens}",
            max(0, flat - base.tokens),
        )
    )
    return [r for r in recs if r is not None]


def _recommend(action: str, description: str, savings: int, risk: str = "low") -> dict[str, Any]:
    return {
        "action": action,
        "description": description,
        "estimated_savings_tokens": savings,
        "risk": risk,
    }


def _trim_hot(mem: Memory, tree: TreeIndex, base: AlwaysLoaded) -> dict[str, Any] | None:
    full = count_tokens(mem.memory_md()) + count_tokens(tree.serialize())
    if full <= ALWAYS_LOADED_MAX_TOKENS:
        return None
    return _recommend(
        "trim_hot",
        f"hot memory and tree take {full} tokens; the context block fits them into "
        f"{ALWAYS_LOADED_MAX_TOKENS} by leaving out {len(base.left_out)} items: "
        "remove stale events, done tasks or minor lessons (`tiermem hot --remove`)",
        full - base.tokens,
    )


def _merge_duplicates(duplicates: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not duplicates:
        return None
    return _recommend(
        "merge_duplicates",
        f"{len(duplicates)} near-duplicate pairs: keep one of each "
        "(`tiermem forget ID` archives the other)",
        sum(d["tokens_saved_by_merging"] for d in duplicates),
    )


def _demote_unused(state: HotState, health: hygiene.Health) -> dict[str, Any] | None:
    stale = [
        lesson
        for lesson in state.critical_lessons
        if lesson.importance < hygiene.CRITICAL_IMPORTANCE
    ]
    cold_lessons = [name for name, n in health.top_stale if n >= hygiene.DEMOTE_SESSIONS]
    if not (cold_lessons and stale):
        return None
    return _recommend(
        "demote_unused_lessons",
        f"{len(cold_lessons)} hot lessons unused for {hygiene.DEMOTE_SESSIONS}+ "
        "sessions: they are demoted at the next conversation-end unless pinned",
        sum(count_tokens(x.text) for x in stale[: len(cold_lessons)]),
    )


def _distill_long(mem: Memory) -> dict[str, Any] | None:
    long_rows = mem.db.query(
        "SELECT COUNT(*), COALESCE(SUM(tokens), 0) FROM memories WHERE agent_id = ? "
        "AND tier = 'warm' AND tokens > ?",
        (mem.agent_id, LONG_MEMORY_TOKENS),
    )
    n_long, long_tokens = (int(long_rows[0][0]), int(long_rows[0][1])) if long_rows else (0, 0)
    if not n_long:
        return None
    return _recommend(
        "distill_long_memories",
        f"{n_long} warm memories are over {LONG_MEMORY_TOKENS} tokens: each costs a "
        "recall budget that much; distill them into short facts (`tiermem distill`)",
        long_tokens - n_long * DISTILLED_TOKENS,
        risk="medium",
    )


def _archive_cold(mem: Memory, health: hygiene.Health) -> dict[str, Any] | None:
    if not health.cold_candidates:
        return None
    old_tokens = int(
        mem.db.scalar(
            "SELECT COALESCE(SUM(tokens), 0) FROM memories WHERE agent_id = ? AND tier = "
            "'warm' AND access_count = 0 AND created_at < ?",
            (mem.agent_id, mem.now() - hygiene.COLD_CANDIDATE_DAYS * DAY),
        )
    )
    return _recommend(
        "archive_cold_candidates",
        f"{health.cold_candidates} warm memories never recalled in "
        f"{hygiene.COLD_CANDIDATE_DAYS}+ days: `tiermem consolidate --mode daily` "
        "archives those whose score fell under the warm threshold",
        old_tokens,
    )


def _prune_empty_nodes(tree: TreeIndex) -> dict[str, Any] | None:
    empty = [
        p
        for p, n in tree.nodes.items()
        if n.warm == 0 and n.cold == 0 and not any(c.startswith(p + "/") for c in tree.nodes)
    ]
    if not empty:
        return None
    return _recommend(
        "prune_empty_tree_nodes",
        f"{len(empty)} tree nodes hold no memories: `tiermem tree --remove PATH` "
        "(or `tiermem consolidate --mode daily` once idle for 60 days)",
        sum(count_tokens(f'"{p}":"{tree.nodes[p].description}",') for p in empty),
    )
