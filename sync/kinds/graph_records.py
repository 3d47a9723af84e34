"""Episodes and the knowledge graph in the vault, sealed like memories: one record per episode
and one per entity (its names, the relations it is the subject of and its mentions), marked
for the next push by the triggers of `graph_dirty`.

Records merge on pull in any order: an episode keeps the later conversation end and the union
of its participants and facts; an entity gains the names, relations and mentions it lacked
(a relation closed on either device stays closed). A merged or deleted entity is a record of
its own (`gone`, with the entity it went into): the device that pulls it merges it the same
way, remembers it in `graph_gone`, and folds any later copy of it into the entity it went
into, so no device brings it back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from tiermem.core.db import Database
from tiermem.core.episodes import COLUMNS as EPISODE_COLUMNS
from tiermem.sync import crypto
from tiermem.sync import records as records_fmt
from tiermem.sync.records import GRAPH_TABLE

__all__ = ["GraphItem", "apply", "open_or", "seal"]

_PAGE: Final = 500
_EPISODE_NAMES: Final = tuple(c.strip() for c in EPISODE_COLUMNS.split(","))
_KINDS: Final = ("episode", "entity")
_Row = tuple[str, str, bytes, str, int, int, bytes]


class Sealer(Protocol):
    """What `push/seal.py`'s batch sealer offers."""

    rows: list[_Row]
    used: int

    def seal(self, table: str, key: str, body: bytes) -> _Row: ...

    def keep(self, row: _Row) -> None: ...


@dataclass(frozen=True)
class GraphItem:
    """One episode or entity as a record holds it; `data` None: deleted (or merged away)."""

    kind: str
    id: str
    data: dict[str, Any] | None
    merged_into: str | None = None

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.id}"

    def encode(self) -> bytes:
        return records_fmt.canonical(
            {
                "format": 1,
                "kind": self.kind,
                "id": self.id,
                "data": self.data,
                "merged_into": self.merged_into,
            }
        )


# -- sealing --------------------------------------------------------------------------------


def seal(db: Database, agent_id: str, after: int, budget: int, sealer: Sealer) -> int:
    """Seal the episodes and entities changed after mark `after` (in `graph_dirty` order)
    until `budget` bytes are used; returns the mark the batch covers."""
    up_to = after
    while True:
        page = db.query(
            "SELECT seq, kind, id FROM graph_dirty WHERE agent_id = ? AND seq > ? "
            "ORDER BY seq LIMIT ?",
            (agent_id, up_to, _PAGE),
        )
        for seq, kind, item_id in page:
            item = read_item(db, agent_id, str(kind), str(item_id))
            row = sealer.seal(GRAPH_TABLE, item.key, item.encode())
            if sealer.rows and sealer.used + len(row[6]) > budget:
                return up_to
            sealer.keep(row)
            up_to = int(seq)
        if len(page) < _PAGE:
            return up_to


def read_item(db: Database, agent_id: str, kind: str, item_id: str) -> GraphItem:
    """The record of one episode or entity as this device holds it now."""
    if kind == "episode":
        row = db.query_one(
            f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE agent_id = ? AND id = ?",
            (agent_id, item_id),
        )
        data = None if row is None else dict(zip(_EPISODE_NAMES, row, strict=True))
        return GraphItem(kind, item_id, data)
    row = db.query_one(
        "SELECT name, kind, created_at, updated_at FROM entities WHERE agent_id = ? AND id = ?",
        (agent_id, item_id),
    )
    if row is None:
        into = db.scalar(
            "SELECT merged_into FROM graph_gone WHERE agent_id = ? AND id = ?", (agent_id, item_id)
        )
        return GraphItem(kind, item_id, None, None if into is None else str(into))
    where = (agent_id, item_id)
    data = {
        "name": row[0],
        "kind": row[1],
        "created_at": row[2],
        "updated_at": row[3],
        "names": _rows(
            db, "key, name FROM entity_names WHERE agent_id = ? AND entity_id = ?", where
        ),
        "relations": _rows(
            db,
            "id, predicate, object, valid_from, valid_to, source, created_at FROM relations "
            "WHERE agent_id = ? AND subject = ?",
            where,
        ),
        "mentions": _rows(
            db, "kind, ref FROM mentions WHERE agent_id = ? AND entity_id = ?", where
        ),
    }
    return GraphItem(kind, item_id, data)


