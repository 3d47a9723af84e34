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
from tiermem.sync.hrana import Args, HranaClient, ResultSet
from tiermem.sync.keyring import KeyRing
from tiermem.sync.retry import RetryPolicy
from tiermem.sync.session import Session
from tiermem.sync.state import (
    agent_tag,
)

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
    rows = select(
        "SELECT 0, record_id, version, epoch, device_id, envelope FROM records "
        "WHERE record_id = ? AND agent_tag = ?",
        (rid, tag),
    ).rows
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
    policy = policy or RetryPolicy()
    s = engine.require_ready()
    tag = agent_tag(engine.agent_id)
    requests = 0

    def call(fn: Callable[[HranaClient], list[ResultSet]]) -> list[ResultSet]:
        nonlocal requests
        results, n, _ = engine.remote(s).send(fn, policy)
        requests += n
        return results

    def select(sql: str, args: Args) -> ResultSet:
        return call(lambda c: [c.execute(sql, args)])[0]

    ring = KeyRing.of_engine(engine)
    id_key = ring.id_key
    protected = {prune_record_id(ring)}
    versions: dict[bytes, list[tuple[str, int]]] = {}
    after = 0
    while True:
        page = select(
            "SELECT seq, record_id, version, device_id FROM records WHERE agent_tag = ? "
            "AND seq > ? ORDER BY seq LIMIT 5000",
            (tag, after),
        ).rows
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
    doomed: list[int] = []
    horizon: str | None = None
    kept = 0
    for rid, items in versions.items():
        if rid in protected:
            continue
        items.sort(reverse=True)
        kept += min(len(items), keep_versions)
        if len(items) > keep_versions:
            doomed += [seq for _, seq in items[keep_versions:]]
            oldest_kept = items[keep_versions - 1][0]
            horizon = oldest_kept if horizon is None else max(horizon, oldest_kept)
    if doomed:
        assert horizon is not None
        previous = prune_horizon(select, ring, tag)
        if previous is not None:
            horizon = max(horizon, previous)
        seal_key = ring.key(s.epoch)
        version = str(
            hlc.tick(
                hlc.parse(s.hlc) if s.hlc else None, int(engine.mem.now() * 1000), s.device_id.hex()
            )
        )
        rid = prune_record_id(ring)
        envelope = crypto.seal_record(
            seal_key,
            s.epoch,
            crypto.RecordContext(engine.agent_id, PRUNE_TABLE, rid, version, s.device_id),
            encode_prune(horizon, keep_versions),
        )
        with engine.db.transaction():
            engine.db.execute(
                "UPDATE sync_state SET hlc = ? WHERE agent_id = ? AND hlc < ?",
                (version, engine.agent_id, version),
            )
        for start in range(0, len(doomed), batch_rows):
            chunk = doomed[start : start + batch_rows]
            statements: list[tuple[str, Args]] = [
                (
                    "DELETE FROM records WHERE agent_tag = ? AND seq IN "
                    f"({', '.join('?' * len(chunk))})",
                    (tag, *chunk),
                )
            ]
            if start == 0:  # the horizon lands with the first deletes, atomically
                statements.insert(
                    0,
                    (
                        "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, "
                        "envelope) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        (tag, rid, version, s.epoch, s.device_id, envelope),
                    ),
                )
            call(lambda c, st=statements: c.batch(st))  # type: ignore[misc]
    else:
        horizon = prune_horizon(select, ring, tag)
    return PruneResult(
        keep=keep_versions,
        records=len(versions),
        deleted=len(doomed),
        kept=kept,
        horizon=horizon,
        requests=requests,
        seconds=time.perf_counter() - started,
    )
