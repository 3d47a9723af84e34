"""The durable outbox (table `outbox`): a row records that critical state changed and must be
pushed; the sync engine drains it. A row means "push the current critical state", so rows
coalesce."""

from __future__ import annotations

from tiermem.core import clocks
from tiermem.core.db import Database

CRITICAL = "critical"


def enqueue(db: Database, agent_id: str, reason: str, now: float) -> None:
    """Record that critical state changed (inside the caller's transaction), and stamp the
    changed fields with the time of the change (`core.clocks`, for merging between devices)."""
    db.execute(
        "INSERT INTO outbox (agent_id, kind, reason, created_at) VALUES (?, ?, ?, ?)",
        (agent_id, CRITICAL, reason, now),
    )
    clocks.stamp(db, agent_id, now)


def pending(db: Database, agent_id: str) -> list[tuple[int, str, str, float]]:
    """Outbox rows not yet pushed: (seq, kind, reason, created_at), oldest first."""
    rows = db.query(
        "SELECT seq, kind, reason, created_at FROM outbox WHERE agent_id = ? ORDER BY seq",
        (agent_id,),
    )
    return [(int(r[0]), r[1], r[2], float(r[3])) for r in rows]


def acknowledge(db: Database, agent_id: str, up_to_seq: int) -> None:
    """Drop the rows a successful push covered (rows added meanwhile stay)."""
    db.execute("DELETE FROM outbox WHERE agent_id = ? AND seq <= ?", (agent_id, up_to_seq))
