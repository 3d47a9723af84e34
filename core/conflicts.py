"""Conflicts: values of the critical state that lost a merge between devices, kept until a
person looks at them.

When two devices change the same field while apart, the merge (`tiermem.sync.merge`) keeps the
later write (by hybrid logical clock) and records the other here, so nothing a device wrote is
silently lost. The same happens when a merged state breaks a limit and an item is pruned, and
when a delete loses against an edit (or the other way round). A record names the item
(`identity`, `lesson/<id>`, `tree/<path>`, `memory/<id>`, ...), the field (`alive` for the
item's existence: its value is then the whole item, or null for "deleted"; for a memory, a
field group of the sync merge: `text`, `importance`, `tags`, ...), both values (JSON) and both
versions. A memory's records come from the pull's merge of two edits of one memory
(`tiermem.sync.kinds.memory_merge`); `about` names each record by what a person knows it by.

Records travel inside the synced critical document (the newest `SYNCED` of them, with their
resolved flag), so every device lists a conflict whichever device found it. `resolve_conflict`
takes the kept value (the record is just closed) or the lost one: it is applied as a new local
change, which wins the next merge everywhere.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from tiermem.core import clocks, curate, links, outbox
from tiermem.core import hot as hotmod
from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

SYNCED = 64
"""How many conflict records (newest lost version first) travel in the critical document."""
TAKES = ("kept", "lost")
SIDES = ("local", "remote")
"""Takes named by device: `local` is the value this device wrote (the kept one when neither
side was this device's), `remote` the other."""
_STRUCTS: dict[str, type[msgspec.Struct]] = {
    "lesson": hotmod.Lesson,
    "event": hotmod.Event,
    "task": hotmod.Task,
    "project": hotmod.Project,
}


@dataclass(frozen=True)
class Conflict:
    id: str
    item: str
    field: str
    kept_value: Any
    lost_value: Any
    kept_version: str
    lost_version: str
    lost_device: str
    reason: str
    detected_at: float
    resolved_at: float | None
    resolution: str | None

    @property
    def resolved(self) -> bool:
        return self.resolved_at is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"resolved": self.resolved}

    def describe(self) -> str:
        """One line for a person: what was kept, what lost."""
        return (
            f"{self.item} {self.field}: kept {show(self.kept_value)}, lost {show(self.lost_value)}"
        )


def show(value: Any, width: int = 60) -> str:
    if value is None:
        return "(deleted)"
    if isinstance(value, dict):
        label = value.get("text") or value.get("name") or value.get("description")
        text = json.dumps(label if label is not None else value, ensure_ascii=False)
    else:
        text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def conflict_id(item: str, field: str, kept_version: str, lost_version: str) -> str:
    """Deterministic: the same loss found on two devices is one record."""
    key = f"{item}\0{field}\0{kept_version}\0{lost_version}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def record_conflict(
    db: Database,
    agent_id: str,
    item_key: str,
    field: str,
    kept_value: Any,
    lost_value: Any,
    kept_version: str,
    lost_version: str,
    lost_device: str,
    now: float,
    *,
    reason: str = "",
    resolved: bool = False,
) -> str:
    """Keep a lost value (idempotent: a known record is left as it is). Returns its id."""
    cid = conflict_id(item_key, field, kept_version, lost_version)
    db.execute(
        "INSERT INTO conflicts (agent_id, id, item, field, kept_value, lost_value, "
        "kept_version, lost_version, lost_device, reason, detected_at, resolved_at, resolution) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, id) DO NOTHING",
        (
            agent_id,
            cid,
            item_key,
            field,
            clocks.canonical_json(kept_value),
            clocks.canonical_json(lost_value),
            kept_version,
            lost_version,
            lost_device,
            reason,
            now,
            now if resolved else None,
            "elsewhere" if resolved else None,
        ),
    )
    return cid


