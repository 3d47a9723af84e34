"""The knowledge graph's rows: entities (one per thing, under every name and alias it goes by),
relations with their validity window, and the mentions linking entities to memories and
episodes. Everything is scoped to one agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tiermem.core.db import Database, Row
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.graph.extract import KINDS, OWNER
from tiermem.core.graph.names import keys, name_key

NEAR_SCAN_LIMIT = 5000
"""Entities of one kind compared by name similarity; a bigger graph matches names exactly."""
FLAG_MARK = "#"
"""A relation's flags ride at the end of its source ("memory:mem-1#tentative"), so that they
sync with it."""
_NEAR_KINDS = frozenset({"person", "project", "organisation", "place", "tool", "event"})
"""Kinds whose names may be misspelt ("Ledgerley"); a date or a role is matched exactly."""
EDGE_COLUMNS = "id, subject, predicate, object, valid_from, valid_to, source, created_at"


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
    flags: frozenset[str] = frozenset()
    created_at: float = 0.0

    @property
    def current(self) -> bool:
        return self.valid_to is None

    @property
    def firm(self) -> bool:
        """A fact, not a plan or the record of one ending."""
        return not self.flags & {"tentative", "negated"}

    @property
    def memory(self) -> str | None:
        """The memory id it was read from, if a memory."""
        return self.source[7:] if self.source.startswith("memory:") else None

    @classmethod
    def from_row(cls, r: Row) -> Edge:
        source, flags = split_source(str(r[6]))
        return cls(
            str(r[0]),
            str(r[1]),
            str(r[2]),
            str(r[3]),
            None if r[4] is None else float(r[4]),
            None if r[5] is None else float(r[5]),
            source,
            flags,
            float(r[7] or 0.0),
        )


def split_source(raw: str) -> tuple[str, frozenset[str]]:
    """(source, flags) of a stored source."""
    source, _, flags = raw.partition(FLAG_MARK)
    return source, frozenset(f for f in flags.split(",") if f)


def join_source(source: str, flags: frozenset[str] | set[str]) -> str:
    tail = FLAG_MARK + ",".join(sorted(flags)) if flags else ""
    return source[: 200 - len(tail)] + tail


class GraphStore:
    """One agent's graph in one database (the caller holds the transaction)."""

    def __init__(self, db: Database, agent_id: str, near: float = 0.9) -> None:
        self.db, self.agent, self.near = db, agent_id, near

    # -- entities -----------------------------------------------------------------------------

    def resolve(self, name: str, kind: str, now: float) -> str:
        """The id of the entity `name` means, created if new. A near-duplicate name of the same
        kind becomes an alias of the known entity; a first name the alias of the one person
        whose full name starts with it ("Maya" → "Maya Chen"), and a full name joins the one
        person known by its first name alone."""
        key = name_key(name)
        if not key:
            raise InvalidInput("an entity name needs letters or digits")
        found = self.lookup(name)
        known = found is not None
        if found is None and kind in ("person", "other"):
            found = self._first_name(key) or (
                self._full_name(key, name, now) if kind == "person" else None
            )
        if found is None and kind == "organisation":
            found = self._one_starting(key, "organisation")  # "Harrow": Harrow Analytics
        if found is None:
            found = self._near(key, kind)
        if found is None:
            import hashlib  # only naming new items hashes: reads skip loading OpenSSL

            found = "en-" + hashlib.sha256(f"{self.agent}\n{key}".encode()).hexdigest()[:10]
            self.db.execute(
                "INSERT OR IGNORE INTO entities (agent_id, id, name, kind, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (self.agent, found, name, kind, now, now),
            )
        if not known:
            self.add_name(found, name)
        if kind != "other":
            self.db.execute(
                "UPDATE entities SET kind = ?, updated_at = ? WHERE agent_id = ? AND id = ? "
                "AND kind = 'other'",
                (kind, now, self.agent, found),
            )
        return found

    def lookup(self, name: str) -> str | None:
        """The entity a name (or alias) already means, if any."""
        for key in keys(name):
            row = self.db.query_one(
                "SELECT entity_id FROM entity_names WHERE agent_id = ? AND key = ?",
                (self.agent, key),
            )
            if row:
                return str(row[0])
        return None

    def lookup_many(self, wanted: set[str]) -> dict[str, str]:
        """Name key → the entity it means, for the keys the graph knows (looked up at once)."""
        ordered = sorted(wanted)
        found: dict[str, str] = {}
        for start in range(0, len(ordered), 400):
            chunk = ordered[start : start + 400]
            rows = self.db.query(
                "SELECT key, entity_id FROM entity_names WHERE agent_id = ? "
                f"AND key IN ({','.join('?' * len(chunk))})",
                [self.agent, *chunk],
            )
            found.update({str(k): str(e) for k, e in rows})
        return found

    def add_name(self, entity_id: str, name: str) -> bool:
        """Give an entity another name; False when the name is taken (or has no letters)."""
        key = name_key(name)
        if not key or self.lookup(name) is not None:
            return False
        self.db.execute(
            "INSERT OR IGNORE INTO entity_names (agent_id, key, entity_id, name) VALUES (?, ?, ?, ?)",
            (self.agent, key, entity_id, name),
        )
        return True

    def _named_starting(self, first: str, kind: str = "person") -> set[str]:
        """Entities of `kind` (persons: not the owner) with a name of several words that starts
        with `first`."""
        rows = self.db.query(
            "SELECT DISTINCT n.entity_id FROM entity_names n JOIN entities e ON e.agent_id = "
            "n.agent_id AND e.id = n.entity_id WHERE n.agent_id = ? AND n.key >= ? AND n.key < ? "
            "AND e.kind = ? AND e.name != ?",
            (self.agent, first + " ", first + "!", kind, OWNER),
        )
        return {str(r[0]) for r in rows}

    def _one_starting(self, key: str, kind: str) -> str | None:
        """The one entity of `kind` a short name can mean: the only one whose name of several
        words starts with it."""
        if " " in key or len(key) < 2:
            return None
        found = self._named_starting(key, kind)
        return next(iter(found)) if len(found) == 1 else None

    def first_name(self, name: str) -> str | None:
        """The one person (not the user) whose full name starts with this first name."""
        return self._first_name(name_key(name))

    def _first_name(self, key: str) -> str | None:
        """The one person a first name can mean."""
        return self._one_starting(key, "person")

    def _full_name(self, key: str, name: str, now: float) -> str | None:
        """The person known by this full name's first word alone (and by no other full name),
        now named in full."""
        first = key.split(" ", 1)[0]
        if " " not in key:
            return None
        row = self.db.query_one(
            "SELECT e.id FROM entity_names n JOIN entities e ON e.agent_id = n.agent_id AND "
            "e.id = n.entity_id WHERE n.agent_id = ? AND n.key = ? AND e.kind = 'person' "
            "AND e.name != ?",
            (self.agent, first, OWNER),
        )
        if row is None or self._named_starting(first) - {str(row[0])}:
            return None
        entity_id = str(row[0])
        others = self.db.scalar(
            "SELECT count(*) FROM entity_names WHERE agent_id = ? AND entity_id = ? AND key >= ? "
            "AND key < ?",
            (self.agent, entity_id, first + " ", first + "!"),
        )
        if others:
            return None
        self.db.execute(
            "UPDATE entities SET name = ?, updated_at = ? WHERE agent_id = ? AND id = ?",
            (name, now, self.agent, entity_id),
        )
        return entity_id

    def _near(self, key: str, kind: str) -> str | None:
        if len(key) < 5 or kind not in _NEAR_KINDS or self.near >= 1.0:
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
            import difflib  # only adding an entity looks for a near name

            ratio = difflib.SequenceMatcher(None, key, other).ratio()
            if ratio >= best_ratio:
                best, best_ratio = str(entity_id), ratio
        return best

    def find(self, name: str) -> Entity:
        """An entity by one of its names or aliases, a first name only one person has, or by
        id."""
        entity_id = self.lookup(name) or self._first_name(name_key(name)) or name.strip()
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

    def edges(self, entity_id: str | None = None, limit: int = 500) -> list[Edge]:
        """Relations (of one entity, either side), newest first."""
        where, params = "agent_id = ?", [self.agent]
        if entity_id:
            where += " AND (subject = ? OR object = ?)"
            params += [entity_id, entity_id]
        return self.select(
            f"{where} ORDER BY coalesce(valid_from, created_at) DESC, id", params, limit
        )

    def select(self, where: str, params: list[Any], limit: int = 500) -> list[Edge]:
        """Relations matching a condition (a WHERE clause, and its ORDER BY)."""
        rows = self.db.query(
            f"SELECT {EDGE_COLUMNS} FROM relations WHERE {where} LIMIT ?", [*params, limit]
        )
        return [Edge.from_row(r) for r in rows]

    def edge(self, edge_id: str) -> Edge:
        found = self.select("agent_id = ? AND id = ?", [self.agent, edge_id.strip()], 1)
        if not found:
            raise NotFound(f"no relation {edge_id!r} (see `tiermem graph relations`)")
        return found[0]

    def slot(self, subject: str, predicate: str, by_object: bool = False) -> list[Edge]:
        """Every relation of one slot: a subject's (or, `by_object`, an object's) values of a
        predicate, oldest first."""
        side = "object" if by_object else "subject"
        return self.select(
            f"agent_id = ? AND {side} = ? AND predicate = ? ORDER BY coalesce(valid_from, "
            "created_at), created_at",
            [self.agent, subject, predicate],
        )

    def insert(self, edge: Edge) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO relations (agent_id, id, subject, predicate, object, "
            "valid_from, valid_to, source, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.agent,
                edge.id,
                edge.subject,
                edge.predicate,
                edge.object,
                edge.valid_from,
                edge.valid_to,
                join_source(edge.source, edge.flags),
                edge.created_at,
            ),
        )

    def end(self, edge: Edge, at: float, flags: frozenset[str] = frozenset()) -> None:
        """Close a relation at `at` (and add flags to it, "corrected")."""
        self.db.execute(
            "UPDATE relations SET valid_to = ?, source = ? WHERE agent_id = ? AND id = ?",
            (at, join_source(edge.source, edge.flags | flags), self.agent, edge.id),
        )

    def has(self, edge_id: str) -> bool:
        return bool(
            self.db.scalar(
                "SELECT 1 FROM relations WHERE agent_id = ? AND id = ?", (self.agent, edge_id)
            )
        )

    def edge_id(
        self, subject: str, predicate: str, obj: str, begins: float | None, tag: str
    ) -> str:
        """A relation's id: the same statement read twice is one row."""
        text = f"{self.agent}\n{subject}\n{predicate}\n{obj}\n{begins}" + (
            f"\n{tag}" if tag else ""
        )
        import hashlib  # only naming new items hashes: reads skip loading OpenSSL

        return "re-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    def adopt_kind(self, entity_id: str, like: str) -> None:
        """An entity of no known kind takes another's ("Leeds" correcting the place "Lees")."""
        self.db.execute(
            "UPDATE entities SET kind = (SELECT kind FROM entities WHERE agent_id = ?1 AND id = ?3)"
            " WHERE agent_id = ?1 AND id = ?2 AND kind = 'other'",
            (self.agent, entity_id, like),
        )

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
