"""Pull: fetch what other devices pushed since the last pull and apply it.

The server's rows after a local cursor come in pages (`store.pull_page`: a version the same device
superseded is left out, so a pull after many pushes of one record fetches its newest); this
device's own rows are skipped. Each page is authenticated and decoded with no transaction held, then applied in one
short local transaction with the cursor, so an interrupted pull resumes where it stopped. Memory
rows converge by id (the highest content version wins; a row changed here and not yet sealed wins,
since its push will carry a later version) and their read counters are merged, never overwritten
(`core.reinforce`), critical states go to the per-item merge (`critical_merge.merge_remote`),
episodes and entities to theirs (`graph_records`), manifests record the other devices'
counters. Applied rows are not marked dirty (no ping-pong). Nothing a row says is trusted before it authenticates:
this device's own rows are skipped unread, and only authenticated versions move the clock
(`hlc.bounded`: at most a day past the wall clock). A row that fails authentication is never
applied; it goes to the local `sync_rejected` list, and every later pull fetches it again until it
authenticates, a newer version of its record replaces it, or the server no longer holds it."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from tiermem.core import curate, reinforce, rows, snapshot, supersession
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound
from tiermem.sync import crypto, hlc, journal, memory_record
from tiermem.sync import records as records_fmt
from tiermem.sync.crypto.roster import row_digest
from tiermem.sync.devices import epochs
from tiermem.sync.kinds import (
    critical_merge,
    graph_records,
    memory_extras,
    memory_merge,
    metrics_records,
)
from tiermem.sync.manifest import decode_manifest
from tiermem.sync.records import (
    MANIFEST_TABLE,
    MEMORY_TABLE,
    METRICS_TABLE,
    PRUNE_TABLE,
)
from tiermem.sync.session import Session
from tiermem.sync.spaces import authors
from tiermem.sync.state import CRITICAL_TABLE, Settings, state_digest
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import HranaClient, HranaError, ResultSet
from tiermem.sync.vault.retry import RetryPolicy

__all__ = [
    "PullResult",
    "apply_memory",
    "mark_applied",
    "merge_critical",
    "pull",
    "rejected_rows",
]

SEEN_EVERY: Final = 3600.0
"""LAST SEEN's resolution in seconds: a pull in the same clock hour as the last push or pull
leaves it (`sync devices` shows when a device was last seen, not each pull)."""
_RETRY_CHUNK: Final = 20
"""Record ids per request when rejected rows are fetched again (their envelopes are padded to
at least 8 KiB, and a response has a size cap)."""


@dataclass(frozen=True)
class PullResult:
    """``applied``: remote records that changed local state (``memories`` + ``critical``);
    ``skipped``: older than what is here (or changed here and not pushed yet);
    ``rejected``: rows that failed authentication or decoding and are still outstanding after
    this pull (never applied; fetched again by every pull; `sync status` lists them).
    ``repaired``: rejected rows that authenticated or were replaced this time; ``gone``: rejected
    rows the server no longer holds. ``conflicts``: conflict records the critical-state merge
    kept."""

    applied: int
    memories: int
    critical: int
    conflicts: int
    skipped: int
    rejected: int
    pages: int
    requests: int
    bytes: int
    seconds: float
    note: str
    repaired: int = 0
    gone: int = 0


@dataclass
class _PullTotals:
    applied: int = 0
    memories: int = 0
    critical: int = 0
    conflicts: int = 0
    skipped: int = 0
    rejected: int = 0
    pages: int = 0
    requests: int = 0
    bytes: int = 0
    repaired: int = 0
    gone: int = 0
    newest: str | None = None


@dataclass
class _Page:
    """A page authenticated and decoded, ready to apply."""

    memories: list[tuple[memory_record.MemoryVersion, str]] = field(default_factory=list)
    manifests: list[tuple[str, int, str]] = field(default_factory=list)
    critical: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Each writer's newest critical state (version, document) in the page."""
    graph: list[graph_records.GraphItem] = field(default_factory=list)
    newest: str = ""
    metrics: list[tuple[str, str, metrics_records.Days]] = field(default_factory=list)
    accepted: list[tuple[bytes, str]] = field(default_factory=list)
    rejected: list[tuple[int, bytes, str, str]] = field(default_factory=list)


