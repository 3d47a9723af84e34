"""The remote record format: what one row of the server's ``records`` table holds, decrypted.

Every row is ``(seq, agent_tag, record_id, version, epoch, device_id, envelope)`` (schema in
`tiermem.sync.vault.schema.SCHEMA`). ``seq`` is the server's commit order (the pull cursor),
``version`` a hybrid logical clock (`tiermem.sync.hlc`, text that sorts by time then device),
``envelope`` a `crypto.seal_record` envelope whose associated data binds agent id, *table*,
record id, version and writer device. The server never sees the table: it is only in the
associated data and in the keyed record id.

**Record ids** are ``crypto.record_id(id_key, TABLE, key)``. The *id key* is the epoch-1 vault
key (`epochs.id_key(engine)`; ``SyncEngine.id_key()`` wraps it), so ids stay stable
when the vault key is rotated. Envelopes are sealed under the *current epoch's* key
(``SyncEngine.epoch_key(epoch)``); open a row with the key of the epoch written in its header
(`crypto.parse_envelope(envelope).epoch`, equal to the row's ``epoch`` column).

Tables (the ``table`` bound in the associated data) and their payloads (UTF-8 JSON, canonical:
sorted keys, no whitespace; every payload has ``"format": 1``):

``critical`` — key: the agent id. The hot state and tree of the agent with per-item HLC clocks
  (`tiermem.sync.kinds.critical_merge.critical_document`; the original layout is the plain
  `core.snapshot.dump`).
  That document carries its own ``format``, validated by its loader, not here.
  Sealed with ``min_bucket=crypto.SNAPSHOT_BUCKET``. `encode_critical` / `decode_critical`.

``memory`` — key: the memory id (`core.warm.memory_id`, 16 hex digits). The latest state of one
  warm/cold/frozen row, every column needed to rebuild it::

      {"format": 1, "id": "…", "deleted": false, "text": "…", "category": "…",
       "importance": 0.5, "created_at": 1.0, "access_count": 0, "last_access": null,
       "tier": "warm", "tier_changed_at": 1.0, "urls": [], "commands": [], "paths": [],
       "source": "", "size_bytes": 3, "tokens": 1, "pinned": false}

  or a tombstone (the row was deleted or forgotten) ``{"format": 1, "id": "…", "deleted":
  true}``. Rows converge by id: the record with the highest *content version* wins (versions
  never tie: the device id is part of them); a tombstone wins like any other version, and a
  later store of the same fact is a newer version again. `memory_record.encode_memory` /
  `decode_memory` → `MemoryRow` | `Tombstone`.

  A row may carry ``"tags"`` (strings), ``"expires_at"`` (a number) and ``"links"`` (the ids of
  the memories it is linked to, sorted), each only when set: a record without them (also one
  sealed by an older tiermem) means no tags, no expiry, no links (`memory_record.Extras`).
  Decoders ignore fields they do not know, so older devices read these records.

  Reads are not changes (`core.reinforce`): a record may also carry ``"reinforced": {"<device
  hex>": [count, last_access or null], …}``, the per-device read counters its writer knows
  (merged by every reader: per device the larger count and newer access), and ``"changed":
  "<version>"``, the content version it stands for when that is older than the record's own
  version (a record sent only because counters grew: it never overrides a newer edit or
  forget). Without ``changed`` the content version is the record's version. The
  ``access_count`` of such a record is the memory's base, without the counted reads.
  `memory_record.decode_memory_version` → `MemoryVersion`.

``manifest`` — key: the writing device's id (32 hex digits). One per push request, written in
  the same atomic batch as the records it lists::

      {"format": 1, "device": "<hex>", "n": 7,
       "records": [["memory", "<record id hex>", "<version>", "<sha256(envelope) hex>"], …]}

  ``n`` counts the device's push requests 1, 2, 3, … without gaps (the in-flight batch is
  resent byte for byte, never renumbered). The manifest lists every other row of its batch (not
  itself). An optional ``"seen": {"<device hex>": n, …}`` names, per other device, the highest
  push of it the writer had applied: a restore then knows those pushes must be on the server.
  `manifest.encode_manifest` / `decode_manifest` → `Manifest`.

``metrics`` — key: the writing device's id. That device's own daily counters and gauges
  (`tiermem.sync.kinds.metrics_records`, which says how devices' shares are merged).

``prune`` — key ``"horizon"`` (`PRUNE_KEY`): the prune horizon written by `sync prune`
  (`tiermem.sync.restore.prune`); pulls skip it.

One push request (one hrana ``batch``: BEGIN IMMEDIATE; INSERT … ON CONFLICT DO NOTHING …;
COMMIT) gives every row it writes the same version (one HLC tick per request); distinct record
ids make the rows distinct. Pulls read pages with `vault.store.records_after` (agent tag,
after seq, limit), as `RemoteRow`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, Final, Literal

import msgspec

from tiermem.sync import crypto
from tiermem.sync.crypto.authorship import unsigned_payload
from tiermem.sync.vault.server_rows import RemoteRow, remote_row
from tiermem.sync.vault.server_rows import fit_page as fit_page
from tiermem.sync.vault.server_rows import server_blob as server_blob
from tiermem.sync.vault.server_rows import server_int as server_int
from tiermem.sync.vault.server_rows import server_str as server_str

__all__ = [
    "CRITICAL_TABLE",
    "FORMAT",
    "MANIFEST_TABLE",
    "MEMORY_BUCKET",
    "MEMORY_TABLE",
    "METRICS_TABLE",
    "PRUNE_KEY",
    "PRUNE_TABLE",
    "TABLES",
    "RemoteRow",
    "canonical",
    "check_int",
    "check_num",
    "check_str",
    "context",
    "decode_critical",
    "encode_critical",
    "envelope_digest",
    "load",
    "open_row",
    "record_id",
    "remote_row",
    "seal",
]

FORMAT: Final = 1
CRITICAL_TABLE: Final = "critical"
MEMORY_TABLE: Final = "memory"
MANIFEST_TABLE: Final = "manifest"
PRUNE_TABLE: Final = "prune"
PRUNE_KEY: Final = "horizon"
METRICS_TABLE: Final = "metrics"
GRAPH_TABLE: Final = "graph"
"""Episodes and entities (sync/kinds/graph_records.py), keyed "episode:ID" and "entity:ID"."""
Signer = Callable[[crypto.RecordContext, bytes], bytes]
"""Signs a payload for its record's context (a shared space's writer)."""
Verifier = Callable[[crypto.RecordContext, bytes], bytes]
"""Checks an opened plaintext's signature and returns the payload (a shared space's reader)."""

TABLES: Final = (
    CRITICAL_TABLE,
    MEMORY_TABLE,
    MANIFEST_TABLE,
    PRUNE_TABLE,
    METRICS_TABLE,
    GRAPH_TABLE,
)
MEMORY_BUCKET: Final = crypto.MIN_BUCKET

Table = Literal["critical", "memory", "manifest", "prune", "metrics"]


_CANONICAL: Final = msgspec.json.Encoder(order="sorted")


def canonical(data: dict[str, Any]) -> bytes:
    """A record's body: compact JSON, keys sorted, UTF-8 (the same values `json.dumps` with
    sorted keys gives, at a fraction of its cost: every push encodes the critical state)."""
    return _CANONICAL.encode(data)


def load(plaintext: bytes, what: str) -> dict[str, Any]:
    """A record's JSON object of this format (TamperedData or UnsupportedFormat otherwise)."""
    try:
        data = json.loads(plaintext)
    except ValueError:
        raise crypto.TamperedData(f"a {what} record does not decode") from None
    if not isinstance(data, dict):
        raise crypto.TamperedData(f"a {what} record is not an object")
    if data.get("format") != FORMAT:
        raise crypto.UnsupportedFormat(f"{what} record format {data.get('format')!r}")
    return data


