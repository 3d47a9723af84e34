"""Server maintenance: `prune` deletes old versions of the vault's records and writes the prune
horizon (the oldest point in time that still restores completely) in the same atomic batch;
`prune_horizon` reads it back (restore, check)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tiermem.core.errors import InvalidInput
from tiermem.sync import crypto, hlc, records
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.session import Session
from tiermem.sync.state import Settings
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, HranaClient, ResultSet
from tiermem.sync.vault.retry import RetryPolicy

DEFAULT_KEEP_VERSIONS: Final = 10
PRUNE_TABLE: Final = records.PRUNE_TABLE
PRUNE_KEY: Final = records.PRUNE_KEY

# ------------------------------------------------------------------------------- pruning


def prune_record_id(ring: KeyRing) -> bytes:
    return crypto.record_id(ring.id_key, PRUNE_TABLE, PRUNE_KEY)


def prune_horizon(
    select: Callable[[str, Args], ResultSet], ring: KeyRing, tag: bytes
) -> str | None:
    """The newest authenticated prune horizon of the vault (None: never pruned). Every
    version of the prune record is read, so deleting the newest one cannot lower it."""
    rid = prune_record_id(ring)
    rows = select(*store.versions_of(tag, rid)).rows
    best: str | None = None
    for raw in rows:
        row = records.remote_row(tuple(raw))
        plaintext = records.open_row(ring.key(row.epoch), ring.agent_id, PRUNE_TABLE, row)
        horizon = decode_prune(plaintext)
        best = horizon if best is None else max(best, horizon)
    return best


def encode_prune(horizon: str, keep: int) -> bytes:
    return records.canonical({"format": records.FORMAT, "horizon": horizon, "keep": keep})


def decode_prune(plaintext: bytes) -> str:
    try:
        data = json.loads(plaintext)
        horizon = data["horizon"]
        hlc.parse(horizon)
    except (ValueError, KeyError, TypeError):
        raise crypto.TamperedData("a prune record is malformed") from None
    if not isinstance(horizon, str):
        raise crypto.TamperedData("a prune record is malformed")
    return horizon


@dataclass(frozen=True)
class PruneResult:
    keep: int
    records: int  # distinct records looked at
    deleted: int  # versions deleted
    kept: int  # versions kept
    horizon: str | None  # points in time from here on restore completely
    requests: int
    seconds: float


def prune(
    engine: Session,
    keep_versions: int = DEFAULT_KEEP_VERSIONS,
    *,
    policy: RetryPolicy | None = None,
    batch_rows: int = 500,
) -> PruneResult:
    """Delete, per record, all versions but the newest `keep_versions` (never the newest one;
    manifests and prune records are never deleted).

    The horizon H written with the deletes is the highest "oldest kept version" over the
    records that lost versions: for any point in time ≥ H every record's version as of then is
    still there. `sync check` uses H to tell a pruned version from a deleted one."""
    started = time.perf_counter()
    if keep_versions < 1:
        raise InvalidInput("keep at least one version of each record")
    s = engine.require_ready()
    server = _Server(engine, s, policy or RetryPolicy())
    ring = KeyRing.of_engine(engine)
    versions = _versions(server, ring)
    doomed, horizon, kept = _doomed(versions, keep_versions)
    if doomed:
        assert horizon is not None
        previous = prune_horizon(server.select, ring, server.tag)
        if previous is not None:
            horizon = max(horizon, previous)
        _delete(server, ring, doomed, horizon, keep_versions, batch_rows)
    else:
        horizon = prune_horizon(server.select, ring, server.tag)
    return PruneResult(
        keep=keep_versions,
        records=len(versions),
        deleted=len(doomed),
        kept=kept,
        horizon=horizon,
        requests=server.requests,
        seconds=time.perf_counter() - started,
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


def _versions(server: _Server, ring: KeyRing) -> dict[bytes, list[tuple[str, int]]]:
    """(version, seq) of every record but the manifests and prune records, by record id."""
    id_key = ring.id_key
    protected = {prune_record_id(ring)}
    versions: dict[bytes, list[tuple[str, int]]] = {}
    after = 0
    while True:
        page = server.select(*store.versions_after(server.tag, after, 5000)).rows
        for seq, rid, version, device in page:
            assert isinstance(seq, int) and isinstance(rid, bytes)
            assert isinstance(version, str) and isinstance(device, bytes)
            after = seq
            if rid in protected:
                continue
            if rid == records.record_id(id_key, records.MANIFEST_TABLE, device.hex()):
                protected.add(rid)
                versions.pop(rid, None)
                continue
            versions.setdefault(rid, []).append((version, seq))
        if len(page) < 5000:
            break
    return versions


def _doomed(
    versions: dict[bytes, list[tuple[str, int]]], keep: int
) -> tuple[list[int], str | None, int]:
    """(seqs to delete, the horizon they leave, versions kept)."""
    doomed: list[int] = []
    horizon: str | None = None
    kept = 0
    for items in versions.values():
        items.sort(reverse=True)
        kept += min(len(items), keep)
        if len(items) > keep:
            doomed += [seq for _, seq in items[keep:]]
            oldest_kept = items[keep - 1][0]
            horizon = oldest_kept if horizon is None else max(horizon, oldest_kept)
    return doomed, horizon, kept


def _delete(
    server: _Server, ring: KeyRing, doomed: list[int], horizon: str, keep: int, batch_rows: int
) -> None:
    """Delete in batches; the new horizon record lands with the first one, atomically."""
    engine, s, tag = server.engine, server.s, server.tag
    version = str(
        hlc.tick(
            hlc.parse(s.hlc) if s.hlc else None, int(engine.mem.now() * 1000), s.device_id.hex()
        )
    )
    rid = prune_record_id(ring)
    envelope = crypto.seal_record(
        ring.key(s.epoch),
        s.epoch,
        crypto.RecordContext(engine.agent_id, PRUNE_TABLE, rid, version, s.device_id),
        encode_prune(horizon, keep),
    )
    with engine.db.transaction():
        engine.db.execute(
            "UPDATE sync_state SET hlc = ? WHERE agent_id = ? AND hlc < ?",
            (version, engine.agent_id, version),
        )
    for start in range(0, len(doomed), batch_rows):
        chunk = doomed[start : start + batch_rows]
        statements: list[tuple[str, Args]] = [store.delete_records(tag, chunk)]
        if start == 0:  # the horizon lands with the first deletes, atomically
            statements.insert(
                0,
                store.append_record((tag, rid, version, s.epoch, s.device_id, envelope)),
            )
        server.call(lambda c, st=statements: c.batch(st))  # type: ignore[misc]
