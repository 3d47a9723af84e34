"""Step 3 of a restore: the staged memories that did not go live during the stream (with
``--salvage``, or the last ones of a resumed run) moved into `memories` (through core) in one
transaction, and incremental sync told that those rows are in sync."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tiermem.sync import records
from tiermem.sync.restore import checkpoint_copy
from tiermem.sync.restore.live import KEPT, LIVE, move_in
from tiermem.sync.restore.member import open_memory

# ----------------------------------------------------------------------- step 3: the swap


@dataclass(frozen=True)
class Swapped:
    memories: int
    tombstones: int
    kept_local: int


def swap(
    home: Path,
    agent_id: str,
    *,
    driver: str | None,
    clock: Callable[[], float],
    checkpoint: tuple[bytes, tuple[records.RemoteRow, ...]] | None = None,
) -> Swapped:
    """Move every staged memory not in place yet into `memories` in one transaction and drop
    the progress row; count those that went live during the stream too. `checkpoint`: the
    vault's tag and the prune record's versions the restore checked the vault against, kept
    as this device's copy (`checkpoint_copy`) in the same transaction.

    A memory written locally while the restore ran (the home was usable) is newer than the
    restored one and is kept; tombstones are not restored."""
    with open_memory(home, agent_id, clock=clock, driver=driver) as mem:
        db = mem.db
        with db.transaction():
            if (
                db.query_one("SELECT 1 FROM restore_progress WHERE agent_id = ?", (agent_id,))
                is None
            ):
                return Swapped(0, 0, 0)  # finished by an earlier run
            counts = db.query_one(
                "SELECT count(*) FILTER (WHERE deleted = 1), count(*) FILTER (WHERE deleted = ?), "
                "count(*) FILTER (WHERE deleted = ? OR (deleted = 0 AND EXISTS (SELECT 1 "
                "FROM memories m WHERE m.agent_id = s.agent_id AND m.id = s.id))) "
                "FROM restore_staging s WHERE agent_id = ?",
                (LIVE, KEPT, agent_id),
            )
            assert counts is not None
            tombstones, live, kept_local = int(counts[0]), int(counts[1]), int(counts[2])
            restored = move_in(mem, "restore_staging", clock)
            db.execute(
                "INSERT INTO sync_progress (agent_id, pull_cursor, critical_version) "
                "SELECT agent_id, 0, version FROM restore_progress WHERE agent_id = ? "
                "ON CONFLICT (agent_id) DO UPDATE SET critical_version = "
                "max(critical_version, excluded.critical_version)",
                (agent_id,),
            )
            db.execute("DELETE FROM restore_staging WHERE agent_id = ?", (agent_id,))
            db.execute("DELETE FROM restore_progress WHERE agent_id = ?", (agent_id,))
            if checkpoint is not None:
                checkpoint_copy.save(db, agent_id, *checkpoint)
        return Swapped(live + restored, tombstones, kept_local)
