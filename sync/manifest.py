"""A push's manifest record: what a restore checks the server's copy against."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from tiermem.sync import crypto
from tiermem.sync.records import FORMAT, TABLES, canonical, check_int, check_str, load

__all__ = ["Manifest", "ManifestEntry", "decode_manifest", "encode_manifest"]


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
