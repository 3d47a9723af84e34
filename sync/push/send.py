"""Push: seal what changed here and send it, one atomic request per `batch_bytes`.

Per request: the current critical state if the outbox holds changes, the latest state of the
next changed memory rows (tombstones for deleted ones), and one `manifest` record numbering
the request (1, 2, 3, … per device), all under one HLC version. The batch is saved locally as
*in flight* before it is sent; until the server confirms it, every later attempt sends those
same bytes again, so a retry after a lost response changes nothing and manifests never have a
gap. A confirmed batch acknowledges the outbox rows and dirty marks it covered.

Statement 0 of every request is `epochs.epoch_guard`: when the server holds a newer key epoch,
nothing commits; the batches an earlier attempt committed are confirmed, the others dropped,
the new epoch adopted and everything sealed again (once per push)."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Final

from tiermem.core import snapshot
from tiermem.core.errors import TiermemError
from tiermem.sync import crypto, journal
from tiermem.sync.devices import epochs
from tiermem.sync.devices.membership import own_entry_statements
from tiermem.sync.push.seal import Batch, critical_candidate, inflight_batches, seal_batch
from tiermem.sync.records import MANIFEST_TABLE, MEMORY_TABLE
from tiermem.sync.session import Session
from tiermem.sync.state import Settings, device_rows
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, HranaClient, ResultSet, SqlError
from tiermem.sync.vault.retry import RetryPolicy

__all__ = ["DEFAULT_BATCH_BYTES", "PushResult", "has_work", "push"]

DEFAULT_BATCH_BYTES: Final = 2 * 1024 * 1024
"""Sealed bytes per push request: below it a push is one request, above it one per cap."""


@dataclass(frozen=True)
class PushResult:
    """``pushed``: a version was sent and confirmed. ``changes``: outbox rows acknowledged.
    ``requests``: HTTP requests made (1 unless retried). ``resent``: the version was the one
    already in flight (sent again byte for byte)."""

    pushed: bool
    changes: int
    requests: int
    attempts: int
    version: str | None
    bytes: int
    resent: bool
    seconds: float
    note: str
    memories: int = 0
    records: int = 0


@dataclass
class _Totals:
    requests: int = 0
    attempts: int = 0
    records: int = 0
    bytes: int = 0
    changes: int = 0
    memories: int = 0
    resent: bool = False
    resealed: bool = False
    version: str | None = None
    note: str = "nothing to push"
    logged: bool = False
    """The push's history line is written (with the last confirmation, no work left)."""

    def count(self, b: Batch) -> None:
        """`b` is confirmed on the server."""
        self.records += len(b.rows)
        self.bytes += sum(len(r[6]) for r in b.rows)
        self.memories += sum(1 for r in b.rows if r[0] == MEMORY_TABLE)
        self.version = max(self.version or b.version, b.version)
        self.note = "pushed"


class _StaleEpoch(Exception):
    """A push batch failed at its epoch guard: the server holds a newer key epoch. Not a
    `HranaError`, so it is neither retried nor logged as a failure: `push` handles it."""


def has_work(session: Session) -> bool:
    """Something to push: outbox rows, changed memories, reads counted here, or a push in
    flight."""
    return _queued(session) or session.mem.reads_pending()


def _queued(session: Session) -> bool:
    """`has_work` without the reads this process holds (the push writes those first)."""
    row = session.db.query_one(
        "SELECT EXISTS (SELECT 1 FROM outbox WHERE agent_id = ?) OR EXISTS ("
        "SELECT 1 FROM sync_dirty WHERE agent_id = ?) OR EXISTS ("
        "SELECT 1 FROM reinforce_dirty WHERE agent_id = ?) OR EXISTS ("
        "SELECT 1 FROM graph_dirty WHERE agent_id = ?) OR EXISTS ("
        "SELECT 1 FROM sync_batches WHERE agent_id = ?) OR EXISTS ("
        "SELECT 1 FROM sync_state WHERE agent_id = ? AND inflight_version IS NOT NULL)",
        (session.agent_id,) * 6,
    )
    return bool(row and row[0])


