"""Sealing push batches: the critical state (when it changed), the next changed memory rows
up to a byte budget and the manifest numbering them, all under one HLC version; saved as in
flight before they are sent, and read back until the server confirms them.

A memory whose content changed (`sync_dirty`) is sealed as a new version; one whose only
change is reads counted here (`reinforce_dirty`) is sealed with the content version it already
had (`changed`), so a read never overrides an edit or a forget made elsewhere. Both carry the
memory's read counters (`core.reinforce`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from tiermem.core import reinforce, rows
from tiermem.sync import hlc, memory_record
from tiermem.sync import records as records_fmt
from tiermem.sync.devices import epochs
from tiermem.sync.kinds import critical_merge, graph_records, memory_extras, memory_merge
from tiermem.sync.kinds.metrics_records import own_metrics
from tiermem.sync.manifest import Manifest, ManifestEntry, encode_manifest
from tiermem.sync.records import MANIFEST_TABLE, MEMORY_TABLE, METRICS_TABLE
from tiermem.sync.session import Session
from tiermem.sync.spaces import authors
from tiermem.sync.state import (
    CRITICAL_TABLE,
    Settings,
    state_digest,
)

__all__ = [
    "Batch",
    "Row",
    "critical_candidate",
    "critical_document",
    "inflight_batches",
    "seal_batch",
]

_DIRTY_PAGE: Final = 500
_MEMORY_COLUMNS: Final = rows.column_list(alias="m")


Row = tuple[str, str, bytes, str, int, int, bytes]  # table, key, rid, version, epoch, pos, env
_Marks = tuple[int, int, int, str, int, int, int]
"""dirty, outbox and counts marks, last HLC, manifest n, epoch, graph mark"""


@dataclass(frozen=True)
class Batch:
    """One sealed push request (saved in `sync_batches` / `sync_outgoing` until confirmed)."""

    n: int
    version: str
    dirty_up_to: int
    outbox_up_to: int
    digest: str | None  # of the critical state it carries, if any
    rows: list[Row]
    counts_up_to: int = 0
    changed: dict[str, str] = field(default_factory=dict)
    """memory id → the content version of a record that only carries read counters"""
    graph_up_to: int = 0
    """The `graph_dirty` mark (episodes and entities) the batch covers."""
    bases: dict[str, memory_merge.Synced] = field(default_factory=dict)
    """memory id → the base its sealed change leaves (`memory_merge`), saved with the batch"""


def inflight_batches(session: Session) -> list[Batch]:
    """The batches sealed and saved but not confirmed yet, in order."""
    metas = session.db.query(
        "SELECT n, version, dirty_up_to, outbox_up_to, digest, counts_up_to, graph_up_to "
        "FROM sync_batches "
        "WHERE agent_id = ? ORDER BY n",
        (session.agent_id,),
    )
    out = []
    for n, version, dirty_up_to, outbox_up_to, digest, counts_up_to, graph_up_to in metas:
        saved = session.db.query(
            "SELECT tbl, key, record_id, version, epoch, pos, envelope, changed "
            "FROM sync_outgoing WHERE agent_id = ? AND n = ? ORDER BY pos",
            (session.agent_id, n),
        )
        out.append(
            Batch(
                int(n),
                str(version),
                int(dirty_up_to),
                int(outbox_up_to),
                None if digest is None else str(digest),
                [
                    (
                        str(r[0]),
                        str(r[1]),
                        bytes(r[2]),
                        str(r[3]),
                        int(r[4]),
                        int(r[5]),
                        bytes(r[6]),
                    )
                    for r in saved
                ],
                int(counts_up_to),
                {str(r[1]): str(r[7]) for r in saved if r[7] is not None},
                int(graph_up_to),
            )
        )
    return out


def critical_candidate(
    session: Session, s: Settings, outbox_after: int, newest: int | None = None
) -> tuple[int, bytes, str] | None:
    """(outbox up_to, body, digest) when the outbox holds changes after `outbox_after`;
    `newest`: its newest row's seq, when the caller has just read it."""
    up_to = newest
    if up_to is None:
        up_to = session.db.scalar(
            "SELECT MAX(seq) FROM outbox WHERE agent_id = ? AND seq > ?",
            (session.agent_id, outbox_after),
        )
    if up_to is None or up_to <= outbox_after:
        return None
    body = records_fmt.encode_critical(critical_document(session, s))
    return int(up_to), body, state_digest(body)


