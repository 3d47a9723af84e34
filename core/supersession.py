"""Facts that change: a memory replaced by a newer one is *superseded* — kept, never deleted,
with the memory that replaced it and when it stopped being true — and a fact the user closed
("I no longer work at X") is superseded with no successor.

Detection runs after every store (`Memory.store_many`: every front end, conversation end,
importers, pulled records): the knowledge graph's exclusive relations (where someone lives or
works, their manager, what a project uses for a job…) and, for what the graph cannot read,
two statements of the same frame with a different value (`core.frames`). The older fact by
the time it became true is the one replaced, whichever arrived first. A person or an agent
can say it outright (`supersede`) and undo a wrong one (`unsupersede`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.core import frames, outbox
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.rows import MemoryRow, column_list, normalize_text

if TYPE_CHECKING:
    from tiermem.core import graph
    from tiermem.core.engine import Memory

DREAMS = "dreams"
RECORD_CATEGORY = "conversations"
"""Where conversation end keeps one dated record per conversation (`core.conversation`)."""
CANDIDATES = 8
INLINE_LIMIT = 64
"""Memories one store indexes and compares at once; a bulk load waits for `catch_up`."""
MIN_HOT_MATCH = 12
"""Characters a hot item must have to be matched against a superseded fact's text."""
"""Older memories compared with a new one (the best full-text matches of its frame)."""
_COLUMNS = column_list()


@dataclass(frozen=True)
class Change:
    """One fact replaced (or closed, `new` None) at `at`."""

    old: MemoryRow
    new: MemoryRow | None
    at: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "old": {"id": self.old.id, "text": self.old.text, "since": iso(self.old.since)},
            "new": None if self.new is None else {"id": self.new.id, "text": self.new.text},
            "at": iso(self.at),
            "source": self.new.source if self.new is not None else self.old.source,
        }


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).date().isoformat()


def supersede(mem: Memory, old_id: str, new_id: str | None, at: float | None = None) -> Change:
    """Mark `old_id` replaced by `new_id` (None: closed with no successor) from `at` (default:
    when the new fact became true, else now). Inside the caller's transaction or its own."""
    with mem.db.transaction():
        old = mem.memories.get(_resolve(mem, old_id))
        new = None if new_id is None else mem.memories.get(_resolve(mem, new_id))
        if new is not None and new.id == old.id:
            raise InvalidInput("a memory cannot supersede itself")
        if new is not None and old.id in {m.id for m in successors(mem, new)}:
            raise InvalidInput(f"{new.id} is already superseded by {old.id}: undo that first")
        when = at if at is not None else (new.since if new is not None else mem.now())
        _mark(mem, old.id, "" if new is None else new.id, when)
        return Change(mem.memories.get(old.id), new, when)


def unsupersede(mem: Memory, memory_id: str) -> MemoryRow:
    """Make a superseded memory current again (a wrong supersession undone)."""
    with mem.db.transaction():
        record = mem.memories.get(_resolve(mem, memory_id))
        if record.superseded_at is None:
            raise InvalidInput(f"memory {record.id} is not superseded")
        mem.db.execute(
            "UPDATE memories SET superseded_by = '', superseded_at = NULL "
            "WHERE agent_id = ? AND id = ?",
            (mem.agent_id, record.id),
        )
        return mem.memories.get(record.id)


def history(mem: Memory, memory_id: str) -> list[MemoryRow]:
    """The chain a memory belongs to, oldest first: what it replaced, it, what replaced it."""
    record = mem.memories.get(_resolve(mem, memory_id))
    older: list[MemoryRow] = []
    seen = {record.id}
    current = record
    while True:
        before = _replaced(mem, current.id, seen)
        if before is None:
            break
        older.insert(0, before)
        seen.add(before.id)
        current = before
    return [*older, record, *successors(mem, record)]


def successors(mem: Memory, record: MemoryRow) -> list[MemoryRow]:
    """What replaced `record`, then what replaced that, … (cycle-safe)."""
    out: list[MemoryRow] = []
    seen = {record.id}
    nxt = record.superseded_by
    while nxt and nxt not in seen:
        found = mem.memories.get_many([nxt])
        if not found:
            break
        out.append(found[0])
        seen.add(nxt)
        nxt = found[0].superseded_by
    return out


