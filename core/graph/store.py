"""The knowledge graph's rows: entities (one per thing, under every name and alias it goes by),
relations with their validity window, and the mentions linking entities to memories and
episodes. Everything is scoped to one agent."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.graph.extract import EXCLUSIVE, KINDS, Relation
from tiermem.core.lazy import lazy_import

if TYPE_CHECKING:
    import difflib
    import hashlib
else:  # only adding an entity looks for a near name: a search that reads the graph skips it
    difflib = lazy_import("difflib")
    hashlib = lazy_import("hashlib")  # only naming new items hashes: reads skip loading OpenSSL

NEAR_SCAN_LIMIT = 5000
"""Entities of one kind compared by name similarity; a bigger graph matches names exactly."""
_PUNCT = re.compile(r"[^\w\s:/.@+-]")


@dataclass(frozen=True)
class Entity:
    """A person, project, place, tool or other thing the graph knows by name."""

    id: str
    name: str
    kind: str
    names: tuple[str, ...] = ()
    mentions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "aliases": [n for n in self.names if n != self.name],
            "mentions": self.mentions,
        }


@dataclass(frozen=True)
class Edge:
    """A stored relation between two entities, with its validity window."""

    id: str
    subject: str
    predicate: str
    object: str
    valid_from: float | None
    valid_to: float | None
    source: str

    @property
    def current(self) -> bool:
        return self.valid_to is None


def name_key(name: str) -> str:
    """How names compare: case, punctuation, spacing and a leading "the" do not count."""
    key = " ".join(_PUNCT.sub(" ", name.casefold()).split())
    if key.startswith(("http://", "https://")):
        key = key.split("://", 1)[1].rstrip("/")
    return key[4:] if key.startswith("the ") else key


class GraphStore:
    """One agent's graph in one database (the caller holds the transaction)."""

    def __init__(self, db: Database, agent_id: str, near: float = 0.9) -> None:
        self.db, self.agent, self.near = db, agent_id, near

    # -- entities -----------------------------------------------------------------------------

    def resolve(self, name: str, kind: str, now: float) -> str:
        """The id of the entity `name` means, created if new; a near-duplicate name of the same
        kind becomes an alias of the known entity."""
        key = name_key(name)
        if not key:
            raise InvalidInput("an entity name needs letters or digits")
        row = self.db.query_one(
            "SELECT entity_id FROM entity_names WHERE agent_id = ? AND key = ?", (self.agent, key)
        )
        found = str(row[0]) if row else self._near(key, kind)
        if found is None:
            found = "en-" + hashlib.sha256(f"{self.agent}\n{key}".encode()).hexdigest()[:10]
            self.db.execute(
                "INSERT OR IGNORE INTO entities (agent_id, id, name, kind, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (self.agent, found, name, kind, now, now),
            )
        if not row:
            self.db.execute(
                "INSERT OR IGNORE INTO entity_names (agent_id, key, entity_id, name) "
                "VALUES (?, ?, ?, ?)",
                (self.agent, key, found, name),
            )
        if kind != "other":
            self.db.execute(
                "UPDATE entities SET kind = ?, updated_at = ? WHERE agent_id = ? AND id = ? "
                "AND kind = 'other'",
                (kind, now, self.agent, found),
            )
        return found

    def _near(self, key: str, kind: str) -> str | None:
        if len(key) < 5 or kind in ("url", "other") or self.near >= 1.0:
            return None
        rows = self.db.query(
            "SELECT n.key, n.entity_id FROM entity_names n JOIN entities e "
            "ON e.agent_id = n.agent_id AND e.id = n.entity_id "
            "WHERE n.agent_id = ? AND e.kind = ? LIMIT ?",
            (self.agent, kind, NEAR_SCAN_LIMIT),
        )
        best, best_ratio = None, self.near
        for other, entity_id in rows:
            other = str(other)
            if abs(len(other) - len(key)) > 3 or len(other) < 5:
                continue
            ratio = difflib.SequenceMatcher(None, key, other).ratio()
            if ratio >= best_ratio:
                best, best_ratio = str(entity_id), ratio
        return best

    def find(self, name: str) -> Entity:
        """An entity by one of its names or aliases, or by id."""
        key = name_key(name)
        row = self.db.query_one(
            "SELECT entity_id FROM entity_names WHERE agent_id = ? AND key = ?", (self.agent, key)
        )
        entity_id = str(row[0]) if row else name.strip()
        found = self.entities(ids=[entity_id])
        if not found:
            raise NotFound(f"no entity {name!r} (see `tiermem graph entities`)")
        return found[0]

    def entities(
        self,
        *,
        ids: list[str] | None = None,
        kind: str | None = None,
        query: str = "",
        limit: int = 200,
    ) -> list[Entity]:
        """Entities with their names and mention counts, most mentioned first."""
        if kind is not None and kind not in KINDS:
            raise InvalidInput(f"unknown entity kind {kind!r}: use {', '.join(KINDS)}")
        where, params = "e.agent_id = ?", [self.agent]
        if ids is not None:
            where += f" AND e.id IN ({','.join('?' * len(ids))})"
            params += ids
        if kind:
            where += " AND e.kind = ?"
            params.append(kind)
        if query.strip():
            where += (
                " AND EXISTS (SELECT 1 FROM entity_names n WHERE n.agent_id = e.agent_id AND "
                "n.entity_id = e.id AND instr(n.key, ?) > 0)"
            )
            params.append(name_key(query))
        rows = self.db.query(
            "SELECT e.id, e.name, e.kind, (SELECT group_concat(n.name, char(10)) FROM "
            "entity_names n WHERE n.agent_id = e.agent_id AND n.entity_id = e.id), "
            "(SELECT count(*) FROM mentions m WHERE m.agent_id = e.agent_id AND m.entity_id = e.id) "
            f"AS c FROM entities e WHERE {where} ORDER BY c DESC, e.name LIMIT ?",
            [*params, limit],
        )
        return [
            Entity(str(r[0]), str(r[1]), str(r[2]), tuple(str(r[3] or "").split("\n")), int(r[4]))
            for r in rows
        ]

    def count(self) -> tuple[int, int]:
        """(entities, relations)."""
        return (
            int(self.db.scalar("SELECT count(*) FROM entities WHERE agent_id = ?", (self.agent,))),
            int(self.db.scalar("SELECT count(*) FROM relations WHERE agent_id = ?", (self.agent,))),
        )

    # -- relations ----------------------------------------------------------------------------

    def relate(self, r: Relation, subject: str, obj: str, source: str, now: float) -> bool:
        """Record a relation; False when the graph already says it. An exclusive predicate
        (lives_in, works_at) closes the subject's open relation to another object where the new
        one begins, so the history stays ("in Lisbon until 2026-03, then Porto")."""
        begins = r.valid_from
        if begins is None and r.valid_to is None:
            begins = now  # a relation stated without dates holds from when it was learnt
        same = self.db.query_one(
            "SELECT 1 FROM relations WHERE agent_id = ? AND subject = ? AND predicate = ? "
            "AND object = ? AND valid_to IS NULL",
            (self.agent, subject, r.predicate, obj),
        )
        if same and r.valid_to is None:
            return False
        ends = r.valid_to
        if r.predicate in EXCLUSIVE and begins is not None:
            ends = self._close_others(subject, r.predicate, obj, begins, ends)
        rid = (
            "re-"
            + hashlib.sha256(
                f"{self.agent}\n{subject}\n{r.predicate}\n{obj}\n{begins}".encode()
            ).hexdigest()[:12]
        )
        self.db.execute(
            "INSERT OR IGNORE INTO relations (agent_id, id, subject, predicate, object, "
            "valid_from, valid_to, source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (self.agent, rid, subject, r.predicate, obj, begins, ends, source[:200], now),
        )
        return True

    def _close_others(
        self, subject: str, predicate: str, obj: str, begins: float, ends: float | None
    ) -> float | None:
        """Close the older open relations; a newer one that is already known ends this one."""
        rows = self.db.query(
            "SELECT id, valid_from FROM relations WHERE agent_id = ? AND subject = ? AND "
            "predicate = ? AND object != ? AND valid_to IS NULL",
            (self.agent, subject, predicate, obj),
        )
        for rid, start in rows:
            if start is not None and float(start) > begins:
                ends = float(start) if ends is None else min(ends, float(start))
            else:
                self.db.execute(
                    "UPDATE relations SET valid_to = ? WHERE agent_id = ? AND id = ?",
                    (begins, self.agent, rid),
                )
        return ends

    def edges(self, entity_id: str | None = None, limit: int = 500) -> list[Edge]:
        """Relations (of one entity, either side), newest first."""
        where, params = "agent_id = ?", [self.agent]
        if entity_id:
            where += " AND (subject = ? OR object = ?)"
            params += [entity_id, entity_id]
        rows = self.db.query(
            "SELECT id, subject, predicate, object, valid_from, valid_to, source FROM relations "
            f"WHERE {where} ORDER BY coalesce(valid_from, created_at) DESC, id LIMIT ?",
            [*params, limit],
        )
        return [
            Edge(
                str(r[0]),
                str(r[1]),
                str(r[2]),
                str(r[3]),
                None if r[4] is None else float(r[4]),
                None if r[5] is None else float(r[5]),
                str(r[6]),
            )
            for r in rows
        ]

    def names(self, ids: set[str]) -> dict[str, str]:
        if not ids:
            return {}
        rows = self.db.query(
            f"SELECT id, name FROM entities WHERE agent_id = ? AND id IN ({','.join('?' * len(ids))})",
            [self.agent, *ids],
        )
        return {str(r[0]): str(r[1]) for r in rows}

    # -- mentions -----------------------------------------------------------------------------

    def mention(self, entity_ids: set[str], kind: str, ref: str) -> None:
        self.db.executemany(
            "INSERT OR IGNORE INTO mentions (agent_id, entity_id, kind, ref) VALUES (?, ?, ?, ?)",
            [(self.agent, e, kind, ref) for e in sorted(entity_ids)],
        )

    def mentioned_in(self, entity_id: str, kind: str, limit: int = 50) -> list[str]:
        rows = self.db.query(
            "SELECT ref FROM mentions WHERE agent_id = ? AND entity_id = ? AND kind = ? "
            "ORDER BY rowid DESC LIMIT ?",
            (self.agent, entity_id, kind, limit),
        )
        return [str(r[0]) for r in rows]

    # -- merging ------------------------------------------------------------------------------

    def merge(self, keep: str, gone: str, now: float) -> Entity:
        """Entity `gone` becomes part of `keep`: its names turn aliases, its relations and
        mentions move over."""
        a, b = self.find(keep), self.find(gone)
        if a.id == b.id:
            raise InvalidInput(f"{keep!r} and {gone!r} are already one entity")
        db, agent = self.db, self.agent
        db.execute(
            "UPDATE entity_names SET entity_id = ? WHERE agent_id = ? AND entity_id = ?",
            (a.id, agent, b.id),
        )
        for side in ("subject", "object"):
            db.execute(
                f"UPDATE relations SET {side} = ? WHERE agent_id = ? AND {side} = ?",
                (a.id, agent, b.id),
            )
        db.execute(
            "INSERT OR IGNORE INTO mentions (agent_id, entity_id, kind, ref) "
            "SELECT agent_id, ?, kind, ref FROM mentions WHERE agent_id = ? AND entity_id = ?",
            (a.id, agent, b.id),
        )
        db.execute("DELETE FROM mentions WHERE agent_id = ? AND entity_id = ?", (agent, b.id))
        db.execute("DELETE FROM entities WHERE agent_id = ? AND id = ?", (agent, b.id))
        db.execute(  # so that no device's older copy brings it back (sync/graphsync.py)
            "INSERT OR REPLACE INTO graph_gone (agent_id, id, merged_into) VALUES (?, ?, ?)",
            (agent, b.id, a.id),
        )
        if a.kind == "other" and b.kind != "other":
            db.execute(
                "UPDATE entities SET kind = ? WHERE agent_id = ? AND id = ?", (b.kind, agent, a.id)
            )
        db.execute(
            "UPDATE entities SET updated_at = ? WHERE agent_id = ? AND id = ?", (now, agent, a.id)
        )
        return self.find(a.id)
