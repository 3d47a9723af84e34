"""Step 2 of a restore: each writer's newest version of every record after the saved cursor,
authenticated and decoded, streamed page by page into the staging table (one local
transaction per page, with the cursor), several pages fetched while one is stored."""

from __future__ import annotations

import functools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
from tiermem.sync.restore.results import Progress, RestoreProgress
from tiermem.sync.restore.verify import Served, fenced
from tiermem.sync.vault.hrana import ResultSet

# ------------------------------------------------------------------ step 2: the memories


@dataclass(frozen=True)
class Streamed:
    rows: int  # rows read by this call
    pages: int
    bytes: int
    rows_seen: int  # including earlier, interrupted runs
    bytes_seen: int
    damaged: tuple[tuple[str, str, str], ...] = ()  # salvage: (record id, version, why)


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


PAGES_IN_FLIGHT: Final = 4
"""Windows of the vault fetched at once by a restore (each one page of rows, most of the time):
on a link with a long round trip, the round trips overlap instead of adding up."""


class Prefetch:
    """Remote pages in commit order: the rows after `after` up to the last of `bounds` (the
    vault's newest row when the restore began; a later push comes with the first pull), each
    writer's newest version of each record only (`store.restore_page`). `bounds` cut the range
    into windows of one page of the vault's rows each (`store.window_bounds`); `ahead` windows
    are fetched at once by a pool of threads and handed over in order, never more than `ahead`
    ahead of what the caller stored (memory stays flat however large the vault). Started as
    soon as the vault is opened, so the first pages are on their way while it is checked."""

    def __init__(
        self,
        fetch: Callable[[int, int, int], ResultSet],
        after: int,
        bounds: list[int],
        limit: int,
        ahead: int = PAGES_IN_FLIGHT,
    ) -> None:
        self._fetch, self._limit = fetch, limit
        self.after = after
        self.upto = bounds[-1] if bounds else after
        self._bounds = deque(b for b in bounds if b > after)
        self._last = after
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(ahead, thread_name_prefix="tiermem-restore")
        self._windows: deque[Future[list[list[records.RemoteRow]]]] = deque()
        for _ in range(ahead):
            self._submit()

    def _submit(self) -> None:
        if not self._bounds or self._stop.is_set():
            return
        lo, hi = self._last, self._bounds.popleft()
        self._last = hi
        self._windows.append(self._pool.submit(self._window, lo, hi))

    def _window(self, lo: int, hi: int) -> list[list[records.RemoteRow]]:
        """The rows of one window, as pages (more than one only when the server refuses a
        page as too large)."""
        pages: list[list[records.RemoteRow]] = []
        after, limit = lo, self._limit
        while not self._stop.is_set():
            result, limit = records.fit_page(functools.partial(self._fetch, after, hi), limit)
            page = [records.remote_row(tuple(r)) for r in result.rows]
            if page:
                pages.append(page)
            if len(page) < limit or page[-1].seq >= hi:
                break
            after = page[-1].seq
        return pages

    def pages(self) -> Iterator[list[records.RemoteRow]]:
        while self._windows:
            pages = self._windows.popleft().result()
            self._submit()
            yield from pages

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)


