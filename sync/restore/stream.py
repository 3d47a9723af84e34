"""Step 2 of a restore: each writer's newest version of every record after the saved cursor,
authenticated and decoded, streamed page by page into the staging table (one local
transaction per page, with the cursor), several pages fetched while one is stored."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tiermem.core import reinforce, rows
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import StorageError
from tiermem.sync import crypto, hlc, memory_record, records
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.kinds import graph_records
from tiermem.sync.kinds.metrics_records import Days, apply_metrics, decode_metrics
from tiermem.sync.manifest import decode_manifest
from tiermem.sync.restore.live import Completion, go_live, searchable_count
from tiermem.sync.restore.member import PageHook, open_memory
from tiermem.sync.restore.prefetch import Prefetch
from tiermem.sync.restore.results import Progress, RestoreProgress
from tiermem.sync.restore.verify import Served, fenced

# ------------------------------------------------------------------ step 2: the memories


@dataclass(frozen=True)
class Streamed:
    rows: int  # rows read by this call
    pages: int
    bytes: int
    rows_seen: int  # including earlier, interrupted runs
    bytes_seen: int
    damaged: tuple[tuple[str, str, str], ...] = ()  # salvage: (record id, version, why)


ARCHIVE_CHUNK: Final = 5000
"""Cold memories moved in per transaction once every page is in: each transaction also scans
the staging table and commits, so a few large ones cost less than one per page, and a long
archive still becomes searchable as it goes."""
_STAGED_NAMES: Final = (*rows.NAMES[1:], "extras")
"""The row's columns and its tags, expiry and links (JSON, NULL when it has none)."""
_STAGE_HEAD: Final = (
    f"INSERT INTO restore_staging (agent_id, id, version, deleted, "
    f"{rows.column_list(_STAGED_NAMES)})"
)
_STAGE_MARKS: Final = f"({', '.join('?' * (4 + len(_STAGED_NAMES)))})"
_STAGE_UPSERT: Final = (
    "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version, "
    "deleted = excluded.deleted, "
    + ", ".join(f"{name} = excluded.{name}" for name in _STAGED_NAMES)
    + " WHERE excluded.version > restore_staging.version"
)
"""A newer version of an id replaces an older one, also within one statement."""


def _stage_rows(db: Database, batch: list[tuple[object, ...]]) -> None:
    db.insert_values(_STAGE_HEAD, _STAGE_MARKS, batch, _STAGE_UPSERT)


@dataclass(frozen=True)
class Streaming:
    """What a stream needs besides the rows: the vault's key ring, the point in time, the
    records read apart, the lines, and what is served and complete so far."""

    ring: KeyRing
    at: str | None
    skip: set[bytes]
    listed: set[tuple[bytes, str]]
    served: Served
    completion: Completion
    salvage: bool = False
    stored: PageHook | None = None  # a space's: who wrote each memory a page stages


def stream_memories(
    home: Path,
    agent_id: str,
    prefetch: Prefetch,
    job: Streaming,
    totals: tuple[int, int],
    report: Progress,
    *,
    driver: str | None,
) -> Streamed:
    """Stream every remote row not stored yet into the staging table, one local transaction
    per page (rows, the memories it completes made searchable, and the stored range together).
    Rows no line lists are left out, and every row is counted in `served` for the check after
    the stream; a row that fails authentication is listed in the result, and without
    `salvage` nothing from its page on is stored (the caller stops; a resume fetches that page
    again). Complete cold and frozen memories go live after the last page (`live`)."""
    with open_memory(home, agent_id, driver=driver) as mem:
        db = mem.db
        row = db.query_one(
            "SELECT cursor, rows, bytes FROM restore_progress WHERE agent_id = ?", (agent_id,)
        )
        if row is None:
            raise StorageError(f"the restore of agent {agent_id!r} lost its progress row")
        rows_before, bytes_before = int(row[1]), int(row[2])
        rows = pages = size = 0
        staged = int(
            db.scalar("SELECT count(*) FROM restore_staging WHERE agent_id = ?", (agent_id,))
        )
        counts = _Counts(staged, searchable_count(db, agent_id))
        sorter = _Sorter(job, agent_id)
        halted = False  # a row failed (no salvage): nothing from there on is stored
        for page, done in prefetch.pages():
            size += sum(len(r.envelope) for r in page)
            batch, read_counts, peers = sorter.page(page)
            rows += len(page)
            pages += bool(page)
            halted = halted or (bool(sorter.damaged) and not job.salvage)
            if halted:  # read on only for the check; a resume fetches this page again
                sorter.metrics.clear()
                sorter.graph.clear()
                continue
            _store_page(mem, sorter, page, (batch, read_counts, peers), done, counts)
            counts.last = RestoreProgress(
                "memories",
                rows_before + rows,
                max(totals[0], rows_before + rows),
                bytes_before + size,
                max(totals[1], bytes_before + size),
                counts.staged,
                True,
                counts.searchable,
            )
            if page:
                report(counts.last)
        if not halted:
            _archive(mem, job, counts, report)
    seen = (rows_before + rows, bytes_before + size)
    if halted:
        seen = (rows_before, bytes_before)
    return Streamed(rows, pages, size, *seen, tuple(sorter.damaged))


