"""The agents of a home: which exist, and renaming or deleting one with all its rows.

Every table with an `agent_id` column holds agent-scoped rows; they are found from the schema,
so a table added by a later migration is renamed and deleted with the rest. Memory ids are
derived from the agent id (`warm.memory_id`), so a rename gives every memory its new id
everywhere it is referenced, in the same transaction. An agent with sync set up is refused:
its vault on the server is named by the agent id, and its other devices still use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tiermem.core import spaces
from tiermem.core.db import Database
from tiermem.core.errors import AgentExists, AgentSynced, NotFound
from tiermem.core.paths import Home, suggestion, validate_agent_id
from tiermem.core.warm import memory_id, seq_range

_ID_COLUMNS = ("id", "memory_id")
_JSON_COLUMNS = ("data",)


@dataclass(frozen=True)
class AgentInfo:
    """One agent as `agents list` shows it."""

    agent_id: str
    memories: int
    last_activity: float | None
    synced: bool


def _columns(db: Database, table: str) -> list[str]:
    return [str(r[1]) for r in db.query(f'PRAGMA table_info("{table}")')]


def _tables(db: Database) -> dict[str, list[str]]:
    """Every ordinary table → its columns (FTS and other virtual tables excluded)."""
    names = db.query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
    )
    return {str(n[0]): _columns(db, str(n[0])) for n in names}


def agent_tables(db: Database) -> list[str]:
    """Tables holding agent-scoped rows, `memories` first and the `*_dirty` marks last (the
    triggers of the others write to them)."""
    found = [t for t, cols in _tables(db).items() if "agent_id" in cols]
    return sorted(found, key=lambda t: (t != "memories", t.endswith("_dirty"), t))


def _seq_tables(db: Database) -> list[str]:
    """Tables keyed by a memory's `seq` without an agent column (e.g. `memory_vectors`)."""
    return [t for t, c in _tables(db).items() if "seq" in c and "agent_id" not in c]


def known_agents(db: Database) -> list[str]:
    """Every agent with a row anywhere in the home, sorted."""
    tables = agent_tables(db)
    if not tables:
        return []
    union = " UNION ".join(f'SELECT agent_id FROM "{t}"' for t in tables)
    return [str(r[0]) for r in db.query(f"SELECT agent_id FROM ({union}) ORDER BY agent_id")]


def agent_exists(db: Database, agent_id: str) -> bool:
    if db.scalar("SELECT 1 FROM agents WHERE agent_id = ?", (agent_id,)) is not None:
        return True
    return agent_id in known_agents(db)


def require_agent(db: Database, agent_id: str, home: Path) -> None:
    """A read names an agent that exists, or fails with the closest name."""
    if agent_exists(db, agent_id):
        return
    agents = known_agents(db)
    listed = ", ".join(agents[:10]) if agents else "none yet"
    raise NotFound(
        f"no agent {agent_id!r} in {home.absolute()}{suggestion(agent_id, agents)}; agents: {listed} "
        "(a write such as `tiermem store` creates an agent)"
    )


def only_registered(db: Database, agent_id: str) -> bool:
    """The agent has its registration and no other row (nothing was ever stored for it)."""
    return not any(
        db.scalar(f'SELECT 1 FROM "{t}" WHERE agent_id = ? LIMIT 1', (agent_id,)) is not None
        for t in agent_tables(db)
        if t != "agents"
    )


def is_synced(db: Database, agent_id: str) -> bool:
    return db.scalar("SELECT 1 FROM sync_state WHERE agent_id = ?", (agent_id,)) is not None


def list_agents(db: Database) -> list[AgentInfo]:
    out = []
    for agent in known_agents(db):
        if spaces.is_scope(agent):  # a shared space, listed by `tiermem spaces list`
            continue
        count, last = db.query_one(
            "SELECT count(*), max(max(created_at), max(COALESCE(last_access, 0))) "
            "FROM memories WHERE agent_id = ?",
            (agent,),
        ) or (0, None)
        out.append(AgentInfo(agent, int(count), last or None, is_synced(db, agent)))
    return out


