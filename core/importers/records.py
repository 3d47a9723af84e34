"""tiermem's own export records back into memories: one record (`interchange.export_record`:
the `MemoryRow` fields, tags, expiry, links) → an `Item`, and after the store the record's
state restored on the new memory (tier, pin, dates, reads, supersession, tags, expiry,
links). mem0 and the JSON and folder exports all go through here, so what one of them carries
comes back the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from tiermem.core import rows
from tiermem.core.errors import InvalidInput
from tiermem.core.importers.base import Item, timestamp

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

_STORED: Final = frozenset(
    {"id", "text", "category", "importance", "created_at", "urls", "commands", "paths"}
)
"""Fields the store itself writes (the new memory's id is the target agent's)."""
_DERIVED: Final = frozenset({"size_bytes", "tokens"})
STATE_FIELDS: Final = tuple(n for n in rows.NAMES if n not in _STORED | _DERIVED)
"""The `MemoryRow` fields restored after the store, derived from the row's declaration."""
_DATES: Final = frozenset(
    n for n in STATE_FIELDS if rows.TYPES[n] in ("float", "float | None") and n != "importance"
)


def item_from_record(source: str, record: Mapping[str, Any]) -> Item:
    """An export record as an item keyed by its memory id; InvalidInput says what is wrong."""
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("no text")
    meta = record.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise InvalidInput("metadata is not an object")
    importance = record.get("importance", 0.5)
    rows.check_importance(importance)
    return Item(
        source=source,
        key=str(record.get("id") or text),
        text=text,
        category=str(record.get("category") or "general"),
        importance=float(importance),
        created_at=timestamp(record.get("created_at")),
        urls=strings(meta.get("urls")),
        commands=strings(meta.get("commands")),
        paths=strings(meta.get("paths", meta.get("file_paths"))),
        tags=strings(record.get("tags")),
        expires_at=timestamp(record.get("expires_at")),
        links=strings(record.get("related_to")),
        state=state_of(record),
    )


def state_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record's state fields that are present, dates read as epoch seconds."""
    state: dict[str, Any] = {}
    for name in STATE_FIELDS:
        if name not in record:
            continue
        value = record[name]
        state[name] = timestamp(value) if name in _DATES else value
    return state


def strings(value: Any) -> tuple[str, ...]:
    """A list of strings (or one string) as a tuple; anything else is none."""
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list):
        return tuple(str(v) for v in value if isinstance(v, str | int | float) and str(v).strip())
    return ()


def restore(mem: Memory, created: Sequence[tuple[Item, str]], ids: Mapping[str, str]) -> None:
    """Give each newly stored memory what its item carries beyond the stored fields (inside
    the caller's transaction). `ids` maps item keys to the memory ids they became."""
    from tiermem.core import hygiene, links  # what only a restore of tags and links needs

    for item, memory_id in created:
        if item.state:
            _restore_state(mem, memory_id, item.state, ids)
        if item.tags or item.expires_at is not None:
            hygiene.set_extras(mem, memory_id, item.tags, item.expires_at)
    for item, memory_id in created:
        for key in item.links:
            other = ids.get(key)
            if other is not None and other != memory_id:
                links.link(mem, memory_id, other)


def _restore_state(
    mem: Memory, memory_id: str, state: dict[str, Any], ids: Mapping[str, str]
) -> None:
    values = {name: _typed(name, value) for name, value in state.items()}
    if "superseded_by" in values:
        successor = str(values["superseded_by"])
        values["superseded_by"] = ids.get(successor, "") if successor else ""
    row = mem.memories.get(memory_id)
    try:
        restored = dataclasses.replace(row, **values)  # the row's own checks run
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"memory {row.text[:40]!r}: {exc}") from None
    rows.upsert(mem.memories, restored)


def _typed(name: str, value: Any) -> Any:
    """A state value as `MemoryRow` declares it; InvalidInput for one of another type."""
    declared = rows.TYPES[name]
    if value is None and declared.endswith("| None"):
        return None
    if declared == "bool" and isinstance(value, bool):
        return value
    if declared == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if declared in ("str", "Tier") and isinstance(value, str):
        return value
    if (
        declared.startswith("float")
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    ):
        return float(value)
    raise InvalidInput(f"{name} {value!r} is not a {declared}")