_MARKS_WITH: Final = (
    "SELECT COALESCE(MAX(b.dirty_up_to), 0), COALESCE(MAX(b.outbox_up_to), 0), "
    "COALESCE(MAX(b.counts_up_to), 0), s.hlc, p.manifest_n, s.epoch, "
    "COALESCE(MAX(b.graph_up_to), 0){} FROM sync_state s "
    "LEFT JOIN sync_progress p ON p.agent_id = s.agent_id "
    "LEFT JOIN sync_batches b ON b.agent_id = s.agent_id WHERE s.agent_id = ?1"
)
"""The marks (`_seal_marks`) and `{}`, more columns (`_seal_view`)."""
_MARKS_SQL: Final = _MARKS_WITH.format("")
_VIEW_SQL: Final = _MARKS_WITH.format(
    ", (SELECT digest FROM sync_batches WHERE agent_id = ?1 AND digest IS NOT NULL "
    "ORDER BY n DESC LIMIT 1), s.last_digest, "
    "(SELECT MAX(seq) FROM outbox WHERE agent_id = ?1), "
    "EXISTS (SELECT 1 FROM sync_dirty WHERE agent_id = ?1), "
    "EXISTS (SELECT 1 FROM reinforce_dirty WHERE agent_id = ?1), "
    "EXISTS (SELECT 1 FROM graph_dirty WHERE agent_id = ?1), "
    "(SELECT digest FROM sync_metrics_pushed WHERE agent_id = ?1), "
    "(SELECT json_group_array(json_array(device_id, last_n)) FROM sync_peers "
    "WHERE agent_id = ?1 AND last_n > 0)"
)


@dataclass(frozen=True)
class _View:
    """What sealing reads first, in one statement: the marks it builds on and what is there
    to seal (queues found empty are not read again)."""

    marks: _Marks
    sealed_digest: str | None
    """The critical state's digest in the newest batch in flight, else the last pushed."""
    newest_outbox: int | None
    dirty: bool
    counts: bool
    graph: bool
    metrics_digest: str | None
    peers: list[tuple[str, int]]
    """Per device, the highest push of it applied here."""


def _marks(row: Sequence[Any]) -> _Marks:
    return (
        int(row[0]),
        int(row[1]),
        int(row[2]),
        str(row[3] or ""),
        int(row[4] or 0),
        int(row[5]),
        int(row[6]),
    )


def _seal_marks(session: Session) -> _Marks:
    """What a sealed batch builds on: (dirty and outbox marks of the batches in flight,
    the last HLC issued, the manifest counter, the epoch)."""
    row = session.db.query_one(_MARKS_SQL, (session.agent_id,))
    assert row is not None
    return _marks(row)


def _seal_view(session: Session) -> _View:
    row = session.db.query_one(_VIEW_SQL, (session.agent_id,))
    assert row is not None
    sealed = row[7] or row[8]
    return _View(
        _marks(row),
        None if sealed is None else str(sealed),
        None if row[9] is None else int(row[9]),
        bool(row[10]),
        bool(row[11]),
        bool(row[12]),
        None if row[13] is None else str(row[13]),
        msgspec.json.decode(row[14], type=list[tuple[str, int]]),
    )


def seal_batch(session: Session, s: Settings, budget: int) -> Batch | None:
    """Seal the next push request (critical state + changed memory rows + its manifest)
    and save it as in flight; None when there is nothing new to send. Changes covered by
    batches still in flight are not sealed again.

    The reading and sealing happen outside any write transaction (a long one would stall
    every other writer of the home); the short transaction that saves the batch first
    checks that nothing it built on moved meanwhile (another push, a pull), else it seals
    again."""
    while True:
        view = _seal_view(session)
        marks = view.marks
        sealed = _seal_rows(session, s, budget, view)
        if sealed is None:
            return None
        batch, metrics_digest = sealed
        with session.db.transaction():
            if _seal_marks(session) != marks:
                continue
            _save_batch(session, batch)
            if metrics_digest is not None:
                session.db.execute(
                    "INSERT INTO sync_metrics_pushed (agent_id, digest) VALUES (?, ?) "
                    "ON CONFLICT (agent_id) DO UPDATE SET digest = excluded.digest",
                    (session.agent_id, metrics_digest),
                )
        return batch