def push(session: Session, batch_bytes: int, policy: RetryPolicy | None = None) -> PushResult:
    """Push what changed: the critical state if the outbox holds changes, and the latest
    state of every changed memory row (tombstones for deleted ones).

    One request (an atomic batch with its manifest) while the sealed records stay under
    `batch_bytes`, then one more per `batch_bytes`. Sealed batches are saved before they
    are sent and resent byte for byte until confirmed, so a retry changes nothing."""
    started = time.perf_counter()
    policy = policy or RetryPolicy()
    s = session.require_ready()
    session.mem.flush_reinforcement()  # reads of this process count in this push
    if journal.repair_clock(session.mem, s.device_id.hex(), s.hlc) is not None:
        s = session.settings_or_fail()
    t = _Totals()
    while True:
        batches = inflight_batches(session)
        t.resent = t.resent or bool(batches)
        size = sum(len(r[6]) for b in batches for r in b.rows)
        if size < batch_bytes:
            fresh = seal_batch(session, s, batch_bytes - size)
            if fresh is not None:
                batches.append(fresh)
        if not batches:
            break
        if not s.registered:  # its device row carries the clock the seal just moved
            s = session.settings_or_fail()
        if not _send_batches(session, s, batches, policy, t):
            break  # one query instead of sealing nothing once more
        s = session.settings_or_fail()
    return _result(session, t, started)


def _push_statements(session: Session, s: Settings, batches: list[Batch]) -> list[tuple[str, Args]]:
    """Statement 0: the epoch guard. It fails the whole atomic batch when the server holds a
    newer key epoch than the oldest one these records are sealed under, so a device that
    missed a rotation never commits data the removed device could read."""
    oldest_epoch = min(r[4] for b in batches for r in b.rows)
    tag = s.tag
    statements: list[tuple[str, Args]] = [epochs.epoch_guard(tag, oldest_epoch)]
    if not s.registered:
        statements += device_rows(s, crypto.device_public_bytes(session.device_key(s)))
        statements += own_entry_statements(session, s)  # name, MAC vouching for the entry
    statements += store.append_records(
        [
            (tag, rid, v, epoch, s.device_id, envelope)
            for b in batches
            for _, _, rid, v, epoch, _, envelope in b.rows
        ]
    )
    statements.append(store.touch_device(tag, s.device_id, session.mem.now()))
    return statements


def _send_batches(
    session: Session, s: Settings, batches: list[Batch], policy: RetryPolicy, t: _Totals
) -> bool:
    """Send the batches in flight as one request; on a stale epoch, settle and adopt.
    Returns whether there is more to push (`has_work`)."""
    statements = _push_statements(session, s, batches)
    remote = session.remote(s)
    client = remote.client
    before = client.requests_sent
    try:
        _, req, att = remote.send(functools.partial(_guarded_batch, statements=statements), policy)
    except _StaleEpoch:
        # Nothing of this request committed. Batches an earlier attempt committed (its
        # answer lost) are confirmed; the rest are dropped, to be sealed again under the
        # newest epoch, which is adopted first (once per push).
        committed, covered = _settle_stale(session, s, batches, policy)
        t.changes += covered
        for b in committed:
            t.count(b)
        if t.resealed:
            raise _rotated_again(session) from None
        t.resealed = True
        _adopt_epoch(session)
        t.requests += client.requests_sent - before
        t.attempts += 1
        return has_work(session)
    t.requests, t.attempts = t.requests + req, t.attempts + att
    with session.db.relaxed_transaction():  # as `_acknowledge`'s: no fsync wait
        t.changes += _acknowledge(session, batches)
        for b in batches:
            t.count(b)
        more = _queued(session) or session.mem.reads_pending()
        if not more:  # the last confirmation of this push: its history line goes with it
            _log_push(session, t)
    return more


