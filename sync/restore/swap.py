"""Step 3 of a restore: every staged memory moved into `memories` (through core) in one
transaction, and incremental sync told that those rows are in sync."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tiermem.core import rows
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.warm import MemoryStore
from tiermem.sync import memory_record
from tiermem.sync.kinds import memory_extras

# ----------------------------------------------------------------------- step 3: the swap


@dataclass(frozen=True)
class Swapped:
    memories: int
    tombstones: int
    kept_local: int


def swap(home: Path, agent_id: str, *, driver: str | None, clock: Callable[[], float]) -> Swapped:
    """Move every staged memory into `memories` in one transaction and drop the progress row.

    A memory written locally while the restore ran (the home was usable) is newer than the
    restored one and is kept; tombstones are not restored."""
    with Memory(home, agent_id, clock=clock, driver=driver) as mem:
        db = mem.db
        store = MemoryStore(db, agent_id)
        with db.transaction():
            if (
                db.query_one("SELECT 1 FROM restore_progress WHERE agent_id = ?", (agent_id,))
                is None
            ):
                return Swapped(0, 0, 0)  # finished by an earlier run
            counts = db.query_one(
                "SELECT count(*) FILTER (WHERE deleted = 1), count(*) FILTER (WHERE deleted = 0 "
                "AND EXISTS (SELECT 1 FROM memories m WHERE m.agent_id = s.agent_id "
                "AND m.id = s.id)) FROM restore_staging s WHERE agent_id = ?",
                (agent_id,),
            )
            assert counts is not None
            tombstones, kept_local = int(counts[0]), int(counts[1])
            dirty_before = int(db.scalar("SELECT COALESCE(MAX(seq), 0) FROM sync_dirty"))
            carried = _staged_extras(db, agent_id)
            restored = rows.insert_staged(store, "restore_staging")
            for memory_id, version, staged in carried:
                memory_extras.write(db, agent_id, memory_id, staged, version, clock())
            _adopt(db, agent_id, dirty_before)
            db.execute("DELETE FROM restore_staging WHERE agent_id = ?", (agent_id,))
            db.execute("DELETE FROM restore_progress WHERE agent_id = ?", (agent_id,))
        return Swapped(restored, tombstones, kept_local)


_NEW: Final = (
    "FROM restore_staging s WHERE agent_id = ? AND deleted = 0 AND NOT EXISTS "
    "(SELECT 1 FROM memories m WHERE m.agent_id = s.agent_id AND m.id = s.id)"
)


def _staged_extras(db: Database, agent_id: str) -> list[tuple[str, str, memory_record.Extras]]:
    """The tags, expiry and links of the staged memories about to be restored (not those
    kept local); local extras of a restored memory without any are dropped."""
    db.execute(
        f"DELETE FROM memory_extras WHERE agent_id = ? AND id IN (SELECT id {_NEW} "
        "AND extras IS NULL)",
        (agent_id, agent_id),
    )
    out = []
    for memory_id, version, text in db.query(
        f"SELECT id, version, extras {_NEW} AND extras IS NOT NULL", (agent_id,)
    ):
        tags, expires_at, links = json.loads(str(text))
        carried = memory_record.Extras(tuple(tags), expires_at, tuple(links))
        out.append((str(memory_id), str(version), carried))
    return out


def _adopt(db: Database, agent_id: str, dirty_before: int) -> None:
    """Tell incremental sync (its local tables) that the restored rows are in sync: their
    dirty marks (made by the insert triggers just now) go, their versions are known, and the
    pull continues after the last row streamed. Marks of memories written locally while the
    restore ran are older than `dirty_before` and stay, so those get pushed."""
    db.execute("DELETE FROM sync_dirty WHERE agent_id = ? AND seq > ?", (agent_id, dirty_before))
    db.execute(
        "INSERT INTO sync_versions (agent_id, id, version) SELECT agent_id, id, version "
        "FROM restore_staging WHERE agent_id = ? ON CONFLICT (agent_id, id) DO UPDATE "
        "SET version = excluded.version WHERE excluded.version > sync_versions.version",
        (agent_id,),
    )
    db.execute(
        "INSERT INTO sync_progress (agent_id, pull_cursor, critical_version) "
        "SELECT agent_id, cursor, version FROM restore_progress WHERE agent_id = ? "
        "ON CONFLICT (agent_id) DO UPDATE SET pull_cursor = max(pull_cursor, "
        "excluded.pull_cursor), critical_version = max(critical_version, "
        "excluded.critical_version)",
        (agent_id,),
    )
