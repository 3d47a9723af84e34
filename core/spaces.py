"""Shared memory spaces, the local half: names, which agents include which space with what
role, and which member wrote each memory of a space.

A space's memories live in the home's database under their own scope, the reserved agent id
`space:NAME` (a colon no agent id may hold), so tiers, tree, graph, episodes, supersession and
export work on a space as on an agent, and sync can carry a space as a vault of its own. An
agent's search covers its own scope and the scopes of the spaces it includes
(`core/retrieve.py`); a write goes to a space only when named and only for a writer
(`core/remember.py`). docs/spaces.md is the user's page.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput, NotFound, ReadOnlySpace, SpaceConflict
from tiermem.core.paths import suggestion
from tiermem.core.rows import MemoryRow
from tiermem.core.warm import COLUMNS

Role = Literal["writer", "reader"]
ROLES: Final[tuple[Role, ...]] = ("writer", "reader")
PREFIX: Final = "space:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,47}$")


@dataclass(frozen=True)
class Membership:
    """A space an agent includes, and the agent's role in it."""

    space: str
    role: Role

    @property
    def scope(self) -> str:
        return PREFIX + self.space


@dataclass(frozen=True)
class SpaceInfo:
    """One space as `spaces list` and `spaces show` show it."""

    name: str
    created_at: float
    created_by: str
    memories: int
    members: dict[str, Role]
    """agent id → role, for every agent of this home that includes the space."""
    role: Role | None
    """The asking agent's role (None: it does not include the space)."""


@dataclass(frozen=True)
class Written:
    """A memory of a space with the member who wrote it."""

    memory: MemoryRow | None
    """The memory (None when `spaces undo` archived it)."""
    memory_id: str
    writer: str
    device: str
    written_at: float
    undone_at: float | None


