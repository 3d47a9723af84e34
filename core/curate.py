"""Curation: what a person does to an agent's memory by hand (the TUI's actions).

Pin (consolidation never evicts a pinned memory), raise a tier (archive → warm, warm → a hot
lesson), lower a tier (hot lesson → warm, warm → cold → frozen), edit (text, category, importance),
move to the forgotten archive (the row moves to the `forgotten` table: it leaves retrieval and the
full-text index but is kept) and undo of the last forget. Also the paged, filtered listing a
browser needs on a large home (never a full load), the access history and the parts of a memory's
score.

Every function takes a `Memory` and works on that agent's rows only, in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.core import outbox, provenance, reinforce, rows
from tiermem.core.config import ScoringConfig
from tiermem.core.db import Database, Row
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.hot import HotStore
from tiermem.core.rows import NAMES, MemoryRow, insert_sql
from tiermem.core.scoring import DAY, ScoreTier, classify, decay, half_life_days, reinforcement
from tiermem.core.tokens import count_tokens
from tiermem.core.tree import normalize_path
from tiermem.core.warm import (
    COLUMNS,
    TIERS,
    NewFact,
    Tier,
    memory_id,
    normalize_text,
)

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

PAGE = 200
HISTORY = 20


@dataclass(frozen=True)
class Listed:
    """One row of a listing: the memory, its row id (the paging key) and its pin."""

    seq: int
    record: MemoryRow
    pinned: bool


@dataclass(frozen=True)
class ScoreParts:
    """`score = importance × decay × reinforcement`, with what each factor comes from."""

    importance: float
    age_days: float
    decay: float
    access_count: int
    reinforcement: float
    score: float
    band: ScoreTier
    """The tier the score alone points to (hot ≥ 0.7, warm ≥ 0.3, cold ≥ 0.05, else frozen)."""
    tau_days: float
    half_life_days: float


# -- listing -------------------------------------------------------------------------------


def _filters(
    mem: Memory, tier: str | None, category: str | None
) -> tuple[str, list[object], tuple[Tier, ...]]:
    tiers = _tiers(tier)
    sql = ""
    params: list[object] = []
    if set(tiers) != set(TIERS):
        sql += f" AND +tier IN ({','.join('?' * len(tiers))})"
        params += tiers
    if category:
        path = normalize_path(category)
        sql += " AND (category = ? OR substr(category, 1, ?) = ?)"
        params += [path, len(path) + 1, path + "/"]
    return sql, params, tiers


def _tiers(tier: str | None) -> tuple[Tier, ...]:
    if tier is None or tier == "all":
        return TIERS
    if tier == "cold":
        return ("cold", "frozen")
    if tier not in TIERS:
        raise InvalidInput(f"unknown tier {tier!r}: use warm, cold, frozen or all")
    return (tier,)


def list_memories(
    mem: Memory,
    *,
    tier: str | None = None,
    category: str | None = None,
    before_seq: int | None = None,
    limit: int = PAGE,
) -> list[Listed]:
    """Newest first, one page at a time: pass the last row's `seq` as `before_seq` for the
    next page. Walks the agent's row-id range backwards, so a page costs the same on a
    100,000-memory home as on a small one."""
    if limit < 1:
        raise InvalidInput(f"limit must be at least 1 (got {limit})")
    low, high = mem.memories.seq_low, mem.memories.seq_high
    if before_seq is not None:
        high = min(high, before_seq - 1)
    where, params, _ = _filters(mem, tier, category)
    rows = mem.db.query(
        f"SELECT seq, {COLUMNS} FROM memories "
        "WHERE seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER) AND +agent_id = ?"
        f"{where} ORDER BY seq DESC LIMIT ?",
        (str(low), str(high), mem.agent_id, *params, limit),
    )
    return [_listed(r) for r in rows]


def count_memories(mem: Memory, *, tier: str | None = None, category: str | None = None) -> int:
    where, params, _ = _filters(mem, tier, category)
    where = where.replace("+tier", "tier")  # counting may use the (agent, tier, category) index
    return int(
        mem.db.scalar(
            f"SELECT COUNT(*) FROM memories WHERE agent_id = ?{where}", (mem.agent_id, *params)
        )
    )


def _listed(row: Row) -> Listed:
    record = MemoryRow.read(row[1:])
    return Listed(seq=int(row[0]), pinned=record.pinned, record=record)


def get_listed(mem: Memory, memory_id_: str) -> Listed:
    row = mem.db.query_one(
        f"SELECT seq, {COLUMNS} FROM memories WHERE agent_id = ? AND id = ?",
        (mem.agent_id, memory_id_),
    )
    if row is None:
        raise NotFound(f"no memory {memory_id_!r}")
    return _listed(row)


def pinned_ids(db: Database, agent_id: str) -> set[str]:
    """Ids of the agent's pinned memories (consolidation never evicts these).

    A pinned memory is always warm (pinning brings it to warm, demoting unpins it), so the
    (agent, tier) index keeps this to the warm rows, bounded by warm's size limit."""
    rows = db.query(
        "SELECT id FROM memories WHERE agent_id = ? AND tier = 'warm' AND pinned = 1", (agent_id,)
    )
    return {str(r[0]) for r in rows}