def _rows(db: Database, select: str, params: tuple[str, str]) -> list[list[Any]]:
    return [list(r) for r in db.query(f"SELECT {select} ORDER BY 1", params)]


# -- opening --------------------------------------------------------------------------------


def open_or(
    error: crypto.CryptoError,
    key: bytes,
    agent_id: str,
    id_key: bytes,
    row: Any,
    verify: records_fmt.Verifier | None = None,
) -> GraphItem:
    """A row that did not open as a memory, opened as an episode or entity record; `error`
    (the memory's) when it is not one either. `verify`: a shared space's signature check."""
    try:
        item = decode(records_fmt.open_row(key, agent_id, GRAPH_TABLE, row, verify))
    except crypto.CryptoError:
        raise error from None
    if records_fmt.record_id(id_key, GRAPH_TABLE, item.key) != row.record_id:
        raise crypto.TamperedData("a graph record is filed under another id")
    return item


def decode(plaintext: bytes) -> GraphItem:
    try:
        doc = json.loads(plaintext)
        kind, item_id, data, into = doc["kind"], doc["id"], doc["data"], doc["merged_into"]
    except (ValueError, KeyError, TypeError):
        raise crypto.TamperedData("a graph record does not decode") from None
    if kind not in _KINDS or not isinstance(item_id, str) or not item_id:
        raise crypto.TamperedData("a graph record names no episode or entity")
    if not (data is None or _well_formed(kind, data)) or not (
        into is None or isinstance(into, str)
    ):
        raise crypto.TamperedData("a graph record is malformed")
    return GraphItem(kind, item_id, data, into)


_ENTITY_LISTS: Final = {"names": 2, "relations": 7, "mentions": 2}


def _well_formed(kind: str, data: object) -> bool:
    """Every field a record's rows need, so that applying it cannot fail halfway."""
    if not isinstance(data, dict):
        return False
    if kind == "episode":
        return all(name in data for name in _EPISODE_NAMES)
    return all(name in data for name in ("name", "kind", "created_at", "updated_at")) and all(
        isinstance(data.get(name), list)
        and all(isinstance(r, list) and len(r) == width for r in data[name])
        for name, width in _ENTITY_LISTS.items()
    )


# -- applying -------------------------------------------------------------------------------


def apply(db: Database, agent_id: str, items: Sequence[GraphItem], now: float) -> int:
    """Merge remote records into this device's episodes and graph (the caller's transaction):
    episodes, then entities, then what was merged away. Returns how many changed something.
    What they change is not marked for push again, unless it had changes of its own."""
    order = {"episode": 0, "entity": 1}
    changed = 0
    for item in sorted(items, key=lambda i: (order[i.kind] + (i.data is None), i.key)):
        before = int(db.scalar("SELECT COALESCE(MAX(seq), 0) FROM graph_dirty"))
        own = db.scalar(
            "SELECT seq FROM graph_dirty WHERE agent_id = ? AND kind = ? AND id = ?",
            (agent_id, item.kind, item.id),
        )
        try:
            _apply_one(db, agent_id, item, now)
        except (KeyError, TypeError, ValueError, IndexError):
            raise crypto.TamperedData("a graph record holds malformed rows") from None
        if db.scalar("SELECT 1 FROM graph_dirty WHERE seq > ? LIMIT 1", (before,)):
            changed += 1
        if own is None:
            db.execute(
                "DELETE FROM graph_dirty WHERE agent_id = ? AND kind = ? AND id = ? AND seq > ?",
                (agent_id, item.kind, item.id, before),
            )
    return changed