def check_unsynced(db: Database, agent_id: str, action: str) -> None:
    """The agent exists and has no sync set up (else rename and delete are refused)."""
    if not agent_exists(db, agent_id):
        require_agent(db, agent_id, db.path.parent)
    if is_synced(db, agent_id):
        raise AgentSynced(
            f"agent {agent_id!r} has sync set up: its vault on the server and its other devices "
            f"use this name, so it cannot be {action} here"
        )


def rename_agent(db: Database, old: str, new: str) -> int:
    """Move every row of `old` to `new` in one transaction; returns the memories moved."""
    validate_agent_id(new)
    check_unsynced(db, old, "renamed")
    if agent_exists(db, new):
        raise AgentExists(f"agent {new!r} already exists: delete or rename it first")
    with db.transaction():
        rows = db.query("SELECT id, text FROM memories WHERE agent_id = ?", (old,))
        ids = {str(i): memory_id(new, str(t)) for i, t in rows}
        for table in agent_tables(db):
            _rename_rows(db, table, old, new, ids)
        _remap_seq_tables(db, new, ids)
    return len(ids)


def _rename_rows(db: Database, table: str, old: str, new: str, ids: dict[str, str]) -> None:
    columns = _columns(db, table)
    db.execute(f'UPDATE OR REPLACE "{table}" SET agent_id = ? WHERE agent_id = ?', (new, old))
    for column in (c for c in _ID_COLUMNS if c in columns):
        db.executemany(
            f'UPDATE OR REPLACE "{table}" SET "{column}" = ? WHERE agent_id = ? AND "{column}" = ?',
            [(after, new, before) for before, after in ids.items()],
        )
    for column in (c for c in _JSON_COLUMNS if c in columns):
        for key, value in db.query(
            f'SELECT rowid, "{column}" FROM "{table}" WHERE agent_id = ?', (new,)
        ):
            text = _replace_ids(str(value), ids)
            if text != value:
                db.execute(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?', (text, key))


def _replace_ids(text: str, ids: dict[str, str]) -> str:
    """Memory ids inside a JSON document (hot lessons' sources, forgotten records)."""
    for before, after in ids.items():
        if before in text:
            text = text.replace(json.dumps(before), json.dumps(after))
    return text


def _agent_seqs(db: Database, agent_id: str) -> tuple[int, int] | None:
    slot = db.scalar("SELECT slot FROM agents WHERE agent_id = ?", (agent_id,))
    return None if slot is None else seq_range(int(slot))


def _remap_seq_tables(db: Database, agent_id: str, ids: dict[str, str]) -> None:
    bounds = _agent_seqs(db, agent_id)
    for table in _seq_tables(db):
        if "id" in _columns(db, table) and bounds is not None:
            db.executemany(
                f'UPDATE "{table}" SET id = ? WHERE id = ? AND seq BETWEEN '
                "CAST(? AS INTEGER) AND CAST(? AS INTEGER)",
                [(after, before, str(bounds[0]), str(bounds[1])) for before, after in ids.items()],
            )


def delete_agent(db: Database, agent_id: str) -> int:
    """Delete every row of the agent in one transaction; returns the memories deleted."""
    check_unsynced(db, agent_id, "deleted")
    with db.transaction():
        count = int(db.scalar("SELECT count(*) FROM memories WHERE agent_id = ?", (agent_id,)))
        bounds = _agent_seqs(db, agent_id)
        for table in _seq_tables(db):
            if bounds is not None:
                db.execute(
                    f'DELETE FROM "{table}" WHERE seq BETWEEN CAST(? AS INTEGER) AND '
                    "CAST(? AS INTEGER)",
                    (str(bounds[0]), str(bounds[1])),
                )
        for table in agent_tables(db):
            db.execute(f'DELETE FROM "{table}" WHERE agent_id = ?', (agent_id,))
    return count


def move_memory_md(home: Home, old: str, new: str | None) -> None:
    """The agent's MEMORY.md mirror follows a rename (or goes with a delete)."""
    source = home.memory_md(old)
    if not source.exists():
        return
    if new is None:
        source.unlink()
    else:
        source.replace(home.memory_md(new))