def changes(mem: Memory, since: float, until: float | None = None) -> list[Change]:
    """Facts replaced or closed between `since` and `until` (default: now), oldest first."""
    end = mem.now() if until is None else until
    rows = mem.db.query(
        f"SELECT {_COLUMNS} FROM memories WHERE agent_id = ? AND superseded_at IS NOT NULL "
        "AND superseded_at >= ? AND superseded_at <= ? AND category != ? "
        "AND substr(category, 1, ?) != ? ORDER BY superseded_at, seq",
        (mem.agent_id, since, end, RECORD_CATEGORY, len(DREAMS), DREAMS),
    )
    olds = [MemoryRow.read(r) for r in rows]
    news = {
        m.id: m for m in mem.memories.get_many([o.superseded_by for o in olds if o.superseded_by])
    }
    return [Change(o, news.get(o.superseded_by), float(o.superseded_at or 0)) for o in olds]


def after_store(mem: Memory, stored: Sequence[tuple[str, str, str]]) -> list[Change]:
    """The knowledge graph and supersession brought up to date with memories just stored
    (inside the caller's transaction): `stored` is (id, text, category) of each new memory;
    those that state a change are indexed, then what they replace is marked."""
    if len(stored) > INLINE_LIMIT:
        return []  # a bulk load: `catch_up` reads these at the next consolidation
    changing = [
        memory_id
        for memory_id, text, category in stored
        if not category.startswith((DREAMS, RECORD_CATEGORY))
        and frames.may_say_change(text)
        and any(map(frames.says_change, frames.claims_of(text, 0.0)))
    ]
    closures: list[Any] = []
    for memory_id in changing:  # the rest wait for `catch_up` (consolidation)
        from tiermem.core import graph  # a store that states no change never loads the graph code

        closures += graph.index_one(mem, memory_id).closures
    return _detected(mem, changing, closures)


def catch_up(mem: Memory) -> graph.IndexReport:
    """The graph and supersession brought up to date with what bulk loads left behind (the
    memories after the graph's progress mark, a batch at a time): consolidation's step."""
    last = mem.db.scalar(
        "SELECT memory_seq FROM graph_progress WHERE agent_id = ?", (mem.agent_id,)
    )
    rows_after, params = mem.memories.after(int(last or 0))
    from tiermem.core import graph  # a store that states no change never loads the graph code

    ids = [
        str(r[0])
        for r in mem.db.query(
            f"SELECT id FROM memories WHERE {rows_after} ORDER BY seq LIMIT ?",
            (*params, graph.BATCH),
        )
    ]
    report = graph.index_memories(mem)
    _detected(mem, ids, report.closures)
    return report


def _detected(mem: Memory, new_ids: Sequence[str], closures: Sequence[Any]) -> list[Change]:
    found = detect(mem, new_ids, closures)
    if found and _retire_hot(mem, [c.old for c in found]):
        mem.write_memory_md()
    return found


def _retire_hot(mem: Memory, olds: Sequence[MemoryRow]) -> bool:
    """Hot memory's pending tasks, events and lessons that restate a superseded fact leave it
    (hot memory is always in context: a stale item there is a wrong answer every time)."""
    stale = [normalize_text(o.text) for o in olds]
    ids = {o.id for o in olds}

    def restates(text: str) -> bool:
        said = normalize_text(text)
        return len(said) >= MIN_HOT_MATCH and any(said in s or s in said for s in stale)

    state = mem.hot_store.load()
    ctx = state.active_context
    size = len(ctx.tasks) + len(ctx.events) + len(state.critical_lessons)
    ctx.tasks = [t for t in ctx.tasks if t.status != "pending" or not restates(t.text)]
    ctx.events = [e for e in ctx.events if not restates(e.text)]
    state.critical_lessons = [
        x for x in state.critical_lessons if x.source_id not in ids and not restates(x.text)
    ]
    if len(ctx.tasks) + len(ctx.events) + len(state.critical_lessons) == size:
        return False
    mem.hot_store.save(state, mem.now())
    outbox.enqueue(mem.db, mem.agent_id, "hot", mem.now())
    return True