_COLUMNS = (
    "id, item, field, kept_value, lost_value, kept_version, lost_version, lost_device, reason, "
    "detected_at, resolved_at, resolution"
)


def _conflict(row: tuple[Any, ...]) -> Conflict:
    return Conflict(
        id=row[0],
        item=row[1],
        field=row[2],
        kept_value=json.loads(row[3]),
        lost_value=json.loads(row[4]),
        kept_version=row[5],
        lost_version=row[6],
        lost_device=row[7],
        reason=row[8],
        detected_at=float(row[9]),
        resolved_at=None if row[10] is None else float(row[10]),
        resolution=row[11],
    )


def list_conflicts(db: Database, agent_id: str, include_resolved: bool = False) -> list[Conflict]:
    """The agent's conflicts, newest first (open ones only unless `include_resolved`)."""
    where = "" if include_resolved else " AND resolved_at IS NULL"
    rows = db.query(
        f"SELECT {_COLUMNS} FROM conflicts WHERE agent_id = ?{where} "
        "ORDER BY detected_at DESC, lost_version DESC, id",
        (agent_id,),
    )
    return [_conflict(r) for r in rows]


def get_conflict(db: Database, agent_id: str, conflict_id: str) -> Conflict:
    """By id or a unique prefix of at least 4 characters."""
    wanted = conflict_id.strip().lower()
    if len(wanted) < 4:
        raise InvalidInput("give at least 4 characters of the conflict id")
    rows = db.query(
        f"SELECT {_COLUMNS} FROM conflicts WHERE agent_id = ? AND substr(id, 1, ?) = ?",
        (agent_id, len(wanted), wanted),
    )
    if not rows:
        raise NotFound(f"no conflict {conflict_id!r}")
    if len(rows) > 1:
        raise InvalidInput(f"conflict id {conflict_id!r} is ambiguous: give more characters")
    return _conflict(rows[0])


def resolve_conflict(
    db: Database,
    agent_id: str,
    conflict_id: str,
    take: str = "kept",
    *,
    mem: Memory | None = None,
) -> Conflict:
    """Close a conflict. `take="kept"` leaves the state as the merge made it; `take="lost"`
    applies the lost value as a new local change (through `mem`, which is then required: hot
    limits, MEMORY.md), so it wins the next merge on every device. Returns the closed record."""
    if take not in TAKES:
        raise InvalidInput(f"take must be one of {', '.join(TAKES)} (got {take!r})")
    conflict = get_conflict(db, agent_id, conflict_id)
    if conflict.resolved:
        raise InvalidInput(f"conflict {conflict.id} is already resolved ({conflict.resolution})")
    if take == "lost":
        if mem is None or mem.db is not db or mem.agent_id != agent_id:
            raise InvalidInput("taking the lost value needs the agent's memory (mem=)")
        _apply_lost(mem, conflict)
    # the close is a change of the synced document: it travels like any other
    now = mem.now() if mem is not None else time.time()
    with db.transaction():
        db.execute(
            "UPDATE conflicts SET resolved_at = ?, resolution = ? WHERE agent_id = ? AND id = ?",
            (now, take, agent_id, conflict.id),
        )
        outbox.enqueue(db, agent_id, "conflict", now)
    return get_conflict(db, agent_id, conflict.id)


def take_for(c: Conflict, side: str, device_hex: str) -> str:
    """`local` or `remote` as `kept` or `lost` for this device (`device_hex`)."""
    if side in TAKES:
        return side
    if side not in SIDES:
        raise InvalidInput(f"take must be one of {', '.join(TAKES + SIDES)} (got {side!r})")
    lost_here = bool(device_hex) and c.lost_device == device_hex
    return "lost" if (side == "local") == lost_here else "kept"