def stream_memories(
    home: Path,
    agent_id: str,
    ring: KeyRing,
    prefetch: Prefetch,
    at: str | None,
    skip: set[bytes],
    totals: tuple[int, int],
    report: Progress,
    *,
    driver: str | None,
    listed: set[tuple[bytes, str]],
    served: Served,
    salvage: bool = False,
) -> Streamed:
    """Stream every remote row after the saved cursor into the staging table, one local
    transaction per page (rows + cursor together). Rows no line lists (`listed`) are left
    out, and every row is counted in `served` for the check after the stream; a row that
    fails authentication is listed in the result, and without `salvage` nothing from its page
    on is stored (the caller stops; a resume fetches that page again)."""
    with Memory(home, agent_id, driver=driver) as mem:
        db = mem.db
        row = db.query_one(
            "SELECT cursor, rows, bytes FROM restore_progress WHERE agent_id = ?", (agent_id,)
        )
        if row is None:
            raise StorageError(f"the restore of agent {agent_id!r} lost its progress row")
        cursor, rows_before, bytes_before = int(row[0]), int(row[1]), int(row[2])
        rows = pages = size = 0
        staged = int(
            db.scalar("SELECT count(*) FROM restore_staging WHERE agent_id = ?", (agent_id,))
        )
        if cursor != prefetch.after:
            raise StorageError(f"the restore of agent {agent_id!r} changed its cursor meanwhile")
        sorter = _Sorter(ring, agent_id, at, skip, listed, served)
        halted = False  # a row failed (no salvage): nothing from there on is stored
        for page in prefetch.pages():
            size += sum(len(r.envelope) for r in page)
            batch, counts, peers = sorter.page(page)
            rows += len(page)
            pages += 1
            halted = halted or (bool(sorter.damaged) and not salvage)
            if halted:  # read on only for the check; a resume fetches this page again
                sorter.metrics.clear()
                sorter.graph.clear()
                continue
            _store_page(mem, sorter, page, batch, counts, peers)
            staged += len(batch)
            report(
                RestoreProgress(
                    "memories",
                    rows_before + rows,
                    max(totals[0], rows_before + rows),
                    bytes_before + size,
                    max(totals[1], bytes_before + size),
                    staged,
                    True,
                )
            )
        if halted:
            return Streamed(rows, pages, size, rows_before, bytes_before, tuple(sorter.damaged))
        with db.transaction():  # the windows past the last page held no row to restore
            db.execute(
                "UPDATE restore_progress SET cursor = max(cursor, ?) WHERE agent_id = ?",
                (prefetch.upto, agent_id),
            )
    return Streamed(
        rows, pages, size, rows_before + rows, bytes_before + size, tuple(sorter.damaged)
    )


def _store_page(
    mem: Memory,
    sorter: _Sorter,
    page: list[records.RemoteRow],
    batch: list[tuple[object, ...]],
    counts: list[tuple[str, memory_record.Counters]],
    peers: list[tuple[object, ...]],
) -> None:
    """One page into the home in one transaction, with the cursor past it."""
    db, agent_id = mem.db, mem.agent_id
    with db.transaction():
        _stage_rows(db, batch)
        for memory_id, counters in counts:
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
        db.execute(
            "UPDATE restore_progress SET cursor = ?, rows = rows + ?, bytes = bytes + ?, "
            "pages = pages + 1 WHERE agent_id = ?",
            (page[-1].seq, len(page), sum(len(r.envelope) for r in page), agent_id),
        )


class _Sorter:
    """Turns a page of rows into staging and peer parameters: rows no line lists (or newer
    than `at`) left out; a row that fails authentication is listed, not fatal here."""

    def __init__(
        self,
        ring: KeyRing,
        agent_id: str,
        at: str | None,
        skip: set[bytes],
        listed: set[tuple[bytes, str]],
        served: Served,
    ) -> None:
        self.ring, self.agent_id, self.at = ring, agent_id, at
        self.skip, self.listed, self.served = skip, listed, served
        self.manifest_rids: dict[bytes, bytes] = {}
        self.metrics_rids: dict[bytes, bytes] = {}
        self.damaged: list[tuple[str, str, str]] = []
        self.metrics: list[tuple[str, str, Days]] = []
        self.graph: list[graph_records.GraphItem] = []
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
            if is_manifest and fenced(self.served.roster, r) is not None:
                continue  # reported with the manifests (`verify.read_listed`)
            if not is_manifest and not self.served.admit(r, self.listed):
                continue
            try:
                if is_manifest:
                    peers.append(_peer_params(self.ring, self.agent_id, r))
                elif r.record_id == self._metrics_rid(r.device_id):
                    plaintext = records.open_row(
                        self.ring.key(r.epoch), self.agent_id, records.METRICS_TABLE, r
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
            key = self.ring.key(r.epoch)
            self.graph.append(graph_records.open_or(exc, key, self.agent_id, self.ring.id_key, r))
            return
        batch.append(params)
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
    plaintext = records.open_row(ring.key(r.epoch), agent_id, records.MANIFEST_TABLE, r)
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
    plaintext = records.open_row(ring.key(r.epoch), agent_id, records.MEMORY_TABLE, r)
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
