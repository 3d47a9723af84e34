"""A memory's extras (tags and expiry date), and the move of expired memories to the cold archive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tiermem.core.errors import InvalidInput
from tiermem.core.hygiene.sessions import log_action

if TYPE_CHECKING:
    from tiermem.core.engine import Memory


def set_extras(
    mem: Memory, memory_id_: str, tags: Sequence[str], expires_at: float | None
) -> tuple[str, ...]:
    """Add tags (kept as a union) and set the expiry of a memory; returns its tags."""
    clean = [" ".join(t.split()) for t in tags]
    if any(not t for t in clean) or any(len(t) > 64 or "\n" in t for t in clean):
        raise InvalidInput("tags must be non-empty and at most 64 characters")
    if len(clean) > 20:
        raise InvalidInput("at most 20 tags")
    old = extras_for(mem, [memory_id_]).get(memory_id_, ((), None))
    merged = tuple(dict.fromkeys((*old[0], *clean)))[:20]
    expiry = expires_at if expires_at is not None else old[1]
    if not merged and expiry is None:
        return ()
    mem.db.execute(
        "INSERT INTO memory_extras (agent_id, id, tags, expires_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO UPDATE SET tags = excluded.tags, "
        "expires_at = excluded.expires_at",
        (mem.agent_id, memory_id_, "\n".join(merged), expiry),
    )
    return merged


def extras_for(mem: Memory, ids: Sequence[str]) -> dict[str, tuple[tuple[str, ...], float | None]]:
    out: dict[str, tuple[tuple[str, ...], float | None]] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        rows = mem.db.query(
            f"SELECT id, tags, expires_at FROM memory_extras WHERE agent_id = ? AND id IN "
            f"({','.join('?' * len(chunk))})",
            (mem.agent_id, *chunk),
        )
        for memory_id_, tags, expires in rows:
            out[str(memory_id_)] = (
                tuple(t for t in str(tags).split("\n") if t),
                None if expires is None else float(expires),
            )
    return out


def archive_expired(mem: Memory) -> list[str]:
    """Warm memories whose expiry date has passed move to the cold archive."""
    now = mem.now()
    rows = mem.db.query(
        "SELECT e.id FROM memory_extras e JOIN memories m ON m.agent_id = e.agent_id "
        "AND m.id = e.id WHERE e.agent_id = ? AND e.expires_at IS NOT NULL "
        "AND e.expires_at <= ? AND m.tier = 'warm'",
        (mem.agent_id, now),
    )
    ids = [str(r[0]) for r in rows]
    if ids:
        with mem.db.transaction():
            mem.memories.move(ids, "cold", now)
            for memory_id_ in ids:
                log_action(mem, "expire", memory_id_, "", "expiry date passed")
    return ids