def about(db: Database, agent_id: str, c: Conflict, width: int = 48) -> str:
    """What a person knows the item by: a memory's text, a tree node's description, a hot
    item's name or text, else its key."""
    kind, _, key = c.item.partition("/")
    label: Any = None
    if kind == "memory":
        label = db.scalar(
            "SELECT text FROM memories WHERE agent_id = ? AND id = ?", (agent_id, key)
        )
    elif kind == "tree":
        label = db.scalar(
            "SELECT description FROM tree_nodes WHERE agent_id = ? AND path = ?", (agent_id, key)
        )
        label = f"{key}: {label}" if label else key
    if not label:
        label = next((_label(v) for v in (c.kept_value, c.lost_value) if _label(v)), None)
        if kind in clocks.MAPPINGS:
            label = kind.replace("_", " ")
        elif label and kind in _STRUCTS:
            label = f"{kind} {label}"
    text = " ".join(str(label or c.item).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _label(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        found = value.get("text") or value.get("name") or value.get("description")
        return found if isinstance(found, str) else None
    return None


def _apply_lost(mem: Memory, c: Conflict) -> None:
    kind = clocks.kind(c.item)
    if c.item.startswith("memory/"):
        _apply_memory_value(mem, c.item.partition("/")[2], c.field, c.lost_value)
        return
    if kind in clocks.MAPPINGS:
        mem.update_hot(kind, {c.field: c.lost_value})
        return
    key = c.item.partition("/")[2]
    if kind == "tree":
        if c.field == clocks.ALIVE and c.lost_value is None:
            if key in mem.trees.load().nodes:
                mem.tree_remove(key)
            return
        description = c.lost_value["description"] if c.field == clocks.ALIVE else c.lost_value
        mem.tree_add(key, str(description))
        return
    if kind not in _STRUCTS:
        raise InvalidInput(f"cannot apply a value to {c.item!r}")
    mem.edit_hot(lambda state: _put_item(state, kind, key, c.field, c.lost_value))


_MEMORY_COLUMNS = {
    "category": ("category",),
    "importance": ("importance",),
    "pinned": ("pinned",),
    "superseded": ("superseded_by", "superseded_at"),
    "valid_from": ("valid_from",),
}


def _apply_memory_value(mem: Memory, memory_id: str, group: str, value: Any) -> None:
    """Set one field group of a memory to a value it lost in a merge, as a local edit (so
    the next push carries it to every device)."""
    if group == clocks.ALIVE:
        if value is None:
            curate.move_to_forgotten(mem, memory_id)
        return
    mem.get(memory_id)  # NotFound when it is gone here
    if group == "text":
        curate.edit(mem, memory_id, text=str(value))
    elif group == "metadata":
        curate.edit(
            mem, memory_id, urls=value["urls"], commands=value["commands"], paths=value["paths"]
        )
    elif group == "links":
        _set_links(mem, memory_id, set(value))
    elif group in ("tags", "expires_at"):
        _set_extra(mem, memory_id, group, value)
    elif group in _MEMORY_COLUMNS:
        names = _MEMORY_COLUMNS[group]
        values = [value] if len(names) == 1 else [value[n] for n in names]
        assignments = ", ".join(f"{n} = ?" for n in names)
        with mem.db.transaction():
            mem.db.execute(
                f"UPDATE memories SET {assignments} WHERE agent_id = ? AND id = ?",
                (*values, mem.agent_id, memory_id),
            )
    else:
        raise InvalidInput(f"cannot apply a value to {group!r} of a memory")


def _set_links(mem: Memory, memory_id: str, wanted: set[str]) -> None:
    held = set(links.linked(mem, [memory_id]).get(memory_id, []))
    for other in sorted(held - wanted):
        links.unlink(mem, memory_id, other)
    for other in sorted(wanted - held):
        links.link(mem, memory_id, other)


def _set_extra(mem: Memory, memory_id: str, group: str, value: Any) -> None:
    """Replace the tags (a list) or the expiry of a memory."""
    with mem.db.transaction():
        mem.db.execute(
            "INSERT INTO memory_extras (agent_id, id, tags, expires_at) VALUES (?, ?, '', NULL) "
            "ON CONFLICT (agent_id, id) DO NOTHING",
            (mem.agent_id, memory_id),
        )
        stored = "\n".join(value) if group == "tags" else value
        mem.db.execute(
            f"UPDATE memory_extras SET {group} = ? WHERE agent_id = ? AND id = ?",
            (stored, mem.agent_id, memory_id),
        )
        mem.db.execute(
            "DELETE FROM memory_extras WHERE agent_id = ? AND id = ? AND tags = '' "
            "AND expires_at IS NULL",
            (mem.agent_id, memory_id),
        )


def _entries(state: hotmod.HotState, kind: str) -> list[Any]:
    ctx = state.active_context
    lists: dict[str, list[Any]] = {
        "lesson": state.critical_lessons,
        "event": ctx.events,
        "task": ctx.tasks,
        "project": ctx.projects,
    }
    return lists[kind]


def _put_item(state: hotmod.HotState, kind: str, key: str, field: str, value: Any) -> None:
    entries = _entries(state, kind)
    index = next((i for i, e in enumerate(entries) if e.id == key), None)
    if field == clocks.ALIVE:
        if value is None:
            if index is not None:
                del entries[index]
            return
        item = msgspec.convert({**value, "id": key}, _STRUCTS[kind])
    else:
        if index is None:
            raise InvalidInput(f"{kind} {key} no longer exists: its {field} cannot be set")
        fields = msgspec.to_builtins(entries[index]) | {field: value}
        item = msgspec.convert(fields, _STRUCTS[kind])
    if index is None:
        entries.append(item)
    else:
        entries[index] = item


# -- conflicts in the synced critical document -----------------------------------------------


def to_document(c: Conflict) -> dict[str, Any]:
    return {
        "id": c.id,
        "item": c.item,
        "field": c.field,
        "kept": c.kept_value,
        "lost": c.lost_value,
        "kept_version": c.kept_version,
        "lost_version": c.lost_version,
        "lost_device": c.lost_device,
        "reason": c.reason,
        "resolved": c.resolved,
    }


def synced(db: Database, agent_id: str) -> list[dict[str, Any]]:
    """The records that travel in the critical document: the newest `SYNCED` by lost version,
    sorted by id (a canonical order)."""
    every = list_conflicts(db, agent_id, include_resolved=True)
    newest = sorted(every, key=lambda c: (c.lost_version, c.id), reverse=True)[:SYNCED]
    return sorted((to_document(c) for c in newest), key=lambda d: str(d["id"]))


def absorb(db: Database, agent_id: str, records: list[dict[str, Any]], now: float) -> int:
    """Take the records of a merged document: unknown ones are added, ones resolved elsewhere
    are closed here too. Returns how many were new."""
    added = 0
    for r in records:
        try:
            item, field = str(r["item"]), str(r["field"])
            kept_v, lost_v = str(r["kept_version"]), str(r["lost_version"])
        except (KeyError, TypeError) as exc:
            raise InvalidInput(f"malformed conflict record ({exc})") from None
        cid = conflict_id(item, field, kept_v, lost_v)
        known = db.scalar(
            "SELECT resolved_at IS NOT NULL FROM conflicts WHERE agent_id = ? AND id = ?",
            (agent_id, cid),
        )
        if known is None:
            record_conflict(
                db,
                agent_id,
                item,
                field,
                r.get("kept"),
                r.get("lost"),
                kept_v,
                lost_v,
                str(r.get("lost_device", "")),
                now,
                reason=str(r.get("reason", "")),
                resolved=bool(r.get("resolved")),
            )
            added += 1
        elif not known and r.get("resolved"):
            db.execute(
                "UPDATE conflicts SET resolved_at = ?, resolution = 'elsewhere' "
                "WHERE agent_id = ? AND id = ?",
                (now, agent_id, cid),
            )
    return added
