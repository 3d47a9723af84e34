"""Server maintenance: `prune` deletes the versions a vault no longer needs, by policy, and
compacts the manifests into a checkpoint; `prune_horizon` reads the horizon back.

**Policy.** Of every record, the newest `keep_versions` versions are kept, and every version
younger than `keep_days`; the newest is never deleted. The server chooses the doomed rows
(`store.prune_doomed`, over a snapshot of the rows up to the newest seq): the client downloads
only what is deleted, never the index of every row.

**Checkpoint.** The manifests up to the snapshot are replaced by checkpoint n+1 (the previous
checkpoint's lines and those manifests' lines, without the rows this prune deletes), written
in parts as versions of the prune record, each carrying the horizon. Only once every part is
on the server are the covered manifests, the doomed rows and the older prune versions deleted,
so an interrupted prune leaves a vault that still checks whole. The horizon H is the highest
"oldest kept version" over the records that lost versions: for any point in time from H on,
every record's version as of then is still there.

**The previous checkpoint** comes from this device's copy of it when the server's parts are
that copy (`checkpoint_copy`), else it is downloaded; the report says which, and why.

**Rotations.** A prune first learns of the newest key epoch and the signed roster, so it seals
the checkpoint under the newest epoch (its first write carries the epoch guard a push does: a
rotation landing meanwhile makes it seal again) and judges rows as a restore does
(`verify.fenced`): a manifest or checkpoint part a removed device (or the server) wrote under
an ended epoch after its rotation is not compacted, its lines never reach the checkpoint, and
the report names it as damage. A version is deleted only when a newer version of its record is
listed, so a row nothing lists never makes a listed one go, and the horizon is the newest of the
oldest listed versions kept of the records that lose one."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from tiermem.core.errors import InvalidInput, RotationConflict, ServerRollback
from tiermem.sync import crypto, hlc, records
from tiermem.sync.crypto.roster import RosterView
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.manifest import (
    CHECKPOINT_WITNESS,
    Checkpoint,
    Manifest,
    ManifestEntry,
    decode_manifest,
    encode_checkpoint,
)
from tiermem.sync.restore import checkpoint_copy
from tiermem.sync.restore.checkpoint import (
    PruneState,
    decode_horizon,
    prune_record_id,
    read_prune_state,
)
from tiermem.sync.restore.verify import fenced
from tiermem.sync.session import Session
from tiermem.sync.spaces import authors
from tiermem.sync.state import Settings
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, HranaClient, ResultSet, SqlError
from tiermem.sync.vault.retry import RetryPolicy

__all__ = [
    "DEFAULT_KEEP_VERSIONS",
    "PruneResult",
    "decode_prune",
    "prune",
    "prune_due",
    "prune_horizon",
    "prune_record_id",
]

DEFAULT_KEEP_VERSIONS: Final = 1
PRUNE_TABLE: Final = records.PRUNE_TABLE
PRUNE_KEY: Final = records.PRUNE_KEY
PART_BYTES: Final = 1_000_000
"""A checkpoint part's JSON stays under this: sealed parts are padded to a power of two, so a
full part (1 MiB) wastes little, and it is well inside a request and a response."""
_LINE_BYTES: Final = 66  # a line in base64
_GROUP_BYTES: Final = 70  # a group's version and brackets
WRITE_BYTES: Final = 2 * 1024 * 1024
"""Sealed bytes per request that writes checkpoint parts (as a push's batches)."""
_DAY_MS: Final = 86_400_000
_DOOMED_PAGE: Final = 20_000
"""Doomed rows per request (about 130 bytes of JSON each)."""
EPOCH_TRIES: Final = 3
"""Prunes prepared at most while rotations keep landing between the read and the write."""


class _StaleEpoch(Exception):
    """The server holds a newer key epoch than the checkpoint was sealed under: nothing was
    written."""


def prune_horizon(
    select: Callable[[str, Args], ResultSet], ring: KeyRing, tag: bytes
) -> str | None:
    """The newest authenticated prune horizon of the vault (None: never pruned); a prune
    record that fails authentication raises TamperedData."""
    state = read_prune_state(select, ring, tag)
    if state.damaged:
        raise crypto.TamperedData(state.damaged[0])
    return state.horizon


def prune_due(engine: Session, every_hours: float, policy: RetryPolicy | None = None) -> bool:
    """Whether the vault's last prune, by any device, is `every_hours` old (never pruned: due;
    0 hours: never due). One small read: the newest version of the prune record."""
    if every_hours <= 0:
        return False
    s = engine.require_ready()
    server = _Server(engine, s, policy or RetryPolicy())
    rid = crypto.record_id(KeyRing.of_engine(engine).id_key, PRUNE_TABLE, PRUNE_KEY)
    newest = server.select(*store.newest_version(s.tag, rid)).rows
    last = newest[0][0] if newest else None
    if not isinstance(last, str):
        return True
    return hlc.parse(last).wall_ms < engine.mem.now() * 1000 - every_hours * 3_600_000


def decode_prune(plaintext: bytes) -> str | None:
    """The horizon of one prune record (TamperedData when malformed)."""
    return decode_horizon(plaintext)


@dataclass(frozen=True)
class PruneResult:
    keep: int
    records: int  # distinct records in the snapshot
    deleted: int  # versions deleted (manifests and old checkpoints not counted)
    kept: int  # versions kept
    horizon: str | None  # points in time from here on restore completely
    requests: int
    seconds: float
    keep_days: float = 0.0
    compacted: int = 0  # manifests the checkpoint replaced (deleted)
    checkpoint: int = 0  # the checkpoint's number (0: none written)
    checkpoint_lines: int = 0
    raced: bool = False  # another device pruned meanwhile: nothing was written
    previous: str = ""  # the previous checkpoint: 'copy' (this device's), 'downloaded' or ''
    downloaded_because: str = ""  # why this device's copy did not serve
    damaged: tuple[str, ...] = ()  # rows written under an ended epoch after its rotation


def prune(
    engine: Session,
    keep_versions: int = DEFAULT_KEEP_VERSIONS,
    *,
    keep_days: float = 0.0,
    policy: RetryPolicy | None = None,
    batch_rows: int = 500,
) -> PruneResult:
    """Delete every version beyond the newest `keep_versions` of its record that is older than
    `keep_days` days (never the newest), and compact the manifests into a checkpoint (module
    docstring). A vault whose manifests show a gap is not pruned (ServerRollback)."""
    started = time.perf_counter()
    if keep_versions < 1:
        raise InvalidInput("keep at least one version of each record")
    if keep_days < 0:
        raise InvalidInput("keep_days must not be negative")
    policy = policy or RetryPolicy()
    for _ in range(EPOCH_TRIES):
        try:
            return _prune_once(engine, (keep_versions, keep_days), policy, batch_rows, started)
        except _StaleEpoch:
            continue
    raise RotationConflict(
        "the vault's key kept rotating while this prune was prepared; nothing was pruned, run "
        "the command again"
    )


def _prune_once(
    engine: Session,
    keep: tuple[int, float],
    policy: RetryPolicy,
    batch_rows: int,
    started: float,
) -> PruneResult:
    """One prune at the newest key epoch (`_StaleEpoch`: a rotation landed before the write)."""
    epochs.refresh_epoch(engine, policy)  # seal under the newest epoch, judge rows by its roster
    roster = roster_pin.verified(engine, fresh=True)
    server = _Server(engine, engine.require_ready(), policy)
    ring = KeyRing.of_engine(engine)
    ring.verify = authors.verifier(engine)  # a space's records: signed by a writer
    previous = checkpoint_copy.read_previous(
        server.select, engine.db, engine.agent_id, ring, server.tag, roster
    )
    state = previous.state
    refused = [d for d in state.damaged if d not in state.late]
    if refused:
        raise crypto.TamperedData(f"{refused[0]}; run `tiermem sync check`")
    upto = int(str(server.select(*store.last_seq(server.tag)).rows[0][0]))
    manifests, late = _manifests(server, ring, upto, roster)
    damaged = (*state.late, *late)
    exempt = [prune_record_id(ring), *_manifest_rids(server, ring)]
    doomed, total, distinct = _plan(server, upto, exempt, keep)
    doomed, horizon = _listed_doomed(doomed, _lines(state, manifests, []))
    counts = (keep[0], keep[1], total, distinct)
    if not doomed and not manifests:
        if previous.downloaded:  # verified: the next prune need not download it again
            with engine.db.transaction():
                checkpoint_copy.save(engine.db, engine.agent_id, server.tag, previous.downloaded)
        return _result(
            counts, 0, state.horizon, server, started, previous=previous, damaged=damaged
        )
    horizon = max(filter(None, (horizon, state.horizon)), default=None)
    parts, checkpoint = _write_checkpoint(server, ring, state, manifests, doomed, horizon, keep[0])
    if not parts:
        return _result(counts, 0, state.horizon, server, started, raced=True, previous=previous)
    part_versions = {r.version for r in parts}
    obsolete = [seq for seq, v in state.rows if v not in part_versions]
    seqs = [seq for seq, _, _ in doomed] + [seq for _, seq in manifests] + obsolete
    for lo in range(0, len(seqs), batch_rows):
        chunk = seqs[lo : lo + batch_rows]
        server.select(*store.delete_records(server.tag, chunk))
    _witness(engine, checkpoint.number, parts, server.tag)
    return _result(
        counts,
        len(doomed),
        horizon,
        server,
        started,
        compacted=len(manifests),
        checkpoint=checkpoint,
        previous=previous,
        damaged=damaged,
    )


def _result(
    counts: tuple[int, float, int, int],
    deleted: int,
    horizon: str | None,
    server: _Server,
    started: float,
    *,
    compacted: int = 0,
    checkpoint: Checkpoint | None = None,
    raced: bool = False,
    previous: checkpoint_copy.Previous | None = None,
    damaged: tuple[str, ...] = (),
) -> PruneResult:
    keep, days, total, distinct = counts
    return PruneResult(
        keep=keep,
        records=distinct,
        deleted=deleted,
        kept=total - deleted,
        horizon=horizon,
        requests=server.requests,
        seconds=time.perf_counter() - started,
        keep_days=days,
        compacted=compacted,
        checkpoint=0 if checkpoint is None else checkpoint.number,
        checkpoint_lines=0 if checkpoint is None else len(checkpoint.lines),
        raced=raced,
        previous=previous.source if previous else "",
        downloaded_because=previous.reason if previous else "",
        damaged=damaged,
    )


class _Server:
    """The vault's server for one prune, counting the requests made."""

    def __init__(self, engine: Session, s: Settings, policy: RetryPolicy) -> None:
        self.engine, self.s, self.policy = engine, s, policy
        self.tag = s.tag
        self.requests = 0

    def call(self, fn: Callable[[HranaClient], list[ResultSet]]) -> list[ResultSet]:
        results, n, _ = self.engine.remote(self.s).send(fn, self.policy)
        self.requests += n
        return results

    def select(self, sql: str, args: Args) -> ResultSet:
        return self.call(lambda c: [c.execute(sql, args)])[0]


def _manifest_rids(server: _Server, ring: KeyRing) -> list[bytes]:
    """The manifest record of every device that ever joined the vault."""
    devices = [records.server_blob(r[0]) for r in server.select(*store.device_ids(server.tag)).rows]
    return [records.record_id(ring.id_key, records.MANIFEST_TABLE, d.hex()) for d in devices]


def _manifests(
    server: _Server, ring: KeyRing, upto: int, roster: RosterView | None
) -> tuple[list[tuple[Manifest, int]], list[str]]:
    """Every manifest up to seq `upto`, authenticated, with its seq (TamperedData if one fails:
    a prune never compacts what it cannot read), and why those written under an ended epoch
    after its rotation (`fenced`) are left out."""
    rids = _manifest_rids(server, ring)
    out: list[tuple[Manifest, int]] = []
    late: list[str] = []
    for i in range(0, len(rids), 50):
        chunk, after, limit = rids[i : i + 50], 0, 200
        while True:
            page = functools.partial(_manifest_page, server, chunk, after)
            result, limit = records.fit_page(page, limit)
            for raw in result.rows:
                row = records.remote_row(tuple(raw))
                why = fenced(roster, row, listing=True)
                if why is not None:
                    device = row.device_id.hex()[:12]
                    late.append(f"a push of device {device}… (seq {row.seq}) is {why}")
                elif row.seq <= upto:
                    out.append((_open_manifest(ring, row), row.seq))
            if len(result.rows) < limit:
                break
            after = records.server_int(result.rows[-1][0])
    return out, late


def _manifest_page(server: _Server, rids: list[bytes], after: int, limit: int) -> ResultSet:
    return server.select(*store.manifests_after(server.tag, rids, after, limit))


def _open_manifest(ring: KeyRing, row: records.RemoteRow) -> Manifest:
    try:
        plain = records.open_row(
            ring.key(row.epoch), ring.agent_id, records.MANIFEST_TABLE, row, ring.verify
        )
        return decode_manifest(plain, row.device_id.hex())
    except crypto.CryptoError as exc:
        raise crypto.TamperedData(
            f"a manifest fails ({exc}); nothing was pruned, run `tiermem sync check`"
        ) from None


def _plan(
    server: _Server, upto: int, exempt: Sequence[bytes], keep: tuple[int, float]
) -> tuple[list[tuple[int, bytes, str]], int, int]:
    """(doomed rows: seq, record id, version; rows; distinct records) in the snapshot, as the
    server chooses them."""
    days = keep[1]
    before = "~" if days == 0 else f"{int(server.engine.mem.now() * 1000 - days * _DAY_MS):018d}"
    policy = (keep[0], before)
    size_rs = server.select(*store.count_upto(server.tag, upto))
    doomed: list[tuple[int, bytes, str]] = []
    after, limit = 0, _DOOMED_PAGE
    while True:
        page = functools.partial(_doomed_page, server, upto, exempt, policy, after)
        result, limit = records.fit_page(page, limit)
        doomed += [
            (records.server_int(r[0]), records.server_blob(r[1]), records.server_str(r[2]))
            for r in result.rows
        ]
        if len(result.rows) < limit:
            break
        after = doomed[-1][0]
    total, distinct = (records.server_int(v) for v in size_rs.rows[0])
    return doomed, total, distinct


def _listed_doomed(
    doomed: list[tuple[int, bytes, str]], lines: tuple[ManifestEntry, ...]
) -> tuple[list[tuple[int, bytes, str]], str | None]:
    """The doomed rows a newer listed version of their record stands for (a row no line lists,
    such as one a removed device injected, never makes a listed one go), and the horizon they
    leave: the newest of the oldest listed versions kept of the records that lose one."""
    listed: dict[str, list[str]] = {}
    for e in lines:
        listed.setdefault(e.record_id, []).append(e.version)
    kept = [d for d in doomed if max(listed.get(d[1].hex(), [""])) > d[2]]
    gone = {(rid.hex(), v) for _, rid, v in kept}
    oldest = [min(v for v in listed[rid] if (rid, v) not in gone) for rid in {r for r, _ in gone}]
    return kept, max(oldest, default=None)


def _doomed_page(
    server: _Server,
    upto: int,
    exempt: Sequence[bytes],
    policy: tuple[int, str],
    after: int,
    limit: int,
) -> ResultSet:
    return server.select(*store.prune_doomed(server.tag, upto, exempt, policy, after, limit))


def _covers(state: PruneState, manifests: list[tuple[Manifest, int]]) -> dict[str, int]:
    """Per device, the pushes 1..n the new checkpoint stands for: the old checkpoint's and
    every manifest read, which must follow on without a gap (else the server lost pushes)."""
    covers = dict(state.checkpoint.covers) if state.checkpoint else {}
    numbers: dict[str, set[int]] = {}
    for m, _ in manifests:
        numbers.setdefault(m.device, set()).add(m.n)
    for device, ns in numbers.items():
        start = covers.get(device, 0)
        missing = sorted(set(range(start + 1, max(ns) + 1)) - ns)
        if missing:
            raise ServerRollback(
                f"push(es) {', '.join(map(str, missing[:10]))} of device {device[:12]}… are "
                "gone from the server; nothing was pruned, run `tiermem sync check`"
            )
        covers[device] = max(start, max(ns))
    return covers


def _lines(
    state: PruneState, manifests: list[tuple[Manifest, int]], doomed: list[tuple[int, bytes, str]]
) -> tuple[ManifestEntry, ...]:
    """The old checkpoint's lines and the manifests', without the rows this prune deletes."""
    gone = {(rid.hex(), v) for _, rid, v in doomed}
    seen: set[tuple[str, str]] = set()
    out = []
    old = state.checkpoint.lines if state.checkpoint else ()
    for e in (*old, *(e for m, _ in manifests for e in m.records)):
        key = (e.record_id, e.version)
        if key not in gone and key not in seen:
            seen.add(key)
            out.append(e)
    return tuple(out)


def _write_checkpoint(
    server: _Server,
    ring: KeyRing,
    state: PruneState,
    manifests: list[tuple[Manifest, int]],
    doomed: list[tuple[int, bytes, str]],
    horizon: str | None,
    keep: int,
) -> tuple[list[records.RemoteRow], Checkpoint]:
    """Seal and send the new checkpoint's parts; its rows (empty: another device pruned
    meanwhile, nothing was written) and the checkpoint."""
    engine, s, tag = server.engine, server.s, server.tag
    lines = _lines(state, manifests, doomed)
    number = (state.checkpoint.number if state.checkpoint else 0) + 1
    covers = tuple(sorted(_covers(state, manifests).items()))
    chunks = _parts(lines)
    rid = prune_record_id(ring)
    rows: list[store.RecordRow] = []
    last = hlc.parse(s.hlc) if s.hlc else None
    epoch, key = epochs.sealing_key(engine, s.epoch)
    sign = _signer(engine, s)
    for i, chunk in enumerate(chunks):
        last = hlc.tick(last, int(engine.mem.now() * 1000), s.device_id.hex())
        part = Checkpoint(number, i, len(chunks), covers, horizon, chunk)
        ctx = crypto.RecordContext(engine.agent_id, PRUNE_TABLE, rid, str(last), s.device_id)
        envelope = crypto.seal_record(key, epoch, ctx, sign(ctx, encode_checkpoint(part, keep)))
        rows.append((tag, rid, str(last), epoch, s.device_id, envelope))
    with engine.db.transaction():
        engine.db.execute(
            "UPDATE sync_state SET hlc = ? WHERE agent_id = ? AND hlc < ?",
            (str(last), engine.agent_id, str(last)),
        )
    whole = Checkpoint(number, 0, 1, covers, horizon, lines)
    if not _send_parts(server, rid, state.newest, rows, epoch):
        return [], whole
    return [records.RemoteRow(0, rid, v, e, d, env) for _, _, v, e, d, env in rows], whole


def _signer(engine: Session, s: Settings) -> records.Signer:
    """How the prune record's parts are signed: by a shared space's writer, as every record of
    the space (so neither a reader nor the server can write one); an agent's, not at all."""
    sign_for = authors.signer(engine, s)
    if sign_for is None:
        return lambda ctx, payload: payload
    return sign_for(PRUNE_TABLE, PRUNE_KEY)


def _parts(lines: tuple[ManifestEntry, ...]) -> list[tuple[ManifestEntry, ...]]:
    """The lines cut into parts of at most `PART_BYTES` of JSON each (at least one part)."""
    parts: list[tuple[ManifestEntry, ...]] = []
    start, size, version = 0, 0, ""
    for i, e in enumerate(lines):
        grows = _LINE_BYTES + (_GROUP_BYTES if e.version != version else 0)
        if size + grows > PART_BYTES and i > start:
            parts.append(lines[start:i])
            start, size = i, 0
            grows = _LINE_BYTES + _GROUP_BYTES
        size, version = size + grows, e.version
    parts.append(lines[start:])
    return parts


def _send_parts(
    server: _Server, rid: bytes, newest: str, rows: list[store.RecordRow], epoch: int
) -> bool:
    """The parts in requests of about `WRITE_BYTES`, the first behind the epoch guard (a
    rotation since the read: `_StaleEpoch`) and the prune guard. False: the prune guard failed
    (another prune won), nothing was written."""
    batches: list[list[store.RecordRow]] = [[]]
    for row in rows:
        if batches[-1] and sum(len(r[5]) for r in batches[-1]) + len(row[5]) > WRITE_BYTES:
            batches.append([])
        batches[-1].append(row)
    for i, batch in enumerate(batches):
        statements = store.append_records(batch)
        if i == 0:
            statements[:0] = [
                epochs.epoch_guard(server.tag, epoch),
                store.prune_guard(server.tag, rid, newest),
            ]
        try:
            server.call(functools.partial(_batch, statements=statements))
        except SqlError as exc:
            if i == 0 and epochs.is_epoch_guard_failure(exc, 0):
                raise _StaleEpoch from None
            if i == 0 and exc.statement == 1 and "overflow" in str(exc).lower():
                return False
            raise
    return True


def _batch(client: HranaClient, statements: list[store.Statement]) -> list[ResultSet]:
    return client.batch(statements)


def _witness(engine: Session, number: int, parts: list[records.RemoteRow], tag: bytes) -> None:
    """The checkpoint this device made: as its next manifests' ``seen`` names it, and its
    parts as this device's copy (the next prune builds on them)."""
    version = max(r.version for r in parts)
    with engine.db.transaction():
        checkpoint_copy.save(engine.db, engine.agent_id, tag, parts)
        engine.db.execute(
            "INSERT INTO sync_peers (agent_id, device_id, last_n, last_version) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (agent_id, device_id) DO UPDATE SET "
            "last_n = max(last_n, excluded.last_n), "
            "last_version = max(last_version, excluded.last_version)",
            (engine.agent_id, CHECKPOINT_WITNESS, number, version),
        )
