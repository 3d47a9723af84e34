"""A memory's record (row or tombstone, read counters, extras): most of what sync seals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from tiermem.core import rows
from tiermem.core.errors import InvalidInput
from tiermem.core.rows import TIERS, MemoryRow
from tiermem.sync import crypto, hlc
from tiermem.sync.records import FORMAT, canonical, check_int, check_num, check_str, load

__all__ = [
    "Counters",
    "Extras",
    "History",
    "Lineage",
    "MemoryRow",
    "MemoryVersion",
    "Tombstone",
    "decode_memory",
    "decode_memory_version",
    "encode_memory",
    "memory_body",
]


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


History = dict[str, str]
"""Device hex → the newest version of one memory from that device that a content holds."""


@dataclass(frozen=True, slots=True)
class Lineage:
    """What a memory's content was edited from: `base`, the versions of the memory its edit
    started from (so a device tells an update of what it holds from a concurrent edit), and
    `clocks`, the version of the last change of each field group (so edits of different
    fields merge): '' for the record's own version; a group not listed was last changed by the
    newest version of `base` (by the record's own when `base` is empty). A record written
    before lineage existed has none (`None`). Held compactly: `base` as its versions (each
    names its device), `clocks` as each version with the groups it stamps."""

    base: History
    clocks: dict[str, str]


@dataclass(frozen=True, slots=True)
class MemoryVersion:
    """A decoded memory record: the row or tombstone, the content version it stands for when
    not the record's own (`changed`), the read counters it carries, its extras and its
    lineage (None in records of older devices)."""

    item: MemoryRow | Tombstone
    changed: str | None = None
    reinforced: Counters = field(default_factory=dict)
    extras: Extras = Extras()
    lineage: Lineage | None = None

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
    lineage: Lineage | None = None,
) -> bytes:
    extra: dict[str, Any] = {}
    if changed is not None:
        extra["changed"] = changed
    if lineage is not None:
        extra["base"] = sorted(lineage.base.values())
        extra["clocks"] = _grouped(lineage.clocks)
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
        ("base", Any, None),
        ("clocks", Any, None),
    ],
)
"""A memory payload of the usual shape, decoded and type-checked in one pass (a restore
decodes thousands a second), built from `MemoryRow`'s fields. Whatever does not fit goes
through `records.load` and the checks below, which name what is wrong: both accept the same payloads
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
        changed = None if p.changed is None else str(hlc.parse(check_str(p.changed)))
        reinforced = _counters(p.reinforced)
        lineage = _lineage(p.base, p.clocks)
        if p.deleted:
            return MemoryVersion(Tombstone(p.id), changed, reinforced, lineage=lineage)
        values = {n: getattr(p, n) for n in _ROW_FIELDS}
        if msgspec.UNSET in values.values() or p.tier not in TIERS:
            return None
        values = {n: tuple(v) if isinstance(v, list) else v for n, v in values.items()}
        values["pinned"] = bool(p.pinned)
        extras = _extras(p.id, p.tags, p.expires_at, p.links)
        row = MemoryRow(id=p.id, **values)
        return MemoryVersion(row, changed, reinforced, extras, lineage)
    except (TypeError, ValueError, InvalidInput):
        return None


def decode_memory_version(plaintext: bytes, memory_id: str | None = None) -> MemoryVersion:
    """Decode a memory payload with its content version and read counters."""
    typed = _typed_memory(plaintext, memory_id)
    return typed if typed is not None else _general_memory(plaintext, memory_id)


def _general_memory(plaintext: bytes, memory_id: str | None) -> MemoryVersion:
    data = load(plaintext, "memory")
    try:
        changed = data.get("changed")
        if changed is not None:
            changed = str(hlc.parse(check_str(changed)))
        reinforced = _counters(data.get("reinforced", {}))
        lineage = _lineage(data.get("base"), data.get("clocks"))
        item = _memory_item(data, memory_id)
        if isinstance(item, Tombstone):
            return MemoryVersion(item, changed, reinforced, lineage=lineage)
        expires = data.get("expires_at")
        tags, links = _strs(data.get("tags", [])), _strs(data.get("links", []))
        extras = _extras(item.id, tags, None if expires is None else check_num(expires), links)
        return MemoryVersion(item, changed, reinforced, extras, lineage)
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


def _versions(value: object, key_ok: Callable[[str], bool]) -> dict[str, str]:
    """A mapping of names to versions, each checked (ValueError names what is wrong)."""
    if not isinstance(value, dict):
        raise TypeError("a lineage is not an object")
    out: dict[str, str] = {}
    for key, version in value.items():
        if not isinstance(key, str) or not key_ok(key) or not isinstance(version, str):
            raise ValueError("malformed lineage")
        out[key] = str(hlc.parse(version))
    return out


def _grouped(clocks: dict[str, str]) -> dict[str, list[str]]:
    """Clocks as their record holds them: each version once, with the groups it stamps (a
    group it does not name was changed by the record's own version)."""
    out: dict[str, list[str]] = {}
    for group, version in sorted(clocks.items()):
        out.setdefault(version, []).append(group)
    return dict(sorted(out.items()))


def _lineage(base: object, clocks: object) -> Lineage | None:
    """The record's lineage: both parts, or neither (a record of an older device)."""
    if base is None and clocks is None:
        return None
    if not isinstance(clocks, dict) or not all(
        isinstance(g, list) and all(isinstance(n, str) and 0 < len(n) <= 32 for n in g)
        for g in clocks.values()
    ):
        raise ValueError("malformed lineage clocks")
    if not isinstance(base, list) or not all(isinstance(v, str) for v in base):
        raise ValueError("malformed lineage base")
    stamps = _versions({v: v for v in clocks if v}, lambda k: True) | {"": ""}
    by_group = {group: stamps[v] for v, groups in clocks.items() for group in groups}
    history = {hlc.parse(v).device: str(hlc.parse(v)) for v in base}
    if len(history) != len(base):
        raise ValueError("a lineage base names a device twice")
    return Lineage(history, by_group)


def _counters(value: object) -> Counters:
    if not isinstance(value, dict):
        raise TypeError("read counters are not an object")
    out: Counters = {}
    for device, entry in value.items():
        if not isinstance(device, str) or len(device) != 32 or not isinstance(entry, list):
            raise TypeError("malformed read counters")
        count, last = check_int(entry[0]), entry[1]
        if count < 0 or len(entry) != 2:
            raise ValueError("malformed read counters")
        out[device] = (count, None if last is None else check_num(last))
    return out


def _memory_item(data: dict[str, Any], memory_id: str | None) -> MemoryRow | Tombstone:
    mid = check_str(data["id"])
    if memory_id is not None and mid != memory_id:
        raise crypto.TamperedData("a memory record holds another memory's id")
    if data["deleted"] is True:
        return Tombstone(mid)
    values = {n: _field(n, data) for n in _ROW_FIELDS}
    if values["tier"] not in TIERS:
        raise ValueError(f"unknown tier {values['tier']!r}")
    return MemoryRow(id=mid, **values)


def _optional_num(value: object) -> float | None:
    return None if value is None else check_num(value)


_CHECK_BY_TYPE: Final[dict[str, Callable[[object], Any]]] = {
    "str": check_str,
    "Tier": check_str,
    "float": check_num,
    "int": check_int,
    "float | None": _optional_num,
    "tuple[str, ...]": _strs,
    "bool": bool,
}


def _field(name: str, data: dict[str, Any]) -> Any:
    """One checked field of a record (KeyError when a field every record has is missing)."""
    if name in rows.ADDED_LATER and name not in data:
        return rows.DEFAULTS[name]
    return _CHECK_BY_TYPE[rows.TYPES[name]](data[name])