def pull(
    session: Session, policy: RetryPolicy | None = None, *, page_size: int = 500
) -> PullResult:
    """Fetch what other devices pushed since the last pull and apply it, page by page."""
    started = time.perf_counter()
    policy = policy or RetryPolicy()
    epochs.refresh_epoch(session, policy)  # learn of a rotation before any record under it
    s = session.require_ready()
    tag = s.tag
    totals = _PullTotals()
    limit = page_size
    outstanding = _rejected_keys(session)
    while True:
        cursor = journal.read_progress(session.mem).pull_cursor

        def select(client: HranaClient, cursor: int = cursor) -> list[ResultSet]:
            nonlocal limit
            result, limit = records_fmt.fit_page(
                lambda n: client.execute(*store.pull_page(tag, cursor, n)), limit
            )
            return [result]

        results, req, _ = session.remote(s).send(select, policy)
        totals.requests += req
        page = [records_fmt.remote_row(r) for r in results[0].rows]
        if not page:
            break
        totals.pages += 1
        _apply_page(session, s, page, totals)
        if len(page) < limit:
            break
    _retry_rejected(session, s, policy, totals)
    _touch(session, s, policy, totals)
    left = _rejected_keys(session)
    totals.rejected = len(left)
    totals.repaired = max(0, len(outstanding - left) - totals.gone)
    return _finish(session, totals, time.perf_counter() - started)


def rejected_rows(session: Session) -> list[tuple[str, str, str]]:
    """The rows still outstanding: (record id hex, version, why it failed)."""
    return [
        (bytes(r[0]).hex(), str(r[1]), str(r[2]))
        for r in session.db.query(
            "SELECT record_id, version, reason FROM sync_rejected WHERE agent_id = ? "
            "ORDER BY first_at, version",
            (session.agent_id,),
        )
    ]


