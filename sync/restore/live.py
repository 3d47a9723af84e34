"""Memories searchable as a restore streams them: a staged memory moves into `memories` in the
transaction of the page that completes it, once it is verified on its own.

A memory is *complete* when every writer's newest version of its record that the manifests
and the checkpoint list (up to the restore's point in time) has been served, authenticated
and staged: the staged row is then the merge of exactly what the lines list, so neither a
deletion nor a replay elsewhere in the vault can change it. The lines are read before the
stream starts, which is what makes this check possible per record. Rows no line lists are
never staged (`verify.Served`), so an injected or relabelled row never becomes searchable. A
record served older than listed never completes: it stays in staging, unsearchable, until the
final check, which refuses the restore (or, with ``--salvage``, swaps it in as now).

Warm before cold: complete warm memories go live with their page; cold and frozen ones wait
until the stream has been read to the end and then go live a page at a time, so a search sees
the working set first and the archive after it.

Staging rows that went live keep their place with a mark in ``deleted`` (`LIVE`, or `KEPT` for
a memory written locally meanwhile), so the final swap still counts them and a resumed restore
neither moves them twice nor loses a newer version pushed in between (the upsert of a newer
version resets the mark)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final

from tiermem.core import rows
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.sync import memory_record
from tiermem.sync.kinds import memory_extras

__all__ = ["KEPT", "LIVE", "Completion", "go_live", "move_in", "searchable_count"]

LIVE: Final = 2
"""``restore_staging.deleted``: moved into `memories` before the end of the restore."""
KEPT: Final = 3
"""``restore_staging.deleted``: complete, but a memory written locally meanwhile was kept."""
ARCHIVE: Final = ("cold", "frozen")
_READY: Final = "temp.restore_ready"


@dataclass
class Completion:
    """Which memory records are complete: per record id, the versions the lines list as each
    writer's newest (up to `at`), less those staged so far."""

    listed: dict[bytes, list[str]]
    at: str | None
    _missing: dict[bytes, set[str]] = field(default_factory=dict)

    def staged(self, rid: bytes, version: str) -> None:
        """A served version of `rid` was authenticated and staged."""
        if rid not in self._missing:
            self._missing[rid] = self._expected(rid)
        self._missing[rid].discard(version)

    def complete(self, rid: bytes) -> bool:
        return rid in self._missing and not self._missing[rid]

    def _expected(self, rid: bytes) -> set[str]:
        newest: dict[str, str] = {}
        for version in self.listed.get(rid, ()):
            if self.at is not None and version > self.at:
                continue
            writer = version.rsplit(".", 1)[-1]
            if version > newest.get(writer, ""):
                newest[writer] = version
        return set(newest.values())


def go_live(
    mem: Memory, ids: Iterable[str], *, archive: bool, now: Callable[[], float]
) -> tuple[int, int]:
    """Move the staged memories `ids` (complete ones) into `memories`, inside the caller's
    transaction: warm ones only unless `archive`. Returns (moved, kept local)."""
    db, agent_id = mem.db, mem.agent_id
    db.execute(
        "CREATE TEMP TABLE IF NOT EXISTS restore_ready AS SELECT * FROM restore_staging WHERE 0"
    )
    db.execute(f"DELETE FROM {_READY}")
    tiers = "" if archive else f"AND COALESCE(tier, '') NOT IN {ARCHIVE!r} "
    db.execute(
        f"INSERT INTO {_READY} SELECT * FROM restore_staging WHERE agent_id = ? AND deleted = 0 "
        f"{tiers}AND id IN (SELECT value FROM json_each(?)) ORDER BY rowid",
        (agent_id, json.dumps(sorted(set(ids)))),
    )
    if db.scalar(f"SELECT NOT EXISTS (SELECT 1 FROM {_READY})"):
        return 0, 0  # a page of cold memories only: nothing to move until the archive
    _replace_restored(db, agent_id)
    kept_here = (
        f"id IN (SELECT s.id FROM {_READY} s WHERE EXISTS (SELECT 1 FROM memories m "
        "WHERE m.agent_id = s.agent_id AND m.id = s.id))"
    )
    kept = int(
        db.scalar(
            f"SELECT count(*) FROM restore_staging WHERE agent_id = ? AND {kept_here}", (agent_id,)
        )
    )
    db.execute(
        f"UPDATE restore_staging SET deleted = ? WHERE agent_id = ? AND {kept_here}",
        (KEPT, agent_id),
    )
    moved = move_in(mem, _READY, now)
    db.execute(
        "UPDATE restore_staging SET deleted = ? WHERE agent_id = ? AND deleted = 0 "
        f"AND id IN (SELECT id FROM {_READY})",
        (LIVE, agent_id),
    )
    return moved, kept