def check_str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def check_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("expected an integer")
    return value


def check_num(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("expected a number")
    return float(value)


def envelope_digest(envelope: bytes) -> str:
    """What a manifest line holds for a row: SHA-256 of its envelope, hex."""
    return hashlib.sha256(envelope).hexdigest()


def record_id(id_key: bytes, table: str, key: str) -> bytes:
    if table not in TABLES:
        raise ValueError(f"unknown record table {table!r}")
    return crypto.record_id(id_key, table, key)


# ------------------------------------------------------------------------------- envelopes


def context(
    agent_id: str, table: str, rid: bytes, version: str, device_id: bytes
) -> crypto.RecordContext:
    return crypto.RecordContext(agent_id, table, rid, version, device_id)


def seal(
    key: bytes,
    epoch: int,
    agent_id: str,
    table: str,
    rid: bytes,
    version: str,
    device_id: bytes,
    payload: bytes,
    sign: Signer | None = None,
) -> bytes:
    """Seal a payload for `table` (critical state uses the snapshot size bucket); `sign`: a
    shared space's writer signs it first (`sync.spaces.authors`)."""
    bucket = crypto.SNAPSHOT_BUCKET if table == CRITICAL_TABLE else MEMORY_BUCKET
    ctx = context(agent_id, table, rid, version, device_id)
    return crypto.seal_record(
        key, epoch, ctx, payload if sign is None else sign(ctx, payload), min_bucket=bucket
    )


def open_row(
    key: bytes, agent_id: str, table: str, row: RemoteRow, verify: Verifier | None = None
) -> bytes:
    """Authenticate and decrypt `row` as a record of `table` (TamperedData otherwise);
    `verify`: a shared space's record must also carry a writer's signature
    (`sync.spaces.authors`). Without it, a space's signed plaintext is only unwrapped."""
    env = crypto.parse_envelope(row.envelope)
    if env.epoch != row.epoch:
        raise crypto.TamperedData("a record's epoch column does not match its envelope")
    ctx = context(agent_id, table, row.record_id, row.version, row.device_id)
    plaintext = crypto.open_envelope(key, ctx, env)
    if verify is not None:
        return verify(ctx, plaintext)
    return unsigned_payload(plaintext)


# ------------------------------------------------------------------------------ critical


def encode_critical(document: dict[str, Any]) -> bytes:
    return canonical(document)


def decode_critical(plaintext: bytes, agent_id: str) -> dict[str, Any]:
    """The critical-state document (its own ``format`` — 1 for `snapshot.dump`, 2 for the
    document with per-item clocks — is checked by whoever loads it)."""
    try:
        data = json.loads(plaintext)
    except ValueError:
        raise crypto.TamperedData("a critical-state record does not decode") from None
    if not isinstance(data, dict):
        raise crypto.TamperedData("a critical-state record is not an object")
    if data.get("agent_id") != agent_id:
        raise crypto.TamperedData("the critical state belongs to another agent")
    return data