def detect(mem: Memory, new_ids: Iterable[str], closures: Sequence[Any] = ()) -> list[Change]:
    """Supersessions the memories just stored make (inside the caller's transaction):
    `closures` the graph reported while indexing them, then frames for the rest."""
    found: list[Change] = []
    done: set[str] = set()
    for closure in closures:
        change = _from_closure(mem, closure)
        if change is not None:
            found.append(change)
            done.add(change.old.id)
    for new in _rows(mem, list(new_ids)):
        found += _by_frame(mem, new, done)
    return found


def _from_closure(mem: Memory, closure: Any) -> Change | None:
    """A graph closure between two memories → the older memory superseded."""
    ids = [closure.old_source, *([closure.new_source] if closure.new_source else [])]
    got = {m.id: m for m in _rows(mem, ids)}
    old = got.get(closure.old_source)
    new = got.get(closure.new_source) if closure.new_source else None
    if old is None or old.superseded_at is not None or (closure.new_source and new is None):
        return None
    if any(_derived(m) or _many_things(m) for m in (old, new) if m is not None):
        return None
    if closure.new_object and frames.fold(closure.new_object) == frames.fold(closure.old_object):
        return None  # the same value said again is not a change
    stale = frozenset({frames.fold(closure.old_object)})
    if new is not None and new.created_at < old.created_at:
        # The graph orders by the dates the facts name; the person's later word wins ("I live in
        # Lisbon", then "I moved to Porto last weekend"): the earlier said is the one replaced.
        if new.superseded_at is not None:
            return None
        old, new = new, old
        stale = frozenset({frames.fold(closure.new_object or "")})
    when = float(closure.at) if new is None or closure.at >= old.since else new.since
    _mark(mem, old.id, "" if new is None else new.id, when)
    if new is not None:
        _mark_records(mem, old, new, stale)
    return Change(old, new, when)


def _by_frame(mem: Memory, new: MemoryRow, done: set[str]) -> list[Change]:
    """Older (or, arriving late, newer) statements of the same frame as `new` with another
    value: the earlier one said is superseded."""
    if _derived(new) or _many_things(new):
        return []
    claims = [c for c in frames.claims_of(new.text, new.created_at) if frames.can_replace(c)]
    if not claims or all(c.hypothetical for c in claims):
        return []
    start = _began(claims)
    if start is not None and new.valid_from is None:
        _set_valid_from(mem, new.id, start)
        new = _rows(mem, [new.id])[0]
    out: list[Change] = []
    for other in _candidates(mem, new, claims):
        if other.id in done or other.id == new.id or _derived(other) or _many_things(other):
            continue
        others = [
            c for c in frames.claims_of(other.text, other.created_at) if frames.can_replace(c)
        ]
        pair = _replacing(claims, others, new, other)
        if pair is None:
            continue
        older, newer, claim, negated = pair
        if older.superseded_at is not None or newer.superseded_by == older.id:
            continue  # replaced already, or this would make a cycle
        successor = None if negated else newer
        when = newer.since
        _mark(mem, older.id, "" if successor is None else successor.id, when)
        out.append(Change(older, successor, when))
        done.add(older.id)
        if successor is not None:
            _mark_records(mem, older, successor, claim)
    return out


def _replacing(
    new_claims: Sequence[frames.Claim],
    other_claims: Sequence[frames.Claim],
    new: MemoryRow,
    other: MemoryRow,
) -> tuple[MemoryRow, MemoryRow, frozenset[str], bool] | None:
    """(older, newer, the older's stale values, closed without successor) when the later
    said of the two replaces a statement of the earlier; None otherwise."""
    new_is_newer = other.created_at <= new.created_at
    later, earlier = (new_claims, other_claims) if new_is_newer else (other_claims, new_claims)
    together = other.created_at == new.created_at  # one message: details, unless corrected
    for claim in later:
        for old in earlier:
            if together and not (claim.correction or claim.corrected):
                continue
            if frames.replaces(claim, old):
                older, newer = (other, new) if new_is_newer else (new, other)
                closed = claim.negated and not claim.values - old.values  # no new value given
                return older, newer, old.values - claim.values, closed
    return None


MAX_STATEMENT_WORDS = 200
"""Words past which a memory is a whole conversation or document, not a statement: it says too
many things for one changed value to replace it (only an explicit supersede does)."""


def _many_things(memory: MemoryRow) -> bool:
    return len(memory.text.split()) > MAX_STATEMENT_WORDS