def _replace_restored(db: Database, agent_id: str) -> None:
    """A newer version of a memory this restore (or a pull) put in place earlier — pushed
    between an interrupted run and its resumption — replaces it, unless it was changed here
    since (a dirty mark): that one is kept, as any local write is."""
    db.execute(
        f"DELETE FROM memories WHERE agent_id = ? AND id IN (SELECT s.id FROM {_READY} s "
        "JOIN sync_versions v ON v.agent_id = s.agent_id AND v.id = s.id "
        "WHERE v.version < s.version AND NOT EXISTS (SELECT 1 FROM sync_dirty d "
        "WHERE d.agent_id = s.agent_id AND d.id = s.id))",
        (agent_id,),
    )


def move_in(mem: Memory, table: str, now: Callable[[], float]) -> int:
    """The memories of staging-like `table` that are not in `memories` yet moved in (with their
    tags, expiry and links), and incremental sync told they are in sync: their dirty marks go
    and their versions are known (a tombstone's too). Marks of memories written locally meanwhile stay, so those
    get pushed. Inside the caller's transaction; returns how many moved."""
    db, agent_id = mem.db, mem.agent_id
    dirty_before = int(db.scalar("SELECT COALESCE(MAX(seq), 0) FROM sync_dirty"))
    carried = _staged_extras(db, agent_id, table)
    moved = rows.insert_staged(mem.memories, table)
    for memory_id, version, staged in carried:
        memory_extras.write(db, agent_id, memory_id, staged, version, now())
    db.execute("DELETE FROM sync_dirty WHERE agent_id = ? AND seq > ?", (agent_id, dirty_before))
    db.execute(
        f"INSERT INTO sync_versions (agent_id, id, version) SELECT agent_id, id, version "
        f"FROM {table} WHERE agent_id = ? ON CONFLICT (agent_id, id) DO UPDATE "
        "SET version = excluded.version WHERE excluded.version > sync_versions.version",
        (agent_id,),
    )
    return moved


def _staged_extras(
    db: Database, agent_id: str, table: str
) -> list[tuple[str, str, memory_record.Extras]]:
    """The tags, expiry and links of the staged memories about to move in (not those kept
    local); local extras of a moved memory without any are dropped."""
    new = (
        f"FROM {table} s WHERE agent_id = ? AND deleted = 0 AND NOT EXISTS "
        "(SELECT 1 FROM memories m WHERE m.agent_id = s.agent_id AND m.id = s.id)"
    )
    db.execute(
        f"DELETE FROM memory_extras WHERE agent_id = ? AND id IN (SELECT id {new} "
        "AND extras IS NULL)",
        (agent_id, agent_id),
    )
    out = []
    for memory_id, version, text in db.query(
        f"SELECT id, version, extras {new} AND extras IS NOT NULL", (agent_id,)
    ):
        tags, expires_at, links = json.loads(str(text))
        carried = memory_record.Extras(tuple(tags), expires_at, tuple(links))
        out.append((str(memory_id), str(version), carried))
    return out


def searchable_count(db: Database, agent_id: str) -> int:
    """Memories of the restore that are searchable already."""
    return int(
        db.scalar(
            "SELECT count(*) FROM restore_staging WHERE agent_id = ? AND deleted = ?",
            (agent_id, LIVE),
        )
    )
