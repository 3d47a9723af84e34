"""This device's local sync bookkeeping: the event history (`sync history`), the last error
(`sync status`) and the pull/manifest progress, all in the home's database."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from tiermem.core.engine import Memory
from tiermem.sync import hlc

log = logging.getLogger(__name__)

__all__ = [
    "HISTORY_KEEP",
    "Progress",
    "SyncEvent",
    "clear_error",
    "clock_ahead",
    "ensure_progress",
    "history",
    "log_event",
    "read_progress",
    "record_error",
    "rejected_count",
    "repair_clock",
]

HISTORY_KEEP: Final = 1000


@dataclass(frozen=True)
class SyncEvent:
    """One line of `history`: kind is 'push', 'pull' or 'error'."""

    at: float
    kind: str
    version: str | None
    records: int
    bytes: int
    note: str


@dataclass(frozen=True)
class Progress:
    pull_cursor: int
    manifest_n: int
    critical_version: str
    last_pull_at: float | None
    last_pull_records: int
    pulls: int


def record_error(mem: Memory, message: str, retry_at: float | None) -> None:
    """Remember the last failure (and when the next attempt is due) for `status`."""
    log.warning("sync[%s] failed: %s", mem.agent_id, message)
    with mem.db.transaction():
        mem.db.execute(
            "UPDATE sync_state SET last_error = ?, last_error_at = ?, retry_at = ? "
            "WHERE agent_id = ?",
            (message, mem.now(), retry_at, mem.agent_id),
        )


def clear_error(mem: Memory) -> None:
    """Forget the last failure (inside the caller's transaction)."""
    mem.db.execute(
        "UPDATE sync_state SET last_error = NULL, last_error_at = NULL, retry_at = NULL "
        "WHERE agent_id = ?",
        (mem.agent_id,),
    )


def log_event(
    mem: Memory, kind: str, version: str | None, records: int, size: int, note: str
) -> None:
    """Add one line to the history, keeping the newest `HISTORY_KEEP` (without waiting for
    fsync: a line lost to a power cut is harmless, and every push writes one)."""
    log.info("sync[%s] %s: %d record(s), %d bytes; %s", mem.agent_id, kind, records, size, note)
    with mem.db.relaxed_transaction():
        mem.db.execute(
            "INSERT INTO sync_log (agent_id, at, kind, version, records, bytes, note) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (mem.agent_id, mem.now(), kind, version, records, size, note),
        )
        mem.db.execute(
            "DELETE FROM sync_log WHERE agent_id = ? AND seq <= ("
            "SELECT max(seq) FROM sync_log WHERE agent_id = ?) - ?",
            (mem.agent_id, mem.agent_id, HISTORY_KEEP),
        )


def history(mem: Memory, limit: int = 50) -> list[SyncEvent]:
    """The newest pushes, pulls and errors first (the last `HISTORY_KEEP` are kept)."""
    rows = mem.db.query(
        "SELECT at, kind, version, records, bytes, note FROM sync_log WHERE agent_id = ? "
        "ORDER BY seq DESC LIMIT ?",
        (mem.agent_id, limit),
    )
    return [
        SyncEvent(
            float(r[0]),
            str(r[1]),
            None if r[2] is None else str(r[2]),
            int(r[3]),
            int(r[4]),
            str(r[5]),
        )
        for r in rows
    ]


def ensure_progress(mem: Memory) -> None:
    """Create this agent's progress row on first use."""
    if mem.db.query_one("SELECT 1 FROM sync_progress WHERE agent_id = ?", (mem.agent_id,)):
        return
    with mem.db.transaction():
        mem.db.execute("INSERT OR IGNORE INTO sync_progress (agent_id) VALUES (?)", (mem.agent_id,))


def read_progress(mem: Memory) -> Progress:
    ensure_progress(mem)
    row = mem.db.query_one(
        "SELECT pull_cursor, manifest_n, critical_version, last_pull_at, last_pull_records, "
        "pulls FROM sync_progress WHERE agent_id = ?",
        (mem.agent_id,),
    )
    assert row is not None
    return Progress(
        int(row[0]),
        int(row[1]),
        str(row[2]),
        None if row[3] is None else float(row[3]),
        int(row[4]),
        int(row[5]),
    )


def clock_ahead(mem: Memory, clock: str | None = None) -> str | None:
    """This device's sync clock when it is further past the wall clock than any version may
    move it (a clock poisoned by an older tiermem), else None. `clock`: the clock as the
    caller just read it (`Settings.hlc`), else it is read here."""
    if clock is None:
        row = mem.db.query_one("SELECT hlc FROM sync_state WHERE agent_id = ?", (mem.agent_id,))
        clock = None if row is None else row[0]
    if not clock:
        return None
    try:
        parsed = hlc.parse(str(clock))
    except ValueError:
        return str(clock)
    return str(parsed) if hlc.ahead(parsed, int(mem.now() * 1000)) else None


def repair_clock(mem: Memory, device_hex: str, clock: str | None = None) -> str | None:
    """Set a poisoned clock back to the newest authenticated version this home holds (pushed
    here or applied from a record that authenticated), or the wall clock when that is later.
    Returns the clock set, or None when the clock was fine. `clock`: as for `clock_ahead`."""
    poisoned = clock_ahead(mem, clock)
    if poisoned is None:
        return None
    agent = mem.agent_id
    now_ms = int(mem.now() * 1000)
    candidates = [hlc.Hlc(now_ms, 0, device_hex)]
    for (version,) in mem.db.query(
        "SELECT max(version) FROM sync_versions WHERE agent_id = ? UNION ALL "
        "SELECT critical_version FROM sync_progress WHERE agent_id = ? UNION ALL "
        "SELECT last_push_version FROM sync_state WHERE agent_id = ? UNION ALL "
        "SELECT max(last_version) FROM sync_peers WHERE agent_id = ?",
        (agent,) * 4,
    ):
        try:
            seen = hlc.parse(str(version or ""))
        except ValueError:
            continue
        candidates.append(hlc.Hlc(seen.wall_ms, seen.counter, device_hex))
    repaired = str(max(candidates))
    with mem.db.transaction():
        mem.db.execute("UPDATE sync_state SET hlc = ? WHERE agent_id = ?", (repaired, agent))
    log_event(
        mem, "error", None, 0, 0, f"the sync clock was ahead ({poisoned}); set back to {repaired}"
    )
    return repaired


def rejected_count(mem: Memory) -> int:
    """Remote rows that failed authentication and are fetched again by every pull."""
    return int(
        mem.db.scalar("SELECT count(*) FROM sync_rejected WHERE agent_id = ?", (mem.agent_id,))
    )
