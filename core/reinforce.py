"""Reinforcement (a memory's access count and last access) as mergeable per-device counters.

A read is not a change of a memory: it must neither take the write lock nor make a new version
that sync would push over another device's edit or forget. So:

- **Deferred.** A retrieval records its hits in `Pending` (in memory, no lock). They are written
  in one go by the next write transaction of the same `Memory` (a hook of `Database`), by
  `Memory.flush_reinforcement()` or when the `Memory` is closed. A process killed before that
  loses those reads' reinforcement (bookkeeping, like the relaxed commits it replaces).
- **Counted per device.** Table `reinforcement` holds, per memory and device, a grow-only count
  and the newest access (device '' is this one, whose id is only known once sync is set up).
  The `memories` row keeps the total, `access_count = base + Σ counts`, `last_access = max(…)`,
  so scoring and listings read one column; the *base* is what the memory was stored with.
- **Synced apart from the content.** Writing a counter never marks the row for upload
  (`sync_dirty`, which only follows real changes); it marks `reinforce_dirty` instead, and sync
  sends the counters inside the memory record without claiming a newer content version. Other
  devices merge them (per device, the larger count and the newer access win: a G-counter), so
  reads are summed, never overwritten, and a forget elsewhere still wins over them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tiermem.core import rows
from tiermem.core.db import Database
from tiermem.core.metrics import MetricsStore, day_of

if TYPE_CHECKING:
    from tiermem.core.tree import TreeStore
    from tiermem.core.warm import MemoryStore

LOCAL = ""
"""The device column of this device's own counters."""

LOGGED = 20
"""Reads per memory kept in its access log (`access_log`, its last 20)."""
Counter = tuple[int, float | None]
"""(count, last access) of one device."""


@dataclass
class Pending:
    """Reads not written yet: per memory (count, newest access), per tree node the newest
    activity, per day (retrievals, context tokens, newest time)."""

    hits: dict[str, tuple[int, list[float]]] = field(default_factory=dict)
    """memory id → (reads, the times of the last `LOGGED` of them)"""
    paths: dict[str, float] = field(default_factory=dict)
    days: dict[str, tuple[int, int, float]] = field(default_factory=dict)

    def add(self, ids: Iterable[str], paths: Iterable[str], tokens: int, now: float) -> None:
        for memory_id in dict.fromkeys(ids):
            self.note(memory_id, 1, [now])
        for path in paths:
            if path:
                self.paths[path] = max(self.paths.get(path, now), now)
        day = day_of(now)
        retrievals, used, last_now = self.days.get(day, (0, 0, now))
        self.days[day] = (retrievals + 1, used + tokens, max(last_now, now))

    def note(self, memory_id: str, count: int, times: list[float]) -> None:
        have, logged = self.hits.get(memory_id, (0, []))
        self.hits[memory_id] = (have + count, sorted(logged + times)[-LOGGED:])

    def absorb(self, other: Pending) -> None:
        """Add `other`'s reads to these (reads whose write rolled back)."""
        for memory_id, (count, times) in other.hits.items():
            self.note(memory_id, count, times)
        for path, when in other.paths.items():
            self.paths[path] = max(self.paths.get(path, when), when)
        for day, (n, tokens, when) in other.days.items():
            have_n, have_tokens, have_when = self.days.get(day, (0, 0, when))
            self.days[day] = (have_n + n, have_tokens + tokens, max(have_when, when))

    def __bool__(self) -> bool:
        return bool(self.hits or self.paths or self.days)

    def take(self) -> Pending:
        """The pending reads, leaving this one empty."""
        out = Pending(self.hits, self.paths, self.days)
        self.hits, self.paths, self.days = {}, {}, {}
        return out


def write(store: MemoryStore, trees: TreeStore, metrics: MetricsStore, pending: Pending) -> None:
    """Write pending reads (inside the caller's transaction): this device's counters, the rows'
    totals, tree activity and the day's retrieval metrics."""
    add_local(store, [(mid, count, times) for mid, (count, times) in pending.hits.items()])
    for path, when in pending.paths.items():
        trees.touch({path}, when)
    for retrievals, tokens, when in pending.days.values():
        metrics.bump(when, retrievals=retrievals, context_tokens=tokens)