def list_agents(db: Database) -> list[str]:
    """Every agent that has opened this home."""
    return [str(r[0]) for r in db.query("SELECT agent_id FROM agents ORDER BY agent_id")]


def access_history(mem: Memory, memory_id_: str, limit: int = HISTORY) -> list[float]:
    """When the memory was reinforced (retrieved or stored again), newest first."""
    rows = mem.db.query(
        "SELECT at FROM access_log WHERE agent_id = ? AND id = ? ORDER BY at DESC, rowid DESC "
        "LIMIT ?",
        (mem.agent_id, memory_id_, limit),
    )
    return [float(r[0]) for r in rows]


def hot_lesson_for(mem: Memory, memory_id_: str) -> str | None:
    """The id of the hot lesson promoted from this memory, if there is one."""
    for lesson in mem.hot().critical_lessons:
        if lesson.source_id == memory_id_:
            return lesson.id
    return None


# -- score ---------------------------------------------------------------------------------


def score_parts(record: MemoryRow, now: float, cfg: ScoringConfig) -> ScoreParts:
    age = max(0.0, (now - record.created_at) / DAY)
    d = decay(age, cfg)
    r = reinforcement(record.access_count, cfg)
    value = record.importance * d * r
    return ScoreParts(
        importance=record.importance,
        age_days=age,
        decay=d,
        access_count=record.access_count,
        reinforcement=r,
        score=value,
        band=classify(value, cfg),
        tau_days=cfg.tau_days,
        half_life_days=half_life_days(cfg),
    )


def decay_curve(
    record: MemoryRow, now: float, cfg: ScoringConfig, days: float = 90.0, points: int = 31
) -> list[float]:
    """The score from now to `days` ahead if the memory is never used again."""
    if points < 2:
        raise InvalidInput("a curve needs at least 2 points")
    step = days / (points - 1)
    return [record.score(now + i * step * DAY, cfg) for i in range(points)]


# -- actions -------------------------------------------------------------------------------


def set_pinned(mem: Memory, memory_id_: str, pinned: bool) -> Tier:
    """Pin (or unpin) a memory. Pinning an archived memory brings it back to warm, where the
    pin keeps it. Returns the memory's tier afterwards."""
    with mem.db.transaction():
        record = mem.get(memory_id_)
        mem.db.execute(
            "UPDATE memories SET pinned = ? WHERE agent_id = ? AND id = ?",
            (int(pinned), mem.agent_id, memory_id_),
        )
        if pinned and record.tier != "warm":
            mem.memories.move([memory_id_], "warm", mem.now())
            return "warm"
    return record.tier


def raise_tier(mem: Memory, memory_id_: str) -> str:
    """Cold or frozen → warm; warm → a critical lesson in hot memory. Returns where it went.

    A promoted lesson gets at least the hot threshold as importance: a person asked for it.
    """
    record = mem.get(memory_id_)
    if record.tier != "warm":
        with mem.db.transaction():
            mem.memories.move([memory_id_], "warm", mem.now())
        return "warm"
    if hot_lesson_for(mem, memory_id_) is not None:
        raise InvalidInput("this memory is already a lesson in hot memory")
    importance = max(record.importance, mem.cfg.scoring.hot_threshold)
    lesson, pruned = mem.edit_hot(
        lambda s: HotStore.add_lesson(
            s, record.text, importance, record.category, mem.now(), source_id=record.id
        )
    )
    if any(p == f"lesson: {lesson.text}" for p in pruned):
        raise InvalidInput("hot memory is full of more important lessons: nothing changed")
    with mem.db.transaction():
        provenance.note(mem, record.id, "raised by the owner")
    return "hot"