def _result(session: Session, t: _Totals, started: float) -> PushResult:
    quiet = 0 if t.logged else _acknowledge_unchanged(session)  # logged: the outbox was empty
    t.changes += quiet
    if t.requests == 0:
        s = session.settings_or_fail()
        return PushResult(
            False,
            t.changes,
            0,
            0,
            s.last_push_version if t.changes else None,
            0,
            False,
            time.perf_counter() - started,
            "already up to date" if quiet else t.note,
        )
    note = t.note
    if t.resealed:
        note += f" (key epoch {session.settings_or_fail().epoch} adopted: sealed again)"
    if not t.logged:
        _log_push(session, t)
    return PushResult(
        t.version is not None,
        t.changes,
        t.requests,
        t.attempts,
        t.version,
        t.bytes,
        t.resent,
        time.perf_counter() - started,
        note,
        memories=t.memories,
        records=t.records,
    )


def _log_push(session: Session, t: _Totals) -> None:
    journal.log_event(
        session.mem, "push", t.version, t.records, t.bytes, f"{t.memories} memory records"
    )
    t.logged = True


def _guarded_batch(client: HranaClient, statements: list[tuple[str, Args]]) -> list[ResultSet]:
    """A push batch whose statement 0 is `epochs.epoch_guard`: its failure is `_StaleEpoch`."""
    try:
        return client.batch(statements)
    except SqlError as exc:
        if epochs.is_epoch_guard_failure(exc, 0):
            raise _StaleEpoch(str(exc)) from None
        raise


def _acknowledge(session: Session, batches: list[Batch]) -> int:
    """The server confirmed `batches`: drop them, their dirty marks and outbox rows, and
    remember the versions pushed. Returns the outbox rows acknowledged."""
    db, agent = session.db, session.agent_id
    last = batches[-1]
    critical = [b for b in batches if b.digest is not None]
    numbers = ", ".join("?" * len(batches))
    # Without waiting for fsync: should a power cut undo it, the batches are still in flight
    # and are resent byte for byte, which the server takes as already there.
    with db.relaxed_transaction():
        covered = len(
            db.query(
                "DELETE FROM outbox WHERE agent_id = ? AND seq <= ? RETURNING seq",
                (agent, max(b.outbox_up_to for b in batches)),
            )
        )
        for table, up_to in (
            ("sync_dirty", max(b.dirty_up_to for b in batches)),
            ("reinforce_dirty", max(b.counts_up_to for b in batches)),
            ("graph_dirty", max(b.graph_up_to for b in batches)),
        ):
            if up_to > 0:  # a mark of 0 covers nothing (seq counts from 1)
                db.execute(f"DELETE FROM {table} WHERE agent_id = ? AND seq <= ?", (agent, up_to))
        db.executemany(
            "INSERT INTO sync_versions (agent_id, id, version) VALUES (?, ?, ?) "
            "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version "
            "WHERE excluded.version > sync_versions.version",
            [
                (agent, r[1], b.changed.get(r[1], r[3]))
                for b in batches
                for r in b.rows
                if r[0] == MEMORY_TABLE
            ],
        )
        ns = tuple(b.n for b in batches)
        db.execute(
            f"DELETE FROM sync_outgoing WHERE agent_id = ? AND n IN ({numbers})", (agent, *ns)
        )
        db.execute(
            f"DELETE FROM sync_batches WHERE agent_id = ? AND n IN ({numbers})", (agent, *ns)
        )
        versions = tuple(b.version for b in critical)
        if critical:
            db.execute(
                "UPDATE sync_progress SET critical_version = ? "
                "WHERE agent_id = ? AND critical_version < ?",
                (versions[-1], agent, versions[-1]),
            )
        digest = (critical[-1].digest,) if critical else ()
        db.execute(
            _pushed_sql(len(versions)),
            (session.mem.now(), last.version, *digest, *(versions * len(_INFLIGHT)), agent),
        )
    return covered


_INFLIGHT: Final = ("inflight_version", "inflight_envelope", "inflight_seq", "inflight_digest")


def _pushed_sql(critical: int) -> str:
    """The settings after a confirmed push: the device registered, the error cleared; with
    `critical` batches carrying the critical state, its digest, and the state in flight
    cleared when it is one of theirs (every SET reads the row as it was before)."""
    sets = (
        "registered = 1, last_push_at = ?, last_push_version = ?, pushes = pushes + 1, "
        "last_error = NULL, last_error_at = NULL, retry_at = NULL"
    )
    if critical:
        theirs = f"inflight_version IN ({', '.join('?' * critical)})"
        sets += ", last_digest = ?" + "".join(
            f", {c} = CASE WHEN {theirs} THEN NULL ELSE {c} END" for c in _INFLIGHT
        )
    return f"UPDATE sync_state SET {sets} WHERE agent_id = ?"