def forget_marks(db: Database, agent_id: str) -> None:
    """A restore: what it wrote is what the vault holds, nothing to push back."""
    db.execute("DELETE FROM graph_dirty WHERE agent_id = ?", (agent_id,))


def _apply_one(db: Database, agent_id: str, item: GraphItem, now: float) -> None:
    if item.kind == "episode":
        _apply_episode(db, agent_id, item.id, item.data, now)
    elif item.data is None:
        _apply_gone(db, agent_id, item.id, item.merged_into)
    else:
        _apply_entity(db, agent_id, item.id, item.data)


def _apply_episode(
    db: Database, agent_id: str, episode_id: str, data: dict[str, Any] | None, now: float
) -> None:
    if data is None:
        db.execute("DELETE FROM episodes WHERE agent_id = ? AND id = ?", (agent_id, episode_id))
        return
    remote = {name: data[name] for name in _EPISODE_NAMES}
    if remote["id"] != episode_id or float(remote["expires_at"]) <= now:
        return  # misfiled, or expired (the device that pruned it sent its deletion)
    row = db.query_one(
        f"SELECT {EPISODE_COLUMNS} FROM episodes WHERE agent_id = ? AND id = ?",
        (agent_id, episode_id),
    )
    if row is None:
        db.execute(
            f"INSERT OR IGNORE INTO episodes (agent_id, {EPISODE_COLUMNS}) "
            f"VALUES (?, {', '.join('?' * len(_EPISODE_NAMES))})",
            (agent_id, *(remote[n] for n in _EPISODE_NAMES)),
        )
        return
    local = dict(zip(_EPISODE_NAMES, row, strict=True))
    merged = _join_episodes(local, remote)
    if merged != local:
        sets = ", ".join(f"{n} = ?" for n in _EPISODE_NAMES[1:])
        db.execute(
            f"UPDATE episodes SET {sets} WHERE agent_id = ? AND id = ?",
            (*(merged[n] for n in _EPISODE_NAMES[1:]), agent_id, episode_id),
        )


def _join_episodes(local: dict[str, Any], remote: dict[str, Any]) -> dict[str, Any]:
    """Both devices' versions of one conversation's episode, in either order the same."""
    later = max(local, remote, key=lambda e: (float(e["ended_at"]), str(e["summary"])))
    out = dict(later)
    for name in ("participants", "fact_ids", "topics"):
        first, second = (local, remote) if later is local else (remote, local)
        values = [*str(first[name] or "").split("\n"), *str(second[name] or "").split("\n")]
        out[name] = "\n".join(dict.fromkeys(v for v in values if v))
    for name in ("started_at", "created_at"):
        out[name] = min(float(local[name]), float(remote[name]))
    promoted = [float(e["promoted_at"]) for e in (local, remote) if e["promoted_at"] is not None]
    out["promoted_at"] = min(promoted) if promoted else None
    return out


def _target(db: Database, agent_id: str, entity_id: str) -> str | None:
    """Where an entity lives now: itself, or what it was merged into (None: deleted)."""
    seen: set[str] = set()
    current: str | None = entity_id
    while current is not None and current not in seen:
        seen.add(current)
        row = db.query_one(
            "SELECT merged_into FROM graph_gone WHERE agent_id = ? AND id = ?", (agent_id, current)
        )
        if row is None:
            return current
        current = None if row[0] is None else str(row[0])
    return current