def lower_tier(mem: Memory, memory_id_: str) -> str:
    """A hot lesson made from this memory leaves hot; otherwise warm → cold → frozen (a
    demoted memory loses its pin). Returns where it went."""
    lesson = hot_lesson_for(mem, memory_id_)
    if lesson is not None:
        mem.remove_hot_item(lesson)
        return "warm"
    record = mem.get(memory_id_)
    order: dict[str, Tier] = {"warm": "cold", "cold": "frozen"}
    target = order.get(record.tier)
    if target is None:
        raise InvalidInput("this memory is already frozen: forget it to remove it")
    with mem.db.transaction():
        mem.memories.move([memory_id_], target, mem.now())
        mem.db.execute(
            "UPDATE memories SET pinned = 0 WHERE agent_id = ? AND id = ?",
            (mem.agent_id, memory_id_),
        )
    return target


def edit(
    mem: Memory,
    memory_id_: str,
    *,
    text: str | None = None,
    category: str | None = None,
    importance: float | None = None,
    urls: Sequence[str] | None = None,
    commands: Sequence[str] | None = None,
    paths: Sequence[str] | None = None,
) -> MemoryRow:
    """Change a memory's text, category, importance or metadata (URLs, commands, paths: a
    given list replaces the old one; None keeps it). Its id never changes: it was the content
    id of the memory's first text, and the new text's content id becomes an alias of it
    (`MemoryStore.resolve`), so storing the old or the new text again reinforces this memory
    instead of adding a duplicate. An edit to the text another memory has is refused."""
    now = mem.now()
    with mem.db.transaction():
        old = mem.get(memory_id_)
        fact = NewFact(
            text=old.text if text is None else text,
            category=old.category if category is None else category,
            importance=old.importance if importance is None else importance,
            urls=old.urls if urls is None else tuple(urls),
            commands=old.commands if commands is None else tuple(commands),
            paths=old.paths if paths is None else tuple(paths),
        )
        new_category = normalize_path(fact.category)
        _refuse_duplicate(mem, old.id, fact.text)
        if new_category != old.category:
            index = mem.trees.load()
            known = len(index.nodes)
            node = mem.trees.ensure(new_category, now, index)
            mem.trees.touch({node}, now)
            if len(index.nodes) != known:
                outbox.enqueue(mem.db, mem.agent_id, "tree", now)
        size = len(fact.text.encode()) + sum(
            len(v.encode()) for v in (*fact.urls, *fact.commands, *fact.paths)
        )
        mem.db.execute(
            "UPDATE memories SET text = ?, category = ?, importance = ?, size_bytes = ?, "
            "tokens = ?, urls = ?, commands = ?, paths = ? WHERE agent_id = ? AND id = ?",
            (
                fact.text,
                new_category,
                float(fact.importance),
                size,
                count_tokens(fact.text),
                "\n".join(fact.urls),
                "\n".join(fact.commands),
                "\n".join(fact.paths),
                mem.agent_id,
                old.id,
            ),
        )
        if fact.text != old.text:
            mem.memories.add_alias(fact.text, old.id)
        return mem.get(old.id)


def _refuse_duplicate(mem: Memory, own_id: str, text: str) -> None:
    """Refuse an edit to the text another memory has now (its id, or an edit, gave it)."""
    wanted = normalize_text(text)
    content_id = memory_id(mem.agent_id, text)
    for candidate in {content_id, *mem.memories.resolve([content_id])} - {own_id}:
        for other in mem.memories.get_many([candidate]):
            if normalize_text(other.text) == wanted:
                raise InvalidInput(f"that text is already stored as memory {other.id}")