def add_local(store: MemoryStore, hits: Sequence[tuple[str, int, Sequence[float]]]) -> None:
    """Count `(memory id, reads, times of the last reads)` on this device's counters and the
    rows' totals, one access-log entry per time (inside the caller's transaction). A memory
    forgotten meanwhile keeps the count (an undo brings it back with it); its row is not
    recreated."""
    agent = store.agent_id
    store.db.executemany(  # only the agent's own memories: a shared space's hits are not its
        "INSERT INTO reinforcement (agent_id, id, device, count, last_access) "
        "SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM memories WHERE agent_id = ?1 "
        "AND id = ?2) OR EXISTS (SELECT 1 FROM forgotten WHERE agent_id = ?1 AND id = ?2) "
        "ON CONFLICT (agent_id, id, device) DO UPDATE SET "
        "count = count + excluded.count, "
        "last_access = max(COALESCE(last_access, 0), excluded.last_access)",
        [(agent, mid, LOCAL, count, max(times)) for mid, count, times in hits],
    )
    updates: list[tuple[object, ...]] = []
    for mid, count, times in hits:
        ordered = sorted(times)
        steps = [count - len(ordered) + 1] + [1] * (len(ordered) - 1)
        updates += [(n, when, agent, mid) for n, when in zip(steps, ordered, strict=True)]
    store.db.executemany(
        "UPDATE memories SET access_count = access_count + ?, "
        "last_access = max(COALESCE(last_access, 0), ?) WHERE agent_id = ? AND id = ?",
        updates,
    )


def counters(db: Database, agent_id: str, memory_id: str) -> dict[str, Counter]:
    """Device ('' for this one) → (count, last access) of one memory."""
    rows = db.query(
        "SELECT device, count, last_access FROM reinforcement WHERE agent_id = ? AND id = ?",
        (agent_id, memory_id),
    )
    return {str(d): (int(c), None if t is None else float(t)) for d, c, t in rows}


def counted(db: Database, agent_id: str, memory_id: str) -> int:
    """Reads counted on every device for one memory (the part of its access count that is
    not its base)."""
    return int(
        db.scalar(
            "SELECT COALESCE(SUM(count), 0) FROM reinforcement WHERE agent_id = ? AND id = ?",
            (agent_id, memory_id),
        )
    )


def merge(store: MemoryStore, memory_id: str, remote: dict[str, Counter]) -> bool:
    """Merge another device's view of a memory's counters (inside the caller's transaction):
    per device the larger count and the newer access win, this device's own ('' here) is
    never taken from elsewhere. The row's totals follow; nothing is marked for upload.
    Returns whether anything grew."""
    db, agent = store.db, store.agent_id
    local = counters(db, agent, memory_id)
    added, newest = 0, None
    for device, (count, last) in remote.items():
        have_count, have_last = local.get(device, (0, None))
        if count <= have_count and (last is None or (have_last or 0) >= last):
            continue
        added += max(count - have_count, 0)
        newest = _later(newest, last)
        db.execute(
            "INSERT INTO reinforcement (agent_id, id, device, count, last_access) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent_id, id, device) DO UPDATE SET "
            "count = max(count, excluded.count), "
            "last_access = max(COALESCE(last_access, 0), COALESCE(excluded.last_access, 0))",
            (agent, memory_id, device, count, last),
        )
    if added or newest is not None:
        db.execute(
            "UPDATE memories SET access_count = access_count + ?, "
            "last_access = max(COALESCE(last_access, 0), ?) WHERE agent_id = ? AND id = ?",
            (added, newest or 0, agent, memory_id),
        )
    return bool(added or newest is not None)


def _later(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def totals(db: Database, agent_id: str, memory_id: str) -> Counter:
    """(Σ counts, newest access) over every device for one memory."""
    return rows.counted_reads(db, agent_id, memory_id)


def totals_many(db: Database, agent_id: str, ids: Sequence[str]) -> dict[str, Counter]:
    """`totals` of the ids that have counters."""
    out: dict[str, Counter] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        rows = db.query(
            "SELECT id, SUM(count), MAX(last_access) FROM reinforcement WHERE agent_id = ? "
            f"AND id IN ({','.join('?' * len(chunk))}) GROUP BY id",
            (agent_id, *chunk),
        )
        out.update({str(i): (int(c), None if t is None else float(t)) for i, c, t in rows})
    return out
