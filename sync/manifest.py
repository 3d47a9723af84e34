"""A push's manifest record, and the checkpoint that compacts manifests: what a restore and
`sync check` hold the server's copy against.

A manifest lists every other row of its push: its table, record id and the SHA-256 of its
envelope. Every row of one push shares the push's version, so the compact form (format 2,
what pushes write) states the version once and packs each line into 49 bytes (a table code,
the 16-byte record id, the 32-byte digest), base64 in the JSON body: about 66 bytes a line
against about 200 in format 1, which every reader still decodes.

Each line of a memory record also says whether that version was warm when sealed (`warm`: a
bitmap over the lines, one bit a line, inside the encryption): a restore fetches those records
first, before the cold archive. Readers that predate it ignore the field; manifests and
checkpoints without it restore newest first.

A checkpoint (`Checkpoint`, written by `sync prune` in the prune record's parts) stands for
every manifest it covers (per device, pushes 1..n): the lines of those pushes whose rows are
still kept, grouped by version. Once it is on the server the manifests it covers can go."""

from __future__ import annotations

import base64
import binascii
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from tiermem.sync import crypto
from tiermem.sync.records import FORMAT, TABLES, canonical, check_int, check_str, load

__all__ = [
    "CHECKPOINT_WITNESS",
    "COMPACT_FORMAT",
    "Checkpoint",
    "Manifest",
    "ManifestEntry",
    "decode_checkpoint",
    "decode_manifest",
    "encode_checkpoint",
    "encode_manifest",
    "pack_lines",
    "pack_warm",
    "unpack_lines",
    "unpack_warm",
]

COMPACT_FORMAT: Final = 2
CHECKPOINT_WITNESS: Final = "checkpoint"
"""The name under which a manifest's ``seen`` holds the newest checkpoint its writer made (a
server that later serves an older checkpoint is then caught, like a dropped push)."""
_RID_LEN: Final = 16
_DIGEST_LEN: Final = 32
_LINE_LEN: Final = 1 + _RID_LEN + _DIGEST_LEN


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    table: str
    record_id: str  # hex
    version: str
    digest: str  # sha256(envelope) hex
    warm: bool = False  # a memory version sealed in the warm tier (fetched first on restore)


@dataclass(frozen=True, slots=True)
class Manifest:
    device: str  # hex
    n: int
    records: tuple[ManifestEntry, ...] = field(default_factory=tuple)
    seen: tuple[tuple[str, int], ...] = ()


def pack_lines(entries: tuple[ManifestEntry, ...] | list[ManifestEntry]) -> str:
    """Lines as base64 of (table code, record id, digest), 49 bytes each."""
    out = bytearray()
    for e in entries:
        rid, digest = bytes.fromhex(e.record_id), bytes.fromhex(e.digest)
        if len(rid) != _RID_LEN or len(digest) != _DIGEST_LEN:
            raise ValueError("a manifest line needs a 16-byte record id and a SHA-256 digest")
        out += bytes((TABLES.index(e.table),)) + rid + digest
    return base64.b64encode(bytes(out)).decode("ascii")


def unpack_lines(packed: str, version: str) -> tuple[ManifestEntry, ...]:
    """`pack_lines` undone, every line at `version` (TamperedData when malformed)."""
    try:
        raw = base64.b64decode(packed, validate=True)
    except (binascii.Error, ValueError):
        raise crypto.TamperedData("a manifest's lines do not decode") from None
    if len(raw) % _LINE_LEN:
        raise crypto.TamperedData("a manifest's lines are cut short")
    out = []
    for at in range(0, len(raw), _LINE_LEN):
        code = raw[at]
        if code >= len(TABLES):
            raise crypto.TamperedData("a manifest line names an unknown table")
        rid = raw[at + 1 : at + 1 + _RID_LEN].hex()
        digest = raw[at + 1 + _RID_LEN : at + _LINE_LEN].hex()
        out.append(ManifestEntry(TABLES[code], rid, version, digest))
    return tuple(out)