def _touch(session: Session, s: Settings, policy: RetryPolicy, t: _PullTotals) -> None:
    """Refresh this device's LAST SEEN once per clock hour (a push refreshes it too), so the
    pulls in between write nothing on the server; one small request, a failure fails nothing."""
    now = session.mem.now()
    earlier = (s.last_push_at, journal.read_progress(session.mem).last_pull_at)
    if any(at is not None and at // SEEN_EVERY == now // SEEN_EVERY for at in earlier):
        return
    try:
        session.remote(s).execute(*store.touch_device(s.tag, s.device_id, now), policy)
        t.requests += 1
    except HranaError:
        pass


def _rejected_keys(session: Session) -> set[tuple[bytes, str]]:
    return {
        (bytes(r[0]), str(r[1]))
        for r in session.db.query(
            "SELECT record_id, version FROM sync_rejected WHERE agent_id = ?", (session.agent_id,)
        )
    }


def _retry_rejected(session: Session, s: Settings, policy: RetryPolicy, t: _PullTotals) -> None:
    """Fetch every rejected row again (by record id, wherever the cursor is) with the newer
    versions of its record, and apply what authenticates now; forget the rows the server no
    longer holds."""
    pending = _rejected_keys(session)
    if not pending:
        return
    lowest: dict[bytes, str] = {}
    for rid, version in pending:
        lowest[rid] = min(lowest.get(rid, version), version)
    rids = sorted(lowest)
    tag = s.tag
    found: list[records_fmt.RemoteRow] = []
    for i in range(0, len(rids), _RETRY_CHUNK):
        chunk = rids[i : i + _RETRY_CHUNK]
        result = session.remote(s).execute(*store.records_by_id(tag, chunk), policy)
        t.requests += 1
        found += [records_fmt.remote_row(r) for r in result.rows]
    rows = [r for r in found if r.version >= lowest.get(r.record_id, "~")]
    if rows:
        _apply_page(session, s, rows, t, move_cursor=False)
    held = {(r.record_id, r.version) for r in found}
    gone = [(session.agent_id, rid, v) for rid, v in pending if (rid, v) not in held]
    with session.db.transaction():
        session.db.executemany(
            "DELETE FROM sync_rejected WHERE agent_id = ? AND record_id = ? AND version = ?", gone
        )
    t.gone += len(gone)


def _finish(session: Session, totals: _PullTotals, seconds: float) -> PullResult:
    """Record the pull for `status` (and `history` when it changed something)."""
    with session.db.transaction():
        session.db.execute(
            "UPDATE sync_progress SET last_pull_at = ?, last_pull_records = ?, "
            "pulls = pulls + 1 WHERE agent_id = ?",
            (session.mem.now(), totals.applied, session.agent_id),
        )
        journal.clear_error(session.mem)
    note = f"{totals.applied} applied, {totals.skipped} skipped"
    if totals.repaired:
        note += f", {totals.repaired} earlier rejected now authentic or replaced"
    if totals.gone:
        note += f", {totals.gone} earlier rejected no longer on the server"
    if totals.rejected:
        note += (
            f", {totals.rejected} REJECTED (failed authentication; fetched again by every "
            "pull; run `sync check`)"
        )
    if totals.applied or totals.rejected or totals.conflicts or totals.repaired or totals.gone:
        journal.log_event(
            session.mem,
            "error" if totals.rejected else "pull",
            totals.newest,
            totals.applied,
            totals.bytes,
            note,
        )
    return PullResult(
        applied=totals.applied,
        memories=totals.memories,
        critical=totals.critical,
        conflicts=totals.conflicts,
        skipped=totals.skipped,
        rejected=totals.rejected,
        pages=totals.pages,
        requests=totals.requests,
        bytes=totals.bytes,
        seconds=seconds,
        note=note,
        repaired=totals.repaired,
        gone=totals.gone,
    )


def _apply_page(
    session: Session,
    s: Settings,
    page: list[records_fmt.RemoteRow],
    t: _PullTotals,
    *,
    move_cursor: bool = True,
) -> None:
    """Authenticate and decode a page (no transaction held: that is the slow part), then
    apply it, note its rejected rows and move the cursor in one short local transaction."""
    decoded = _decode_page(session, s, page, t)
    with session.db.transaction():
        _apply_decoded(session, s, decoded, t)
        for device_hex, version, days in decoded.metrics:
            metrics_records.apply_metrics(session.db, session.agent_id, device_hex, version, days)
        _advance_clock(session, s, decoded.newest)
        _note_rejected(session, decoded)
        if move_cursor:
            session.db.execute(
                "UPDATE sync_progress SET pull_cursor = ? WHERE agent_id = ?",
                (page[-1].seq, session.agent_id),
            )
        t.newest = max(t.newest or "", decoded.newest) or None


def _advance_clock(session: Session, s: Settings, newest: str) -> None:
    """Move the clock to the newest authenticated version, at most a day past the wall clock
    (caller's transaction)."""
    if not newest:
        return
    now_ms = int(session.mem.now() * 1000)
    seen = str(hlc.bounded(hlc.parse(newest), now_ms, s.device_id.hex()))
    current = session.settings_or_fail().hlc
    if not current or seen > current:
        session.db.execute(
            "UPDATE sync_state SET hlc = ? WHERE agent_id = ?", (seen, session.agent_id)
        )


def _note_rejected(session: Session, page: _Page) -> None:
    """Keep the page's rejected rows for the next pulls; forget those that authenticated or
    that a newer authenticated version of their record replaces (caller's transaction)."""
    agent = session.agent_id
    session.db.executemany(
        "INSERT INTO sync_rejected (agent_id, record_id, version, seq, reason, first_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, record_id, version) DO UPDATE SET "
        "seq = excluded.seq, reason = excluded.reason, attempts = attempts + 1",
        [(agent, rid, v, seq, why, session.mem.now()) for seq, rid, v, why in page.rejected],
    )
    session.db.executemany(
        "DELETE FROM sync_rejected WHERE agent_id = ? AND record_id = ? AND version <= ?",
        [(agent, rid, v) for rid, v in page.accepted],
    )


def _decode_page(
    session: Session, s: Settings, page: list[records_fmt.RemoteRow], t: _PullTotals
) -> _Page:
    """Open every other device's row of the page; rows that fail are counted as rejected."""
    agent = session.agent_id
    id_key = epochs.id_key(session)
    critical_rid = records_fmt.record_id(id_key, CRITICAL_TABLE, agent)
    prune_rid = records_fmt.record_id(id_key, PRUNE_TABLE, records_fmt.PRUNE_KEY)
    verify = authors.verifier(session)  # a shared space's records: signed by a writer
    out = _Page()
    for row in page:
        if row.device_id == s.device_id or row.record_id == prune_rid:
            continue  # own rows and the prune horizon: not read, so nothing of them is trusted
        t.bytes += len(row.envelope)
        try:
            hlc.parse(row.version)
            epoch = crypto.parse_envelope(row.envelope).epoch
            digest = row_digest(row.record_id, row.version, row.envelope)
            key = epochs.record_key(session, epoch, digest, current=s.epoch)
            device_hex = row.device_id.hex()
            if row.record_id == critical_rid:
                doc = records_fmt.decode_critical(
                    records_fmt.open_row(key, agent, CRITICAL_TABLE, row, verify), agent
                )
                if row.version > out.critical.get(device_hex, ("", {}))[0]:
                    out.critical[device_hex] = (row.version, doc)
            elif row.record_id == records_fmt.record_id(id_key, METRICS_TABLE, device_hex):
                days = metrics_records.decode_metrics(
                    records_fmt.open_row(key, agent, METRICS_TABLE, row, verify), device_hex
                )
                out.metrics.append((device_hex, row.version, days))
            elif row.record_id == records_fmt.record_id(id_key, MANIFEST_TABLE, device_hex):
                m = decode_manifest(
                    records_fmt.open_row(key, agent, MANIFEST_TABLE, row, verify), device_hex
                )
                out.manifests.append((device_hex, m.n, row.version))
            else:
                try:
                    got = memory_record.decode_memory_version(
                        records_fmt.open_row(key, agent, MEMORY_TABLE, row, verify)
                    )
                    if records_fmt.record_id(id_key, MEMORY_TABLE, got.item.id) != row.record_id:
                        raise crypto.TamperedData("a memory record is filed under another id")
                    out.memories.append((got, got.content_version(row.version)))
                except crypto.TamperedData as exc:
                    out.graph.append(graph_records.open_or(exc, key, agent, id_key, row, verify))
        except (crypto.CryptoError, ValueError) as exc:
            out.rejected.append((row.seq, row.record_id, row.version, str(exc)[:200]))
            continue
        out.accepted.append((row.record_id, row.version))
        out.newest = max(out.newest, row.version)
    return out


def _apply_decoded(session: Session, s: Settings, page: _Page, t: _PullTotals) -> None:
    """Apply a decoded page's memories, manifests and critical state (caller's transaction)."""
    agent = session.agent_id
    inflight_up_to = int(
        session.db.scalar(
            "SELECT COALESCE(MAX(dirty_up_to), 0) FROM sync_batches WHERE agent_id = ?", (agent,)
        )
    )
    own = s.device_id.hex()
    arriving = _not_held(session, [got.item.id for got, _ in page.memories])
    for got, version in page.memories:
        counters = {d: c for d, c in got.reinforced.items() if d != own}
        grown = reinforce.merge(session.mem.memories, got.item.id, counters)
        if _apply_memory(session, got, version, inflight_up_to) or grown:
            t.applied += 1
            t.memories += 1
        else:
            t.skipped += 1
    # A fact that arrives may replace one held here, or be replaced by one (in any order).
    supersession.detect(session.mem, [i for i in arriving if _holds(session, i)])
    session.db.executemany(
        "INSERT INTO sync_peers (agent_id, device_id, last_n, last_version) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (agent_id, device_id) DO UPDATE SET "
        "last_n = max(last_n, excluded.last_n), "
        "last_version = max(last_version, excluded.last_version)",
        [(agent, d, n, v) for d, n, v in page.manifests],
    )
    if page.graph:
        t.applied += graph_records.apply(session.db, agent, page.graph, session.mem.now())
    for version, doc in sorted(page.critical.values(), key=lambda c: c[0]):
        changed, conflicts = merge_critical(session, s, doc, version)
        t.applied += int(changed)
        t.critical += int(changed)
        t.skipped += int(not changed)
        t.conflicts += conflicts


def _not_held(session: Session, ids: list[str]) -> list[str]:
    """Those of `ids` this device holds no memory of yet."""
    if not ids:
        return []
    held = {
        str(r[0])
        for r in session.db.query(
            "SELECT id FROM memories WHERE agent_id = ? AND id IN (SELECT value FROM json_each(?))",
            (session.agent_id, json.dumps(ids)),
        )
    }
    return [i for i in ids if i not in held]


def _holds(session: Session, memory_id: str) -> bool:
    return bool(
        session.db.scalar(
            "SELECT 1 FROM memories WHERE agent_id = ? AND id = ?", (session.agent_id, memory_id)
        )
    )


def _apply_memory(
    session: Session, got: memory_record.MemoryVersion, version: str, inflight: int
) -> bool:
    """Bring one remote memory version in (the caller's transaction): merged with what this
    device holds (`memory_merge`: an update is applied, a concurrent edit merged by field
    group, a clash kept as a conflict record), with its tags, expiry and links. Returns
    whether it changed anything here."""
    db, agent, item = session.db, session.agent_id, got.item
    dirty = db.scalar("SELECT seq FROM sync_dirty WHERE agent_id = ? AND id = ?", (agent, item.id))
    known = db.scalar(
        "SELECT max(COALESCE((SELECT version FROM sync_versions WHERE agent_id = ? AND id = ?"
        "), ''), COALESCE((SELECT max(COALESCE(changed, version)) FROM sync_outgoing "
        "WHERE agent_id = ? AND tbl = ? AND key = ?), ''))",
        (agent, item.id, agent, MEMORY_TABLE, item.id),
    )
    here = _held_row(session, item.id)
    current = None
    if here is not None:
        current = memory_merge.content_of(here, memory_extras.read(db, agent, item.id))
    synced = memory_merge.load(db, agent, item.id)
    pending = dirty is not None and int(dirty) > inflight
    local = memory_merge.local_side(synced, current, str(known or ""), pending)
    theirs = None
    if isinstance(item, memory_record.MemoryRow):
        theirs = memory_merge.content_of(item, got.extras)
    own = session.settings_or_fail().device_id.hex()
    out = memory_merge.merge(local, memory_merge.remote_side(got, version, theirs), own)
    if out.write:
        _write_result(session, item, here, out.content, version)
    if out.push:
        db.execute(
            "INSERT OR REPLACE INTO sync_dirty (agent_id, id) VALUES (?, ?)", (agent, item.id)
        )
    elif out.write:
        db.execute("DELETE FROM sync_dirty WHERE agent_id = ? AND id = ?", (agent, item.id))
    memory_merge.save(db, agent, item.id, out.synced)
    found = memory_merge.record_conflicts(db, agent, item.id, out.found, own, session.mem.now())
    db.execute(
        "INSERT INTO sync_versions (agent_id, id, version) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version "
        "WHERE excluded.version > sync_versions.version",
        (agent, item.id, version),
    )
    return out.write or out.push or bool(found)


def _held_row(session: Session, memory_id: str) -> rows.MemoryRow | None:
    row = session.db.query_one(
        f"SELECT {rows.column_list()} FROM memories WHERE agent_id = ? AND id = ?",
        (session.agent_id, memory_id),
    )
    return None if row is None else rows.MemoryRow.from_db(row)


def _write_result(
    session: Session,
    item: memory_record.MemoryRow | memory_record.Tombstone,
    here: rows.MemoryRow | None,
    content: memory_merge.Content | None,
    version: str,
) -> None:
    """Write a merge's result: a delete, or the content on the remote row (read counts and
    the fields no group holds come from it)."""
    if content is None:
        apply_memory(session.mem, memory_record.Tombstone(item.id))
        return
    template = item if isinstance(item, memory_record.MemoryRow) else here
    assert template is not None  # a live result comes from a side that holds the memory
    texts = [r for r in (item, here) if isinstance(r, memory_record.MemoryRow)]
    row, extras = memory_merge.build(template, content, texts)
    apply_memory(session.mem, row)
    memory_extras.write(session.db, session.agent_id, item.id, extras, version, session.mem.now())


def merge_critical(
    session: Session, s: Settings, doc: dict[str, Any], version: str
) -> tuple[bool, int]:
    """Bring a remote critical state in with the per-item merge (inside the caller's
    transaction). Returns (changed, conflicts)."""
    outcome = critical_merge.merge_remote(session.mem, doc, s.device_id.hex())
    changed, conflicts = bool(outcome.changed), int(outcome.conflicts)
    if not snapshot.pending(session.db, session.agent_id):
        body = records_fmt.encode_critical(
            critical_merge.critical_document(session.mem, s.device_id.hex())
        )
        session.db.execute(
            "UPDATE sync_state SET last_digest = ? WHERE agent_id = ?",
            (state_digest(body), session.agent_id),
        )
    session.db.execute(
        "UPDATE sync_progress SET critical_version = ? WHERE agent_id = ? AND critical_version < ?",
        (version, session.agent_id, version),
    )
    return changed, conflicts


def apply_memory(mem: Memory, item: memory_record.MemoryRow | memory_record.Tombstone) -> None:
    """Write one remote memory version into the local table through core (inside the caller's
    transaction): insert or update in place; a tombstone (forgotten or deleted there) moves the
    memory to the forgotten archive, as a forget here does, so `unforget` works on every device
    that held it; a memory that comes back leaves the archive. The table's triggers keep
    full-text search current; they also mark the id dirty, which `mark_applied` undoes."""
    if isinstance(item, memory_record.Tombstone):
        with contextlib.suppress(NotFound):  # never held here, or already forgotten here
            curate.move_to_forgotten(mem, item.id)
    else:
        rows.upsert(mem.memories, item)
        curate.drop_forgotten(mem, item.id)


def mark_applied(db: Database, agent_id: str, applied: Iterable[tuple[str, str]]) -> None:
    """Record remote memory versions as applied here (inside the caller's transaction):
    `(memory_id, version)` pairs. They are not pushed back, and older versions are ignored."""
    rows = list(applied)
    db.executemany(
        "DELETE FROM sync_dirty WHERE agent_id = ? AND id = ?", [(agent_id, m) for m, _ in rows]
    )
    db.executemany(
        "INSERT INTO sync_versions (agent_id, id, version) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version "
        "WHERE excluded.version > sync_versions.version",
        [(agent_id, m, v) for m, v in rows],
    )