@dataclass
class _Counts:
    staged: int
    searchable: int
    last: RestoreProgress | None = None


def _archive(mem: Memory, job: Streaming, counts: _Counts, report: Progress) -> None:
    """The complete cold and frozen memories into `memories` once every page is in,
    `ARCHIVE_CHUNK` per transaction (searchable chunk by chunk)."""
    db, agent_id = mem.db, mem.agent_id
    waiting = [
        str(r[0])
        for r in db.query(
            "SELECT id FROM restore_staging WHERE agent_id = ? AND deleted = 0 ORDER BY rowid",
            (agent_id,),
        )
    ]
    ready = [i for i in waiting if job.completion.complete(job.ring.memory_rid(i))]
    for start in range(0, len(ready), ARCHIVE_CHUNK):
        with db.transaction():
            chunk = ready[start : start + ARCHIVE_CHUNK]
            moved, _ = go_live(mem, chunk, archive=True, now=mem.now)
        counts.searchable += moved
        if counts.last is not None:
            report(dataclasses.replace(counts.last, phase="archive", searchable=counts.searchable))


def _store_page(
    mem: Memory,
    sorter: _Sorter,
    page: list[records.RemoteRow],
    parts: tuple[
        list[tuple[object, ...]], list[tuple[str, memory_record.Counters]], list[tuple[object, ...]]
    ],
    done: tuple[int, int] | None,
    counts: _Counts,
) -> None:
    """One page into the home in one transaction: staged, the warm memories it completes
    made searchable, and the stored range when it ends a window."""
    db, agent_id = mem.db, mem.agent_id
    batch, read_counts, peers = parts
    with db.transaction():
        _stage_rows(db, batch)
        for memory_id, counters in read_counts:
            reinforce.merge(mem.memories, memory_id, counters)
        if peers:
            db.executemany(_PEER, peers)
        for device_hex, version, days in sorter.metrics:
            apply_metrics(db, agent_id, device_hex, version, days)
        sorter.metrics.clear()
        if sorter.graph:
            graph_records.apply(db, agent_id, sorter.graph, mem.now())
            graph_records.forget_marks(db, agent_id)
            sorter.graph.clear()
        if sorter.job.stored is not None:
            sorter.job.stored(mem, sorter.touched)
        complete = [i for i, rid in sorter.touched if sorter.job.completion.complete(rid)]
        sorter.touched.clear()
        moved, _ = go_live(mem, complete, archive=False, now=mem.now) if complete else (0, 0)
        db.execute(
            "UPDATE restore_progress SET rows = rows + ?, bytes = bytes + ?, pages = pages + ? "
            "WHERE agent_id = ?",
            (len(page), sum(len(r.envelope) for r in page), int(bool(page)), agent_id),
        )
        if done is not None:
            db.execute(
                "UPDATE restore_progress SET cursor = ? WHERE agent_id = ?", (done[0], agent_id)
            )
            db.execute(
                "UPDATE sync_progress SET pull_cursor = max(pull_cursor, ?) WHERE agent_id = ?",
                (done[1], agent_id),
            )
    counts.staged += len(batch)
    counts.searchable += moved


