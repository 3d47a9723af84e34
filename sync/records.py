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
  later store of the same fact is a newer version again. `encode_memory` / `decode_memory` →
  `MemoryRow` | `Tombstone`.

  A row may carry ``"tags"`` (strings), ``"expires_at"`` (a number) and ``"links"`` (the ids of
  the memories it is linked to, sorted), each only when set: a record without them (also one
  sealed by an older tiermem) means no tags, no expiry, no links (`Extras`). Decoders ignore
  fields they do not know, so older devices read these records.

  Reads are not changes (`core.reinforce`): a record may also carry ``"reinforced": {"<device
  hex>": [count, last_access or null], …}``, the per-device read counters its writer knows
  (merged by every reader: per device the larger count and newer access), and ``"changed":
  "<version>"``, the content version it stands for when that is older than the record's own
  version (a record sent only because counters grew: it never overrides a newer edit or
  forget). Without ``changed`` the content version is the record's version. The
  ``access_count`` of such a record is the memory's base, without the counted reads.
  `decode_memory_version` → `MemoryVersion`.

``manifest`` — key: the writing device's id (32 hex digits). One per push request, written in
  the same atomic batch as the records it lists::

      {"format": 1, "device": "<hex>", "n": 7,
       "records": [["memory", "<record id hex>", "<version>", "<sha256(envelope) hex>"], …]}

  ``n`` counts the device's push requests 1, 2, 3, … without gaps (the in-flight batch is
  resent byte for byte, never renumbered). The manifest lists every other row of its batch (not
  itself). An optional ``"seen": {"<device hex>": n, …}`` names, per other device, the highest
  push of it the writer had applied: a restore then knows those pushes must be on the server.
  `encode_manifest` / `decode_manifest` → `Manifest`.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from tiermem.core import rows
from tiermem.core.errors import InvalidInput
from tiermem.core.rows import TIERS, MemoryRow
from tiermem.sync import crypto, hlc
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
    "Counters",
    "Extras",
    "Manifest",
    "ManifestEntry",
    "MemoryRow",
    "MemoryVersion",
    "RemoteRow",
    "Tombstone",
    "canonical",
    "context",
    "decode_critical",
    "decode_manifest",
    "decode_memory",
    "decode_memory_version",
    "encode_critical",
    "encode_manifest",
    "encode_memory",
    "envelope_digest",
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


def _load(plaintext: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(plaintext)
    except ValueError:
        raise crypto.TamperedData(f"a {what} record does not decode") from None
    if not isinstance(data, dict):
        raise crypto.TamperedData(f"a {what} record is not an object")
    if data.get("format") != FORMAT:
        raise crypto.UnsupportedFormat(f"{what} record format {data.get('format')!r}")
    return data


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
) -> bytes:
    """Seal a payload for `table` (critical state uses the snapshot size bucket)."""
    bucket = crypto.SNAPSHOT_BUCKET if table == CRITICAL_TABLE else MEMORY_BUCKET
    return crypto.seal_record(
        key,
        epoch,
        context(agent_id, table, rid, version, device_id),
        payload,
        min_bucket=bucket,
    )


def open_row(key: bytes, agent_id: str, table: str, row: RemoteRow) -> bytes:
    """Authenticate and decrypt `row` as a record of `table` (TamperedData otherwise)."""
    env = crypto.parse_envelope(row.envelope)
    if env.epoch != row.epoch:
        raise crypto.TamperedData("a record's epoch column does not match its envelope")
    return crypto.open_envelope(
        key, context(agent_id, table, row.record_id, row.version, row.device_id), env
    )


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


# -------------------------------------------------------------------------------- memory


@dataclass(frozen=True, slots=True)
class Tombstone:
    id: str


Counters = dict[str, tuple[int, float | None]]
"""Device hex → (reads counted, newest read) of one memory."""


@dataclass(frozen=True, slots=True)
class Extras:
    """A memory's tags, expiry and links (ids of the memories it is linked to, sorted)."""

    tags: tuple[str, ...] = ()
    expires_at: float | None = None
    links: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """A decoded memory record: the row or tombstone, the content version it stands for when
    not the record's own (`changed`), the read counters it carries and its extras."""

    item: MemoryRow | Tombstone
    changed: str | None = None
    reinforced: Counters = field(default_factory=dict)
    extras: Extras = Extras()

    def content_version(self, version: str) -> str:
        """The version the content is ordered by (`version`: the record's)."""
        if self.changed is None:
            return version
        if self.changed > version:
            raise crypto.TamperedData("a memory record claims a change after its own version")
        return self.changed


def encode_memory(
    item: MemoryRow | Tombstone,
    changed: str | None = None,
    reinforced: Counters | None = None,
    extras: Extras = Extras(),
) -> bytes:
    extra: dict[str, Any] = {}
    if changed is not None:
        extra["changed"] = changed
    if reinforced:
        extra["reinforced"] = {d: [c, t] for d, (c, t) in sorted(reinforced.items())}
    if isinstance(item, Tombstone):
        return canonical({"format": FORMAT, "id": item.id, "deleted": True, **extra})
    if extras.tags:
        extra["tags"] = list(extras.tags)
    if extras.expires_at is not None:
        extra["expires_at"] = extras.expires_at
    if extras.links:
        extra["links"] = list(extras.links)
    return canonical({**extra, "format": FORMAT, "deleted": False, **memory_body(item)})


