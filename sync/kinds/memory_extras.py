"""A memory's tags, expiry and links as its sync record carries them: read for sealing, and
written with the memory when a pulled or restored record is applied."""

from __future__ import annotations

import json

from tiermem.core.db import Database
from tiermem.sync.memory_record import Extras

__all__ = ["read", "write"]


def read(db: Database, agent_id: str, memory_id: str) -> Extras:
    """What a record of `memory_id` carries besides the row."""
    row = db.query_one(
        "SELECT tags, expires_at FROM memory_extras WHERE agent_id = ? AND id = ?",
        (agent_id, memory_id),
    )
    tags = tuple(t for t in str(row[0]).split("\n") if t) if row else ()
    expires = None if row is None or row[1] is None else float(row[1])
    return Extras(tags, expires, tuple(sorted(_links(db, agent_id, memory_id))))


def write(
    db: Database, agent_id: str, memory_id: str, extras: Extras, version: str, now: float
) -> None:
    """Replace the tags, expiry and links of `memory_id` with those of its record of content
    `version` (inside the caller's transaction). A link belongs to both its memories: the newer
    record of the two decides it, so devices agree whichever arrives first. Links are stored
    by id: one to a memory not here yet is kept (`core.links` follows only links between
    existing memories). Upload marks the link triggers put on the other memory are undone: an
    applied change is not a local one."""
    if extras.tags or extras.expires_at is not None:
        db.execute(
            "INSERT INTO memory_extras (agent_id, id, tags, expires_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent_id, id) DO UPDATE SET tags = excluded.tags, "
            "expires_at = excluded.expires_at WHERE tags IS NOT excluded.tags "
            "OR expires_at IS NOT excluded.expires_at",
            (agent_id, memory_id, "\n".join(extras.tags), extras.expires_at),
        )
    else:
        db.execute("DELETE FROM memory_extras WHERE agent_id = ? AND id = ?", (agent_id, memory_id))
    old, new = _links(db, agent_id, memory_id), set(extras.links)
    changed = sorted(o for o in old ^ new if _known(db, agent_id, o) <= version)
    if not changed:
        return
    others = json.dumps(changed)
    marks = db.query(
        "SELECT seq, id FROM sync_dirty WHERE agent_id = ? AND id IN "
        "(SELECT value FROM json_each(?))",
        (agent_id, others),
    )
    pairs = [(agent_id, *sorted((memory_id, o))) for o in changed]
    db.executemany("DELETE FROM memory_links WHERE agent_id = ? AND a = ? AND b = ?", pairs)
    db.executemany(
        "INSERT INTO memory_links (agent_id, a, b, created_at) VALUES (?, ?, ?, ?)",
        [(*pair, now) for pair, o in zip(pairs, changed, strict=True) if o in new],
    )
    db.execute(
        "DELETE FROM sync_dirty WHERE agent_id = ? AND id IN (SELECT value FROM json_each(?))",
        (agent_id, others),
    )
    db.executemany(
        "INSERT INTO sync_dirty (seq, agent_id, id) VALUES (?, ?, ?)",
        [(seq, agent_id, other) for seq, other in marks],
    )


def _known(db: Database, agent_id: str, memory_id: str) -> str:
    """The newest content version of `memory_id` this device holds ('' for none): applied,
    pushed, or staged by a restore."""
    return str(
        db.scalar(
            "SELECT max(COALESCE((SELECT version FROM sync_versions WHERE agent_id = ? "
            "AND id = ?), ''), COALESCE((SELECT max(COALESCE(changed, version)) "
            "FROM sync_outgoing WHERE agent_id = ? AND tbl = 'memory' AND key = ?), ''), "
            "COALESCE((SELECT version FROM restore_staging WHERE agent_id = ? AND id = ?), ''))",
            (agent_id, memory_id) * 3,
        )
    )


def _links(db: Database, agent_id: str, memory_id: str) -> set[str]:
    return {
        str(r[0])
        for r in db.query(
            "SELECT b FROM memory_links WHERE agent_id = ? AND a = ? "
            "UNION SELECT a FROM memory_links WHERE agent_id = ? AND b = ?",
            (agent_id, memory_id, agent_id, memory_id),
        )
    }