def _apply_entity(db: Database, agent_id: str, entity_id: str, data: dict[str, Any]) -> None:
    target = _target(db, agent_id, entity_id)
    if target is None:
        return
    if target == entity_id:
        db.execute(
            "INSERT INTO entities (agent_id, id, name, kind, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, id) DO UPDATE SET "
            "name = excluded.name, kind = excluded.kind, updated_at = excluded.updated_at "
            "WHERE excluded.updated_at > entities.updated_at",
            (
                agent_id,
                entity_id,
                str(data["name"]),
                str(data["kind"]),
                float(data["created_at"]),
                float(data["updated_at"]),
            ),
        )
    db.executemany(
        "INSERT OR IGNORE INTO entity_names (agent_id, key, entity_id, name) VALUES (?, ?, ?, ?)",
        [(agent_id, str(k), target, str(n)) for k, n in data["names"]],
    )
    for r in data["relations"]:
        _add_relation(db, _relation(db, agent_id, target, r))
    db.executemany(
        "INSERT OR IGNORE INTO mentions (agent_id, entity_id, kind, ref) VALUES (?, ?, ?, ?)",
        [(agent_id, target, str(k), str(ref)) for k, ref in data["mentions"]],
    )


def _relation(db: Database, agent_id: str, subject: str, r: Sequence[Any]) -> tuple[Any, ...]:
    """A relation's row parameters, its object where that entity lives now."""
    rid, predicate, obj, valid_from, valid_to, source, created_at = r
    where = _target(db, agent_id, str(obj)) or str(obj)
    text = (str(rid), subject, str(predicate), where)
    return (agent_id, *text, valid_from, valid_to, str(source), float(created_at))


def _add_relation(db: Database, params: tuple[Any, ...]) -> None:
    """A remote relation: a known one closes if the remote one is closed (earlier); a new one
    is added unless the same statement is open here already (both devices read the fact)."""
    agent_id, rid, subject, predicate, obj, _, valid_to = params[:7]
    if db.scalar("SELECT 1 FROM relations WHERE agent_id = ? AND id = ?", (agent_id, rid)):
        db.execute(
            "UPDATE relations SET valid_to = ? WHERE agent_id = ? AND id = ? AND ? IS NOT NULL "
            "AND (valid_to IS NULL OR valid_to > ?)",
            (valid_to, agent_id, rid, valid_to, valid_to),
        )
        return
    if valid_to is None and db.scalar(
        "SELECT 1 FROM relations WHERE agent_id = ? AND subject = ? AND predicate = ? "
        "AND object = ? AND valid_to IS NULL",
        (agent_id, subject, predicate, obj),
    ):
        return
    db.execute(
        "INSERT INTO relations (agent_id, id, subject, predicate, object, valid_from, valid_to, "
        "source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    )


def _apply_gone(db: Database, agent_id: str, entity_id: str, merged_into: str | None) -> None:
    """Merge (or delete) an entity as the device that merged it did, and remember it."""
    db.execute(
        "INSERT OR IGNORE INTO graph_gone (agent_id, id, merged_into) VALUES (?, ?, ?)",
        (agent_id, entity_id, merged_into),
    )
    target = _target(db, agent_id, entity_id)
    gone = (agent_id, entity_id)
    if target is None:
        db.execute("DELETE FROM entity_names WHERE agent_id = ? AND entity_id = ?", gone)
        db.execute(
            "DELETE FROM relations WHERE agent_id = ? AND (subject = ? OR object = ?)",
            (agent_id, entity_id, entity_id),
        )
    else:
        moved = (target, agent_id, entity_id)
        db.execute(
            "UPDATE entity_names SET entity_id = ? WHERE agent_id = ? AND entity_id = ?", moved
        )
        db.execute("UPDATE relations SET subject = ? WHERE agent_id = ? AND subject = ?", moved)
        db.execute("UPDATE relations SET object = ? WHERE agent_id = ? AND object = ?", moved)
        db.execute(
            "INSERT OR IGNORE INTO mentions (agent_id, entity_id, kind, ref) "
            "SELECT agent_id, ?, kind, ref FROM mentions WHERE agent_id = ? AND entity_id = ?",
            moved,
        )
    db.execute("DELETE FROM mentions WHERE agent_id = ? AND entity_id = ?", gone)
    db.execute("DELETE FROM entities WHERE agent_id = ? AND id = ?", gone)