def _seal_rows(
    session: Session, s: Settings, budget: int, view: _View
) -> tuple[Batch, str | None] | None:
    """Seal the critical state (if it changed), the next changed memory rows up to `budget`
    bytes (then the read counters of memories only read, then changed episodes and entities),
    this device's daily metrics (if they changed) and the manifest numbering them; None when
    there is nothing to seal. Returns the batch and the metrics' digest."""
    dirty_after, _, counts_after, last_hlc, manifest_n, epoch, graph_after = view.marks
    last = hlc.parse(last_hlc) if last_hlc else None
    version = str(hlc.tick(last, int(session.mem.now() * 1000), s.device_id.hex()))
    epoch, key = epochs.sealing_key(session, epoch)  # never under an epoch older than the floor
    sealer = _Sealer(session, s, key, epochs.id_key(session), epoch, version)
    outbox_up_to, digest = _seal_critical(session, s, view, sealer)
    dirty_up_to, done = dirty_after, True
    if view.dirty:
        dirty_up_to, done = _seal_memories(session, dirty_after, budget, sealer)
    counts_up_to, graph_up_to = counts_after, graph_after
    if done and view.counts:
        counts_up_to = _seal_counts(session, dirty_after, counts_after, budget, sealer)
    if done and view.graph:
        graph_up_to = graph_records.seal(session.db, session.agent_id, graph_after, budget, sealer)
    if not sealer.rows:
        return None
    metrics_digest = _seal_metrics(session, s, sealer, budget, view.metrics_digest)
    n = manifest_n + 1
    device_hex = s.device_id.hex()
    manifest = Manifest(
        device_hex,
        n,
        tuple(
            ManifestEntry(
                t,
                rid.hex(),
                v,
                records_fmt.envelope_digest(env),
                t == MEMORY_TABLE and k in sealer.warm,
            )
            for t, k, rid, v, _, _, env in sealer.rows
        ),
        _seen(view.peers, device_hex),
    )
    sealer.add(MANIFEST_TABLE, device_hex, encode_manifest(manifest))
    batch = Batch(
        n,
        version,
        dirty_up_to,
        outbox_up_to,
        digest,
        sealer.rows,
        counts_up_to,
        sealer.changed,
        graph_up_to,
        sealer.bases,
    )
    return batch, metrics_digest


def _seal_metrics(
    session: Session, s: Settings, sealer: _Sealer, budget: int, last: str | None
) -> str | None:
    """Seal this device's daily metrics into a batch that carries changes anyway, when they
    changed since last sealed (digest `last`) and fit the budget; their digest. (Metrics
    alone never make a push: a retrieval would then cost a request.)"""
    own = own_metrics(session.db, session.agent_id, s.device_id.hex())
    if own is None:
        return None
    body, digest = own
    if last == digest:
        return None
    row = sealer.seal(METRICS_TABLE, s.device_id.hex(), body)
    if sealer.used + len(row[6]) > budget:
        return None
    sealer.keep(row)
    return digest


def _seen(peers: list[tuple[str, int]], device_hex: str) -> tuple[tuple[str, int], ...]:
    """Per other device, the highest push of it applied here (the manifest's witness), in
    device order."""
    return tuple(sorted((d, n) for d, n in peers if d != device_hex))


class _Sealer:
    """Seals records of one batch (one key, epoch and version) and collects them in order."""

    def __init__(
        self, session: Session, s: Settings, key: bytes, id_key: bytes, epoch: int, version: str
    ) -> None:
        self.agent_id = session.agent_id
        self.device_id = s.device_id
        self.key, self.id_key, self.epoch, self.version = key, id_key, epoch, version
        self.device_hex = s.device_id.hex()
        self.sign_for = authors.signer(session, s)  # a shared space's writer signs each record
        self.rows: list[Row] = []
        self.changed: dict[str, str] = {}
        self.bases: dict[str, memory_merge.Synced] = {}
        self.warm: set[str] = set()  # memory ids sealed in the warm tier (the manifest says so)
        self.used = 0

    def seal(self, table: str, key: str, body: bytes) -> Row:
        rid = records_fmt.record_id(self.id_key, table, key)
        sign = None if self.sign_for is None else self.sign_for(table, key)
        env = records_fmt.seal(
            self.key,
            self.epoch,
            self.agent_id,
            table,
            rid,
            self.version,
            self.device_id,
            body,
            sign,
        )
        return (table, key, rid, self.version, self.epoch, len(self.rows), env)

    def add(self, table: str, key: str, body: bytes) -> None:
        self.keep(self.seal(table, key, body))

    def keep(self, row: Row) -> None:
        self.rows.append(row)
        self.used += len(row[6])