def memory_body(item: MemoryRow) -> dict[str, Any]:
    """A row's fields as its record holds them: every field of `MemoryRow` (tuples as lists),
    a field added later only when it differs from its default, so a record of a memory that
    never used it is the one an older tiermem wrote."""
    body: dict[str, Any] = {}
    for name in rows.NAMES:
        value = getattr(item, name)
        if name in rows.ADDED_LATER and value == rows.DEFAULTS[name]:
            continue
        body[name] = list(value) if isinstance(value, tuple) else value
    return body


def _strs(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("expected a list of strings")
    return tuple(value)


def _num(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("expected a number")
    return float(value)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("expected an integer")
    return value


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def decode_memory(plaintext: bytes, memory_id: str | None = None) -> MemoryRow | Tombstone:
    """Decode a memory payload; `memory_id`, when known, must be the payload's id."""
    return decode_memory_version(plaintext, memory_id).item


_PAYLOAD_TYPES: Final[dict[str, Any]] = {
    "str": str,
    "Tier": str,
    "float": float,
    "int": int,
    "float | None": float | None,
    "tuple[str, ...]": list[str],
    "bool": Any,
}


def _payload_field(name: str) -> tuple[str, Any, Any]:
    """A `MemoryRow` field in the typed payload: unset when absent (the checks name what is
    missing), its default when absent from a record written before it existed."""
    kind = _PAYLOAD_TYPES[rows.TYPES[name]]
    if name in rows.ADDED_LATER:
        default = rows.DEFAULTS[name]
        if isinstance(default, tuple):
            return name, kind, msgspec.field(default_factory=list)
        return name, kind, default
    return name, kind | msgspec.UnsetType, msgspec.UNSET


_MemoryPayload = msgspec.defstruct(
    "_MemoryPayload",
    [
        ("format", Literal[1]),
        ("id", str),
        ("deleted", bool),
        *(_payload_field(n) for n in rows.NAMES if n != "id"),
        ("changed", Any, None),
        ("reinforced", Any, msgspec.field(default_factory=dict)),
        ("tags", list[str], msgspec.field(default_factory=list)),
        ("expires_at", float | None, None),
        ("links", list[str], msgspec.field(default_factory=list)),
    ],
)
"""A memory payload of the usual shape, decoded and type-checked in one pass (a restore
decodes thousands a second), built from `MemoryRow`'s fields. Whatever does not fit goes
through `_load` and the checks below, which name what is wrong: both accept the same payloads
with the same values."""
_ROW_FIELDS: Final = tuple(n for n in rows.NAMES if n != "id")

_MEMORY_DECODER: Final = msgspec.json.Decoder(_MemoryPayload)


def _typed_memory(plaintext: bytes, memory_id: str | None) -> MemoryVersion | None:
    """`decode_memory_version` of a payload of the usual shape; None for anything else."""
    try:
        p: Any = _MEMORY_DECODER.decode(plaintext)
    except msgspec.MsgspecError:
        return None
    if memory_id is not None and p.id != memory_id:
        return None
    try:
        changed = None if p.changed is None else str(hlc.parse(_str(p.changed)))
        reinforced = _counters(p.reinforced)
        if p.deleted:
            return MemoryVersion(Tombstone(p.id), changed, reinforced)
        values = {n: getattr(p, n) for n in _ROW_FIELDS}
        if msgspec.UNSET in values.values() or p.tier not in TIERS:
            return None
        values = {n: tuple(v) if isinstance(v, list) else v for n, v in values.items()}
        values["pinned"] = bool(p.pinned)
        extras = _extras(p.id, p.tags, p.expires_at, p.links)
        return MemoryVersion(MemoryRow(id=p.id, **values), changed, reinforced, extras)
    except (TypeError, ValueError, InvalidInput):
        return None


def decode_memory_version(plaintext: bytes, memory_id: str | None = None) -> MemoryVersion:
    """Decode a memory payload with its content version and read counters."""
    typed = _typed_memory(plaintext, memory_id)
    return typed if typed is not None else _general_memory(plaintext, memory_id)


def _general_memory(plaintext: bytes, memory_id: str | None) -> MemoryVersion:
    data = _load(plaintext, "memory")
    try:
        changed = data.get("changed")
        if changed is not None:
            changed = str(hlc.parse(_str(changed)))
        reinforced = _counters(data.get("reinforced", {}))
        item = _memory_item(data, memory_id)
        if isinstance(item, Tombstone):
            return MemoryVersion(item, changed, reinforced)
        expires = data.get("expires_at")
        tags, links = _strs(data.get("tags", [])), _strs(data.get("links", []))
        extras = _extras(item.id, tags, None if expires is None else _num(expires), links)
        return MemoryVersion(item, changed, reinforced, extras)
    except (KeyError, TypeError, ValueError, InvalidInput) as exc:
        if isinstance(exc, crypto.TamperedData):
            raise
        raise crypto.TamperedData(f"a memory record is malformed ({exc})") from None


def _extras(
    memory_id: str, tags: Sequence[str], expires_at: float | None, links: Sequence[str]
) -> Extras:
    """Checked extras: a tag is stored on its own line, a memory is never linked to itself."""
    if any(not t or "\n" in t for t in tags) or memory_id in links:
        raise ValueError("malformed tags or links")
    return Extras(tuple(dict.fromkeys(tags)), expires_at, tuple(sorted(set(links))))


def _counters(value: object) -> Counters:
    if not isinstance(value, dict):
        raise TypeError("read counters are not an object")
    out: Counters = {}
    for device, entry in value.items():
        if not isinstance(device, str) or len(device) != 32 or not isinstance(entry, list):
            raise TypeError("malformed read counters")
        count, last = _int(entry[0]), entry[1]
        if count < 0 or len(entry) != 2:
            raise ValueError("malformed read counters")
        out[device] = (count, None if last is None else _num(last))
    return out


def _memory_item(data: dict[str, Any], memory_id: str | None) -> MemoryRow | Tombstone:
    mid = _str(data["id"])
    if memory_id is not None and mid != memory_id:
        raise crypto.TamperedData("a memory record holds another memory's id")
    if data["deleted"] is True:
        return Tombstone(mid)
    values = {n: _field(n, data) for n in _ROW_FIELDS}
    if values["tier"] not in TIERS:
        raise ValueError(f"unknown tier {values['tier']!r}")
    return MemoryRow(id=mid, **values)


def _optional_num(value: object) -> float | None:
    return None if value is None else _num(value)


_CHECK_BY_TYPE: Final[dict[str, Callable[[object], Any]]] = {
    "str": _str,
    "Tier": _str,
    "float": _num,
    "int": _int,
    "float | None": _optional_num,
    "tuple[str, ...]": _strs,
    "bool": bool,
}


def _field(name: str, data: dict[str, Any]) -> Any:
    """One checked field of a record (KeyError when a field every record has is missing)."""
    if name in rows.ADDED_LATER and name not in data:
        return rows.DEFAULTS[name]
    return _CHECK_BY_TYPE[rows.TYPES[name]](data[name])


# ------------------------------------------------------------------------------ manifest


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    table: str
    record_id: str  # hex
    version: str
    digest: str  # sha256(envelope) hex


@dataclass(frozen=True, slots=True)
class Manifest:
    device: str  # hex
    n: int
    records: tuple[ManifestEntry, ...] = field(default_factory=tuple)
    seen: tuple[tuple[str, int], ...] = ()


def encode_manifest(m: Manifest) -> bytes:
    data: dict[str, Any] = {
        "format": FORMAT,
        "device": m.device,
        "n": m.n,
        "records": [[e.table, e.record_id, e.version, e.digest] for e in m.records],
    }
    if m.seen:
        data["seen"] = dict(m.seen)
    return canonical(data)


class _ManifestPayload(msgspec.Struct):
    """A manifest of the usual shape, decoded in one pass (a manifest lists every record of
    its push); anything else goes through the checked decoder, which names what is wrong."""

    format: Literal[1]
    device: str
    n: int
    records: list[tuple[str, str, str, str]]
    seen: dict[str, int] = msgspec.field(default_factory=dict)


_MANIFEST_DECODER: Final = msgspec.json.Decoder(_ManifestPayload)


def _typed_manifest(plaintext: bytes, device_hex: str | None) -> Manifest | None:
    try:
        p = _MANIFEST_DECODER.decode(plaintext)
    except msgspec.MsgspecError:
        return None
    if (device_hex is not None and p.device != device_hex) or p.n < 1:
        return None
    if not all(line[0] in TABLES for line in p.records):
        return None
    entries = tuple(ManifestEntry(*line) for line in p.records)
    return Manifest(p.device, p.n, entries, tuple(sorted(p.seen.items())))


def decode_manifest(plaintext: bytes, device_hex: str | None = None) -> Manifest:
    typed = _typed_manifest(plaintext, device_hex)
    return typed if typed is not None else _general_manifest(plaintext, device_hex)


def _general_manifest(plaintext: bytes, device_hex: str | None) -> Manifest:
    data = _load(plaintext, "manifest")
    try:
        device = _str(data["device"])
        if device_hex is not None and device != device_hex:
            raise crypto.TamperedData("a manifest names another device")
        n = _int(data["n"])
        if n < 1:
            raise ValueError("manifest counter below 1")
        entries = []
        for line in data["records"]:
            table, rid, version, digest = (_str(v) for v in line)
            if table not in TABLES:
                raise ValueError(f"unknown table {table!r}")
            entries.append(ManifestEntry(table, rid, version, digest))
        seen = data.get("seen", {})
        if not isinstance(seen, dict):
            raise TypeError("seen is not an object")
        pairs = tuple(sorted((_str(d), _int(k)) for d, k in seen.items()))
        return Manifest(device, n, tuple(entries), pairs)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, crypto.TamperedData):
            raise
        raise crypto.TamperedData(f"a manifest is malformed ({exc})") from None