def _derived(memory: MemoryRow) -> bool:
    """Dream syntheses and conversation records restate facts: they are not statements."""
    return memory.category.startswith((DREAMS, RECORD_CATEGORY))


def _mark_records(mem: Memory, older: MemoryRow, newer: MemoryRow, stale: frozenset[str]) -> None:
    """The record of the conversation the old fact came from states it too: superseded with it
    when it names the old value (a conversation record is what was true that day)."""
    if not stale or not older.source:
        return
    rows = mem.db.query(
        "SELECT id, text FROM memories WHERE agent_id = ? AND source = ? AND category = ? "
        "AND id != ? AND superseded_at IS NULL",
        (mem.agent_id, older.source, RECORD_CATEGORY, older.id),
    )
    for record_id, text in rows:
        folded = frames.fold(str(text))
        if any(value in folded for value in stale):
            _mark(mem, str(record_id), newer.id, newer.since)


def _candidates(mem: Memory, new: MemoryRow, claims: list[frames.Claim]) -> list[MemoryRow]:
    """The agent's memories that share the new one's frame words (full-text search)."""
    match = " OR ".join(dict.fromkeys(q for c in claims if (q := frames.fts_query(c))))
    if not match:
        return []
    store = mem.memories
    rows = mem.db.query(
        f"SELECT {_COLUMNS} FROM memories WHERE seq IN (SELECT rowid FROM memories_fts "
        "WHERE memories_fts MATCH ? AND rowid BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER) "
        "ORDER BY rank LIMIT ?) AND +agent_id = ?",
        (match, str(store.seq_low), str(store.seq_high), CANDIDATES, mem.agent_id),
    )
    return [MemoryRow.from_db(r) for r in rows]


def _rows(mem: Memory, ids: Sequence[str]) -> list[MemoryRow]:
    """The rows as stored: a write never counts tokens a one-shot store left uncounted (the
    tokenizer is slow to load)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = mem.db.query(
        f"SELECT {_COLUMNS} FROM memories WHERE agent_id = ? AND id IN ({marks})",
        (mem.agent_id, *ids),
    )
    return [MemoryRow.from_db(r) for r in rows]


def _mark(mem: Memory, old_id: str, new_id: str, at: float) -> None:
    mem.db.execute(
        "UPDATE memories SET superseded_by = ?, superseded_at = ? WHERE agent_id = ? AND id = ?",
        (new_id, at, mem.agent_id, old_id),
    )


def _began(claims: list[frames.Claim]) -> float | None:
    """When a statement's facts began: none of its own when it says something true now ("it
    runs on AWS, the plan is to move to GCP by October": valid from when said)."""
    present = [c for c in claims if not c.future]
    if any(c.valid_from is None for c in present):
        return None
    return next((c.valid_from for c in present or claims if c.valid_from is not None), None)


def _set_valid_from(mem: Memory, memory_id: str, when: float) -> None:
    mem.db.execute(
        "UPDATE memories SET valid_from = ? WHERE agent_id = ? AND id = ?",
        (when, mem.agent_id, memory_id),
    )


def _replaced(mem: Memory, memory_id: str, seen: set[str]) -> MemoryRow | None:
    row = mem.db.query_one(
        f"SELECT {_COLUMNS} FROM memories WHERE agent_id = ? AND superseded_by = ? "
        "AND category != ? AND substr(category, 1, ?) != ? "
        "ORDER BY superseded_at DESC LIMIT 1",
        (mem.agent_id, memory_id, RECORD_CATEGORY, len(DREAMS), DREAMS),
    )
    if row is None:
        return None
    record = MemoryRow.read(row)
    return None if record.id in seen else record


def _resolve(mem: Memory, memory_id: str) -> str:
    """A full memory id from an id or a unique prefix of one."""
    memory_id = memory_id.strip()
    if not memory_id:
        raise InvalidInput("a memory id is empty")
    rows = mem.db.query(
        "SELECT id FROM memories WHERE agent_id = ? AND substr(id, 1, ?) = ? LIMIT 2",
        (mem.agent_id, len(memory_id), memory_id),
    )
    if not rows:
        raise NotFound(f"no memory {memory_id!r}")
    if len(rows) > 1:
        raise InvalidInput(f"{memory_id!r} names more than one memory: give more of its id")
    return str(rows[0][0])