def _settle_stale(
    session: Session, s: Settings, batches: list[Batch], policy: RetryPolicy
) -> tuple[list[Batch], int]:
    """After a failed epoch guard: confirm the in-flight batches the server already holds
    and drop the others, which are sealed under a key the vault no longer writes with.
    Returns (the batches confirmed, outbox rows they acknowledged).

    One read tells which batches an earlier attempt committed (its answer lost): the
    server holds their exact manifest envelope. Requests carry every batch in flight, so
    those form a prefix. Dropping the rest rewinds the manifest counter to the last
    committed batch, so the batch sealed next takes the number again (no gap), and makes
    their rows pending again: a batch's only hold on them is its saved marks (the dirty
    marks and outbox rows stay until a confirmation), so nothing is lost."""
    manifest_rid = batches[0].rows[-1][2]
    assert all(b.rows[-1][0] == MANIFEST_TABLE for b in batches)
    held_rows = (
        session.remote(s)
        .execute(
            *store.manifest_since(s.tag, manifest_rid, min(b.version for b in batches)), policy
        )
        .rows
    )
    held = {(str(v), bytes(e)) for v, e in held_rows if isinstance(e, bytes)}
    committed: list[Batch] = []
    for b in sorted(batches, key=lambda b: b.n):
        if (b.version, b.rows[-1][6]) not in held:
            break
        committed.append(b)
    covered = _acknowledge(session, committed) if committed else 0
    confirmed = {b.n for b in committed}
    stale = [b.n for b in batches if b.n not in confirmed]
    if stale:
        with session.db.transaction():
            first = min(stale)
            # Every batch from the first stale one on: any saved meanwhile builds on it.
            session.db.execute(
                "DELETE FROM sync_outgoing WHERE agent_id = ? AND n >= ?",
                (session.agent_id, first),
            )
            session.db.execute(
                "DELETE FROM sync_batches WHERE agent_id = ? AND n >= ?",
                (session.agent_id, first),
            )
            session.db.execute(
                "UPDATE sync_progress SET manifest_n = ? WHERE agent_id = ?",
                (first - 1, session.agent_id),
            )
            session.db.execute(  # the metrics sealed in them are sealed again
                "DELETE FROM sync_metrics_pushed WHERE agent_id = ?", (session.agent_id,)
            )
            session.db.execute(
                "UPDATE sync_state SET inflight_version = NULL, inflight_envelope = NULL, "
                "inflight_seq = NULL, inflight_digest = NULL WHERE agent_id = ?",
                (session.agent_id,),
            )
    return committed, covered


def _adopt_epoch(session: Session) -> None:
    """Adopt the server's newest key epoch (`epochs.refresh_epoch`); a device removed from
    the vault gets `epochs.DeviceRevoked` (recorded for `status` and `history`)."""
    try:
        epochs.refresh_epoch(session)
    except epochs.DeviceRevoked as exc:
        journal.record_error(session.mem, str(exc), None)
        journal.log_event(session.mem, "error", None, 0, 0, str(exc))
        raise


def _rotated_again(session: Session) -> TiermemError:
    return epochs.RotationConflict(
        f"the vault key of agent {session.agent_id!r} was rotated again while this push was "
        "sealing its records under the new key; nothing under the old key was sent; run "
        "the push again"
    )


def _acknowledge_unchanged(session: Session) -> int:
    """Outbox rows whose state equals the one pushed last (nothing to send for them)."""
    s = session.settings_or_fail()
    if s.inflight is not None:
        return 0
    critical = critical_candidate(session, s, 0)
    if critical is None or critical[2] != s.last_digest:
        return 0
    with session.db.transaction():
        covered = int(
            session.db.scalar(
                "SELECT count(*) FROM outbox WHERE agent_id = ? AND seq <= ?",
                (session.agent_id, critical[0]),
            )
        )
        snapshot.acknowledge(session.db, session.agent_id, critical[0])
    return covered