def _seal_critical(
    session: Session, s: Settings, view: _View, sealer: _Sealer
) -> tuple[int, str | None]:
    """Seal the critical state when the outbox holds changes and it is not on the server or
    on its way already; returns (outbox up_to, its digest or None)."""
    outbox_after = view.marks[1]
    critical = critical_candidate(session, s, outbox_after, view.newest_outbox or 0)
    if critical is None or critical[2] == view.sealed_digest:
        return outbox_after, None  # nothing new, or the same state is on its way
    outbox_up_to, body, digest = critical
    sealer.add(CRITICAL_TABLE, session.agent_id, body)
    return outbox_up_to, digest


def _seal_memories(
    session: Session, dirty_after: int, budget: int, sealer: _Sealer
) -> tuple[int, bool]:
    """Seal changed memory rows in `sync_dirty` order until `budget` is used (at least one
    record per batch); returns the dirty mark the batch covers and whether that is all."""
    dirty_up_to = dirty_after
    while True:
        page = session.db.query(
            f"SELECT d.seq, d.id, {_MEMORY_COLUMNS} FROM sync_dirty d "
            "LEFT JOIN memories m ON m.agent_id = d.agent_id AND m.id = d.id "
            "WHERE d.agent_id = ? AND d.seq > ? ORDER BY d.seq LIMIT ?",
            (session.agent_id, dirty_up_to, _DIRTY_PAGE),
        )
        for r in page:
            body, base = _memory_body(session, sealer, r[1:], None)
            row = sealer.seal(MEMORY_TABLE, str(r[1]), body)
            if sealer.rows and sealer.used + len(row[6]) > budget:
                return dirty_up_to, False
            sealer.keep(row)
            if base is not None:
                sealer.bases[str(r[1])] = base
            dirty_up_to = int(r[0])
        if len(page) < _DIRTY_PAGE:
            return dirty_up_to, True


def _seal_counts(
    session: Session, dirty_after: int, counts_after: int, budget: int, sealer: _Sealer
) -> int:
    """Seal the memories whose only change is reads counted here (`reinforce_dirty`), each
    with the content version it already had, until `budget` is used; returns the counts mark
    the batch covers. Memories with a content change pending go with it instead."""
    counts_up_to = counts_after
    while True:
        page = session.db.query(
            f"SELECT r.seq, r.id, {_MEMORY_COLUMNS} FROM reinforce_dirty r "
            "LEFT JOIN memories m ON m.agent_id = r.agent_id AND m.id = r.id "
            "WHERE r.agent_id = ? AND r.seq > ? AND NOT EXISTS (SELECT 1 FROM sync_dirty d "
            "WHERE d.agent_id = r.agent_id AND d.id = r.id AND d.seq > ?) ORDER BY r.seq LIMIT ?",
            (session.agent_id, counts_up_to, dirty_after, _DIRTY_PAGE),
        )
        for r in page:
            changed = _content_version(session, str(r[1]))
            body, _ = _memory_body(session, sealer, r[1:], changed)
            row = sealer.seal(MEMORY_TABLE, str(r[1]), body)
            if sealer.rows and sealer.used + len(row[6]) > budget:
                return counts_up_to
            sealer.keep(row)
            if changed is not None:
                sealer.changed[str(r[1])] = changed
            counts_up_to = int(r[0])
        if len(page) < _DIRTY_PAGE:
            return counts_up_to