def move_to_forgotten(mem: Memory, memory_id_: str) -> MemoryRow:
    """Move a memory to the forgotten archive: retrieval and the index lose it, nothing is
    deleted, and `undo_forget` brings the most recent one back."""
    with mem.db.transaction():
        row = mem.db.query_one(
            f"SELECT seq, {COLUMNS} FROM memories WHERE agent_id = ? AND id = ?",
            (mem.agent_id, memory_id_),
        )
        if row is None:
            raise NotFound(f"no memory {memory_id_!r}")
        data: dict[str, Any] = dict(zip(NAMES, row[1:], strict=True))
        data |= {
            "seq": str(row[0]),
            "access_log": access_history(mem, memory_id_),
            "counted": reinforce.counted(mem.db, mem.agent_id, memory_id_),
        }
        # delete + insert (not upsert): the newest rowid is the most recent forget
        drop_forgotten(mem, memory_id_)
        mem.db.execute(
            "INSERT INTO forgotten (agent_id, id, data, forgotten_at) VALUES (?, ?, ?, ?)",
            (mem.agent_id, memory_id_, json.dumps(data), mem.now()),
        )
        mem.db.execute(
            "DELETE FROM memories WHERE agent_id = ? AND id = ?", (mem.agent_id, memory_id_)
        )
        return MemoryRow.read(row[1:])


def drop_forgotten(mem: Memory, memory_id_: str) -> None:
    """Take a memory out of the forgotten archive because it exists again (another device
    brought it back or changed it after the forget here)."""
    mem.db.execute(
        "DELETE FROM forgotten WHERE agent_id = ? AND id = ?", (mem.agent_id, memory_id_)
    )


def last_forgotten(mem: Memory) -> MemoryRow | None:
    """The memory `undo_forget` would bring back."""
    row = _last_forgotten_row(mem)
    return None if row is None else _record_from(json.loads(row[1]))


def forgotten_count(mem: Memory) -> int:
    return int(mem.db.scalar("SELECT COUNT(*) FROM forgotten WHERE agent_id = ?", (mem.agent_id,)))


def _last_forgotten_row(mem: Memory) -> Row | None:
    return mem.db.query_one(
        "SELECT id, data FROM forgotten WHERE agent_id = ? ORDER BY rowid DESC LIMIT 1",
        (mem.agent_id,),
    )


def _record_from(data: dict[str, Any]) -> MemoryRow:
    return MemoryRow.from_stored(data)


def undo_forget(mem: Memory, memory_id_: str | None = None) -> MemoryRow:
    """Bring back the most recently forgotten memory (or the forgotten memory `memory_id_`),
    as it was (tier, pin, access history)."""
    now = mem.now()
    with mem.db.transaction():
        if memory_id_ is None:
            row = _last_forgotten_row(mem)
        else:
            row = mem.db.query_one(
                "SELECT id, data FROM forgotten WHERE agent_id = ? AND id = ?",
                (mem.agent_id, memory_id_),
            )
        if row is None:
            if memory_id_ is not None:
                raise NotFound(f"no forgotten memory {memory_id_!r}")
            raise NotFound("nothing to undo: no memory has been forgotten")
        data: dict[str, Any] = json.loads(row[1])
        if mem.memories.get_many([data["id"]]):
            raise InvalidInput(
                f"memory {data['id']} was stored again since it was forgotten: nothing to undo"
            )
        seq = int(data["seq"])
        taken = mem.db.scalar("SELECT 1 FROM memories WHERE seq = CAST(? AS INTEGER)", (str(seq),))
        if taken is not None:  # a memory stored since took the row id: use a fresh one
            seq = rows.next_seq(mem.memories)
        # The access count: its base as forgotten plus every read counted since (here or
        # on another device, while it was forgotten there or here).
        counted, last = reinforce.totals(mem.db, mem.agent_id, data["id"])
        data["access_count"] = max(int(data["access_count"]) - int(data.get("counted", 0)), 0)
        data["access_count"] += counted
        if last is not None:
            data["last_access"] = max(float(data["last_access"] or 0), last)
        mem.db.execute(
            insert_sql(),
            (str(seq), mem.agent_id, *MemoryRow.from_stored(data).stored()),
        )
        mem.trees.ensure(normalize_path(data["category"]), now)
        history: Sequence[float] = data.get("access_log", [])
        mem.db.execute(
            "DELETE FROM access_log WHERE agent_id = ? AND id = ?", (mem.agent_id, data["id"])
        )
        mem.db.executemany(
            "INSERT INTO access_log (agent_id, id, at) VALUES (?, ?, ?)",
            [(mem.agent_id, data["id"], float(at)) for at in reversed(history)],
        )
        drop_forgotten(mem, data["id"])
    return mem.get(data["id"])