def check_name(name: str) -> str:
    """A space name: 1-48 letters, digits, '.', '_' or '-', starting with a letter or digit."""
    if not _NAME.match(name):
        raise InvalidInput(
            f"invalid space name {name!r}: use 1-48 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def scope(name: str) -> str:
    """The agent id a space's rows are stored under."""
    return PREFIX + check_name(name)


def is_scope(agent_id: str) -> bool:
    return agent_id.startswith(PREFIX)


def space_of(agent_id: str) -> str | None:
    """The space a scope belongs to (None: an agent's own)."""
    return agent_id[len(PREFIX) :] if is_scope(agent_id) else None


def check_role(role: str) -> Role:
    for known in ROLES:
        if role == known:
            return known
    raise InvalidInput(f"unknown role {role!r}: use {' or '.join(ROLES)}")


def names(db: Database) -> list[str]:
    return [str(r[0]) for r in db.query("SELECT name FROM spaces ORDER BY name")]


def require(db: Database, name: str) -> str:
    """`name` is a space of this home, or a one-line error naming the closest one."""
    check_name(name)
    if db.scalar("SELECT 1 FROM spaces WHERE name = ?", (name,)) is None:
        known = names(db)
        listed = ", ".join(known[:10]) if known else "none yet (tiermem spaces create NAME)"
        raise NotFound(f"no space {name!r}{suggestion(name, known)}; spaces: {listed}")
    return name


def create(db: Database, name: str, agent_id: str, now: float) -> None:
    """A new space, included by the agent that creates it as a writer. The caller registers
    its scope (opening it once) so its memories get their row-id range."""
    check_name(name)
    with db.transaction():
        if db.scalar("SELECT 1 FROM spaces WHERE name = ?", (name,)) is not None:
            raise SpaceConflict(f"space {name!r} exists already")
        db.execute(
            "INSERT INTO spaces (name, created_at, created_by) VALUES (?, ?, ?)",
            (name, now, agent_id),
        )
        _add_member(db, agent_id, name, "writer", now)


def include(db: Database, agent_id: str, name: str, role: Role, now: float) -> None:
    """The agent's searches cover the space from now on; a writer may also store into it."""
    with db.transaction():
        require(db, name)
        if membership(db, agent_id, name) is not None:
            raise SpaceConflict(f"agent {agent_id!r} includes space {name!r} already")
        _add_member(db, agent_id, name, role, now)


def _add_member(db: Database, agent_id: str, name: str, role: Role, now: float) -> None:
    db.execute(
        "INSERT INTO space_members (agent_id, space, role, included_at) VALUES (?, ?, ?, ?)",
        (agent_id, name, role, now),
    )


def adopt(db: Database, name: str, agent_id: str, role: Role, now: float) -> None:
    """A space this home joined (sync): it exists here and the agent includes it with `role`
    (the role the space's signed roster gives this device)."""
    check_name(name)
    with db.transaction():
        db.execute(
            "INSERT INTO spaces (name, created_at, created_by) VALUES (?, ?, ?) "
            "ON CONFLICT (name) DO NOTHING",
            (name, now, agent_id),
        )
        db.execute(
            "INSERT INTO space_members (agent_id, space, role, included_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent_id, space) DO UPDATE SET role = excluded.role",
            (agent_id, name, role, now),
        )


def limit_to_reading(db: Database, name: str) -> None:
    """Every agent of this home reads the space only (this device is a reader of it)."""
    db.execute(
        "UPDATE space_members SET role = 'reader' WHERE space = ? AND role != 'reader'", (name,)
    )


def exclude(db: Database, agent_id: str, name: str) -> None:
    """The agent stops searching (and writing to) the space; the space and its memories stay."""
    with db.transaction():
        require(db, name)
        if membership(db, agent_id, name) is None:
            raise NotFound(f"agent {agent_id!r} does not include space {name!r}")
        db.execute("DELETE FROM space_members WHERE agent_id = ? AND space = ?", (agent_id, name))


def membership(db: Database, agent_id: str, name: str) -> Membership | None:
    role = db.scalar(
        "SELECT role FROM space_members WHERE agent_id = ? AND space = ?", (agent_id, name)
    )
    return None if role is None else Membership(name, check_role(str(role)))


def included(db: Database, agent_id: str) -> list[Membership]:
    """The spaces the agent includes, by name (one primary-key range read)."""
    rows = db.query(
        "SELECT space, role FROM space_members WHERE agent_id = ? ORDER BY space", (agent_id,)
    )
    return [Membership(str(s), check_role(str(r))) for s, r in rows]


def require_writer(db: Database, agent_id: str, name: str) -> Membership:
    """The agent's membership of a space it may write to, or why it may not."""
    require(db, name)
    member = membership(db, agent_id, name)
    if member is None:
        raise NotFound(
            f"agent {agent_id!r} does not include space {name!r} (tiermem spaces include {name})"
        )
    if member.role != "writer":
        raise ReadOnlySpace(f"space {name!r} is read-only for agent {agent_id!r} (a reader)")
    return member


def info(db: Database, name: str, agent_id: str) -> SpaceInfo:
    require(db, name)
    created_at, created_by = db.query_one(
        "SELECT created_at, created_by FROM spaces WHERE name = ?", (name,)
    ) or (0.0, "")
    members = {
        str(a): check_role(str(r))
        for a, r in db.query(
            "SELECT agent_id, role FROM space_members WHERE space = ? ORDER BY agent_id", (name,)
        )
    }
    count = db.scalar("SELECT COUNT(*) FROM memories WHERE agent_id = ?", (PREFIX + name,))
    return SpaceInfo(
        name=name,
        created_at=float(created_at),
        created_by=str(created_by),
        memories=int(count or 0),
        members=members,
        role=members.get(agent_id),
    )


def listing(db: Database, agent_id: str) -> list[SpaceInfo]:
    return [info(db, name, agent_id) for name in names(db)]


# -- who wrote what -----------------------------------------------------------------------------


def record_writer(db: Database, space_scope: str, memory_id: str, writer: str, now: float) -> None:
    """Say which member wrote a new memory of a space (inside the caller's transaction; device
    '' is this one, as for read counters, until sync names it). A memory stored again by
    another member keeps its first writer."""
    db.execute(
        "INSERT INTO space_writers (agent_id, id, writer, device, written_at) "
        "VALUES (?, ?, ?, '', ?) ON CONFLICT (agent_id, id) DO NOTHING",
        (space_scope, memory_id, writer, now),
    )


def writers_of(db: Database, space_scope: str, ids: Sequence[str]) -> dict[str, str]:
    """memory id → the member who wrote it, for these memories of a space."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = db.query(
        f"SELECT id, writer FROM space_writers WHERE agent_id = ? AND id IN ({marks})",
        (space_scope, *ids),
    )
    return {str(i): str(w) for i, w in rows}


def written(
    db: Database,
    name: str,
    *,
    by: str | None = None,
    since: float | None = None,
    undone: bool | None = None,
) -> list[Written]:
    """The space's memories with their writers, newest first: only `by`'s, only those written
    at or after `since`; `undone` True/False: only those `spaces undo` archived / did not."""
    sql = (
        f"SELECT w.id, w.writer, w.device, w.written_at, w.undone_at, {_m_columns()} "
        "FROM space_writers w LEFT JOIN memories m ON m.agent_id = w.agent_id AND m.id = w.id "
        "WHERE w.agent_id = ?"
    )
    params: list[object] = [PREFIX + name]
    if by is not None:
        sql += " AND w.writer = ?"
        params.append(by)
    if since is not None:
        sql += " AND w.written_at >= ?"
        params.append(since)
    if undone is not None:
        sql += " AND w.undone_at IS NOT NULL" if undone else " AND w.undone_at IS NULL"
    rows = db.query(sql + " ORDER BY w.written_at DESC, w.id", params)
    return [
        Written(
            memory=None if r[5] is None else MemoryRow.read(r[5:]),
            memory_id=str(r[0]),
            writer=str(r[1]),
            device=str(r[2]),
            written_at=float(r[3]),
            undone_at=None if r[4] is None else float(r[4]),
        )
        for r in rows
    ]


def _m_columns() -> str:
    return ", ".join("m." + c.strip() for c in COLUMNS.split(","))


def mark_undone(db: Database, space_scope: str, memory_id: str, when: float | None) -> None:
    """Record that `spaces undo` archived the memory (`when`), or that it is back (None)."""
    db.execute(
        "UPDATE space_writers SET undone_at = ? WHERE agent_id = ? AND id = ?",
        (when, space_scope, memory_id),
    )