def _content_version(session: Session, memory_id: str) -> str | None:
    """The content version this device holds of a memory: pushed, pulled or in flight."""
    known = session.db.scalar(
        "SELECT max(COALESCE((SELECT version FROM sync_versions WHERE agent_id = ? AND id = ?"
        "), ''), COALESCE((SELECT max(COALESCE(changed, version)) FROM sync_outgoing "
        "WHERE agent_id = ? AND tbl = ? AND key = ?), ''))",
        (session.agent_id, memory_id, session.agent_id, MEMORY_TABLE, memory_id),
    )
    return str(known) if known else None


def _save_batch(session: Session, b: Batch) -> None:
    """Save a sealed batch as in flight (inside the caller's transaction)."""
    session.db.insert_values(
        "INSERT INTO sync_outgoing (agent_id, n, pos, tbl, key, record_id, version, "
        "epoch, envelope, changed)",
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                session.agent_id,
                b.n,
                pos,
                t,
                k,
                rid,
                v,
                e,
                env,
                b.changed.get(k) if t == MEMORY_TABLE else None,
            )
            for t, k, rid, v, e, pos, env in b.rows
        ],
    )
    session.db.execute(
        "INSERT INTO sync_batches (agent_id, n, version, dirty_up_to, outbox_up_to, "
        "digest, counts_up_to, graph_up_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session.agent_id,
            b.n,
            b.version,
            b.dirty_up_to,
            b.outbox_up_to,
            b.digest,
            b.counts_up_to,
            b.graph_up_to,
        ),
    )
    session.db.execute(  # the progress row is made by the first batch saved
        "INSERT INTO sync_progress (agent_id, manifest_n) VALUES (?, ?) "
        "ON CONFLICT (agent_id) DO UPDATE SET manifest_n = excluded.manifest_n",
        (session.agent_id, b.n),
    )
    for memory_id, base in b.bases.items():
        memory_merge.save(session.db, session.agent_id, memory_id, base)
    if b.digest is None:
        session.db.execute(
            "UPDATE sync_state SET hlc = ? WHERE agent_id = ?", (b.version, session.agent_id)
        )
    else:
        session.db.execute(
            "UPDATE sync_state SET hlc = ?, inflight_version = ?, inflight_envelope = ?, "
            "inflight_seq = ?, inflight_digest = ? WHERE agent_id = ?",
            (b.version, b.version, b.rows[0][6], b.outbox_up_to, b.digest, session.agent_id),
        )


def critical_document(session: Session, s: Settings) -> dict[str, Any]:
    """What a `critical` record holds: the critical state with per-item clocks."""
    return critical_merge.critical_document(session.mem, s.device_id.hex())


def _memory_body(
    session: Session, sealer: _Sealer, r: Sequence[Any], changed: str | None
) -> tuple[bytes, memory_merge.Synced | None]:
    """The record of a dirty id joined with its memory (``id, _MEMORY_COLUMNS``): the row
    with its base access count (without the counted reads), or a tombstone, the memory's
    read counters (this device's under its id) and its lineage; with the base a content
    change leaves (None when `changed`: only read counters, on the content version held)."""
    memory_id = str(r[0])
    counters = {
        sealer.device_hex if device == reinforce.LOCAL else device: value
        for device, value in reinforce.counters(session.db, session.agent_id, memory_id).items()
    }
    item: rows.MemoryRow | memory_record.Tombstone = memory_record.Tombstone(memory_id)
    carried = memory_record.Extras()
    if r[1] is not None:
        row = rows.MemoryRow.from_db(r[1:])
        counted = sum(count for count, _ in counters.values())
        item = dataclasses.replace(row, access_count=max(row.access_count - counted, 0))
        if row.tier == "warm":
            sealer.warm.add(memory_id)
        carried = memory_extras.read(session.db, session.agent_id, item.id)
    synced = memory_merge.load(session.db, session.agent_id, memory_id)
    if changed is not None:
        lineage = None if synced is None else memory_merge.held_lineage(synced)
        return memory_record.encode_memory(item, changed, counters, carried, lineage), None
    content = None if r[1] is None else memory_merge.content_of(row, carried)
    known = _content_version(session, memory_id) or ""
    lineage, base = memory_merge.seal_lineage(synced, content, sealer.version, known)
    return memory_record.encode_memory(item, None, counters, carried, lineage), base