def pack_warm(entries: tuple[ManifestEntry, ...] | list[ManifestEntry]) -> str | None:
    """Which lines are warm, as base64 of a bitmap (bit i of byte i // 8: line i); None when
    none is."""
    if not any(e.warm for e in entries):
        return None
    bits = bytearray((len(entries) + 7) // 8)
    for i, e in enumerate(entries):
        if e.warm:
            bits[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(bits)).decode("ascii")


def unpack_warm(entries: tuple[ManifestEntry, ...], packed: str) -> tuple[ManifestEntry, ...]:
    """`entries` with the warm flags of `pack_warm` set (TamperedData when malformed)."""
    if not packed:
        return entries
    try:
        bits = base64.b64decode(packed, validate=True)
    except (binascii.Error, ValueError):
        raise crypto.TamperedData("a manifest's warm lines do not decode") from None
    if len(bits) != (len(entries) + 7) // 8:
        raise crypto.TamperedData("a manifest's warm lines do not match its lines")
    return tuple(
        dataclasses.replace(e, warm=True) if bits[i // 8] >> (i % 8) & 1 else e
        for i, e in enumerate(entries)
    )


def encode_manifest(m: Manifest) -> bytes:
    """The compact form when every line shares one version (a push), else format 1."""
    versions = {e.version for e in m.records}
    data: dict[str, Any] = {"device": m.device, "n": m.n}
    if len(versions) == 1:
        data.update(format=COMPACT_FORMAT, version=versions.pop(), lines=pack_lines(m.records))
        warm = pack_warm(m.records)
        if warm is not None:
            data["warm"] = warm
    else:
        data["format"] = FORMAT
        data["records"] = [[e.table, e.record_id, e.version, e.digest] for e in m.records]
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


class _CompactPayload(msgspec.Struct):
    format: Literal[2]
    device: str
    n: int
    version: str
    lines: str
    seen: dict[str, int] = msgspec.field(default_factory=dict)
    warm: str = ""


_MANIFEST_DECODER: Final = msgspec.json.Decoder(_ManifestPayload)
_COMPACT_DECODER: Final = msgspec.json.Decoder(_CompactPayload)


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


def _compact_manifest(plaintext: bytes, device_hex: str | None) -> Manifest | None:
    """A format-2 manifest, checked (None: not of that format at all)."""
    try:
        p = _COMPACT_DECODER.decode(plaintext)
    except msgspec.MsgspecError:
        return None
    if device_hex is not None and p.device != device_hex:
        raise crypto.TamperedData("a manifest names another device")
    if p.n < 1:
        raise crypto.TamperedData("a manifest is malformed (counter below 1)")
    entries = unpack_warm(unpack_lines(p.lines, p.version), p.warm)
    return Manifest(p.device, p.n, entries, tuple(sorted(p.seen.items())))


def decode_manifest(plaintext: bytes, device_hex: str | None = None) -> Manifest:
    typed = _typed_manifest(plaintext, device_hex)
    if typed is None:
        typed = _compact_manifest(plaintext, device_hex)
    return typed if typed is not None else _general_manifest(plaintext, device_hex)


def _general_manifest(plaintext: bytes, device_hex: str | None) -> Manifest:
    data = load(plaintext, "manifest")
    try:
        device = check_str(data["device"])
        if device_hex is not None and device != device_hex:
            raise crypto.TamperedData("a manifest names another device")
        n = check_int(data["n"])
        if n < 1:
            raise ValueError("manifest counter below 1")
        entries = []
        for line in data["records"]:
            table, rid, version, digest = (check_str(v) for v in line)
            if table not in TABLES:
                raise ValueError(f"unknown table {table!r}")
            entries.append(ManifestEntry(table, rid, version, digest))
        seen = data.get("seen", {})
        if not isinstance(seen, dict):
            raise TypeError("seen is not an object")
        pairs = tuple(sorted((check_str(d), check_int(k)) for d, k in seen.items()))
        return Manifest(device, n, tuple(entries), pairs)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, crypto.TamperedData):
            raise
        raise crypto.TamperedData(f"a manifest is malformed ({exc})") from None


# ------------------------------------------------------------------------------ checkpoint


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One part of checkpoint `number` (parts 0..parts-1, each a version of the prune record):
    the manifests it covers per device, the prune horizon, and its share of the lines."""

    number: int
    part: int
    parts: int
    covers: tuple[tuple[str, int], ...]
    horizon: str | None
    lines: tuple[ManifestEntry, ...] = ()


class _CheckpointPayload(msgspec.Struct):
    format: Literal[2]
    checkpoint: int
    part: int
    parts: int
    covers: dict[str, int]
    groups: list[tuple[str, str]]
    horizon: str | None = None
    keep: int = 0
    warm: str = ""


_CHECKPOINT_DECODER: Final = msgspec.json.Decoder(_CheckpointPayload)


def encode_checkpoint(c: Checkpoint, keep: int) -> bytes:
    """A checkpoint part. It carries ``horizon`` like the prune record it is a version of, so
    a reader of prune records alone still finds the horizon."""
    groups: dict[str, list[ManifestEntry]] = {}
    for e in c.lines:
        groups.setdefault(e.version, []).append(e)
    ordered = [e for _, items in sorted(groups.items()) for e in items]
    data: dict[str, Any] = {
        "format": COMPACT_FORMAT,
        "checkpoint": c.number,
        "part": c.part,
        "parts": c.parts,
        "covers": dict(c.covers),
        "groups": [[v, pack_lines(items)] for v, items in sorted(groups.items())],
        "keep": keep,
    }
    if c.horizon is not None:
        data["horizon"] = c.horizon
    warm = pack_warm(ordered)
    if warm is not None:
        data["warm"] = warm
    return canonical(data)


def decode_checkpoint(plaintext: bytes) -> Checkpoint | None:
    """A checkpoint part (None: a prune record of the first format, a horizon alone)."""
    try:
        p = _CHECKPOINT_DECODER.decode(plaintext)
    except msgspec.ValidationError as exc:
        if b'"checkpoint"' in plaintext:
            raise crypto.TamperedData(f"a checkpoint is malformed ({exc})") from None
        return None
    except msgspec.DecodeError:
        raise crypto.TamperedData("a prune record does not decode") from None
    if p.checkpoint < 1 or not 0 <= p.part < p.parts:
        raise crypto.TamperedData("a checkpoint is numbered wrongly")
    lines = tuple(e for version, packed in p.groups for e in unpack_lines(packed, version))
    lines = unpack_warm(lines, p.warm)
    covers = tuple(sorted(p.covers.items()))
    return Checkpoint(p.checkpoint, p.part, p.parts, covers, p.horizon, lines)