class _Sorter:
    """Turns a page of rows into staging and peer parameters: rows no line lists (or newer
    than `at`) left out; a row that fails authentication is listed, not fatal here. Each
    memory staged is noted (`touched`) with its record id, for the completion check."""

    def __init__(self, job: Streaming, agent_id: str) -> None:
        self.job = job
        self.ring, self.agent_id, self.at = job.ring, agent_id, job.at
        self.skip, self.listed, self.served = job.skip, job.listed, job.served
        self.manifest_rids: dict[bytes, bytes] = {}
        self.metrics_rids: dict[bytes, bytes] = {}
        self.damaged: list[tuple[str, str, str]] = []
        self.metrics: list[tuple[str, str, Days]] = []
        self.graph: list[graph_records.GraphItem] = []
        self.touched: list[tuple[str, bytes]] = []
        self.versions: set[str] = set()  # checked already (a push gives its rows one version)

    def page(
        self, page: list[records.RemoteRow]
    ) -> tuple[
        list[tuple[object, ...]], list[tuple[str, memory_record.Counters]], list[tuple[object, ...]]
    ]:
        """(staging parameters, read counters per memory id, peer parameters) of a page."""
        batch: list[tuple[object, ...]] = []
        counts: list[tuple[str, memory_record.Counters]] = []
        peers: list[tuple[object, ...]] = []
        for r in page:
            if r.record_id in self.skip:
                continue
            if r.device_id not in self.manifest_rids:
                self.manifest_rids[r.device_id] = records.record_id(
                    self.ring.id_key, records.MANIFEST_TABLE, r.device_id.hex()
                )
            is_manifest = r.record_id == self.manifest_rids[r.device_id]
            if self.at is not None and r.version > self.at:
                continue
            if is_manifest and fenced(self.served.roster, r, listing=True) is not None:
                continue  # reported with the manifests (`verify.read_listed`)
            if not is_manifest and not self.served.admit(r, self.listed):
                continue
            try:
                if is_manifest:
                    peers.append(_peer_params(self.ring, self.agent_id, r))
                elif r.record_id == self._metrics_rid(r.device_id):
                    plaintext = records.open_row(
                        self.ring.key(r.epoch),
                        self.agent_id,
                        records.METRICS_TABLE,
                        r,
                        self.ring.verify,
                    )
                    days = decode_metrics(plaintext, r.device_id.hex())
                    self.metrics.append((r.device_id.hex(), r.version, days))
                else:
                    self._stage(r, batch, counts)
            except crypto.CryptoError as exc:
                self.damaged.append((r.record_id.hex(), r.version, str(exc)))
        return batch, counts, peers

    def _stage(
        self,
        r: records.RemoteRow,
        batch: list[tuple[object, ...]],
        counts: list[tuple[str, memory_record.Counters]],
    ) -> None:
        """A memory row into the staging parameters (and its read counters into `counts`), or
        an episode or entity record into `self.graph`."""
        try:
            params, counters = _memory_params(self.ring, self.agent_id, r, self.versions)
        except crypto.TamperedData as exc:
            key, verify = self.ring.key(r.epoch), self.ring.verify
            self.graph.append(
                graph_records.open_or(exc, key, self.agent_id, self.ring.id_key, r, verify)
            )
            return
        batch.append(params)
        self.job.completion.staged(r.record_id, r.version)
        self.touched.append((str(params[1]), r.record_id))
        if counters:
            counts.append((str(params[1]), counters))

    def _metrics_rid(self, device: bytes) -> bytes:
        if device not in self.metrics_rids:
            self.metrics_rids[device] = records.record_id(
                self.ring.id_key, records.METRICS_TABLE, device.hex()
            )
        return self.metrics_rids[device]


_PEER: Final = (
    "INSERT INTO sync_peers (agent_id, device_id, last_n, last_version) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (agent_id, device_id) DO UPDATE SET last_n = excluded.last_n, "
    "last_version = excluded.last_version WHERE excluded.last_n > sync_peers.last_n"
)


def _peer_params(ring: KeyRing, agent_id: str, r: records.RemoteRow) -> tuple[object, ...]:
    """A device's manifest: the highest push counter seen per device (what a later `sync
    check` compares the server with, to see a rollback)."""
    plaintext = records.open_row(
        ring.key(r.epoch), agent_id, records.MANIFEST_TABLE, r, ring.verify
    )
    manifest = decode_manifest(plaintext, r.device_id.hex())
    return (agent_id, manifest.device, manifest.n, r.version)


def _memory_params(
    ring: KeyRing, agent_id: str, r: records.RemoteRow, versions: set[str]
) -> tuple[tuple[object, ...], memory_record.Counters]:
    """Authenticate and decode one memory record into staging-table parameters (staged by
    its content version, so a record that only carries read counters never wins over a
    newer edit or forget) and its read counters."""
    if r.version not in versions:
        try:
            hlc.parse(r.version)
        except ValueError:
            raise crypto.TamperedData("a record has a malformed version") from None
        versions.add(r.version)
    plaintext = records.open_row(ring.key(r.epoch), agent_id, records.MEMORY_TABLE, r, ring.verify)
    got = memory_record.decode_memory_version(plaintext)
    item, version = got.item, got.content_version(r.version)
    if ring.memory_rid(item.id) != r.record_id:
        raise crypto.TamperedData("a memory record was moved to another record id")
    if isinstance(item, memory_record.Tombstone):
        return (agent_id, item.id, version, 1, *([None] * len(_STAGED_NAMES))), got.reinforced
    carried = got.extras
    staged = None
    if carried != memory_record.Extras():
        staged = json.dumps([list(carried.tags), carried.expires_at, list(carried.links)])
    return (agent_id, item.id, version, 0, *item.columns(), staged), got.reinforced
