"""Critical state: what must survive the loss of a device (hot state + tree index).

`dump` gives a canonical document (sorted keys, no whitespace) so two homes hold the same
critical state exactly when their dumps are equal; `load` writes one back in one transaction.
Changes to critical state are recorded in the durable outbox (table `outbox`), which the sync
engine drains: a row means "push the current critical state", so rows coalesce.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

from tiermem.core import hot as hotmod
from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

FORMAT = 1
CRITICAL = "critical"


def enqueue(db: Database, agent_id: str, reason: str, now: float) -> None:
    """Record that critical state changed (inside the caller's transaction)."""
    db.execute(
        "INSERT INTO outbox (agent_id, kind, reason, created_at) VALUES (?, ?, ?, ?)",
        (agent_id, CRITICAL, reason, now),
    )


def pending(db: Database, agent_id: str) -> list[tuple[int, str, str, float]]:
    """Outbox rows not yet pushed: (seq, kind, reason, created_at), oldest first."""
    rows = db.query(
        "SELECT seq, kind, reason, created_at FROM outbox WHERE agent_id = ? ORDER BY seq",
        (agent_id,),
    )
    return [(int(r[0]), r[1], r[2], float(r[3])) for r in rows]


def acknowledge(db: Database, agent_id: str, up_to_seq: int) -> None:
    """Drop the rows a successful push covered (rows added meanwhile stay)."""
    db.execute("DELETE FROM outbox WHERE agent_id = ? AND seq <= ?", (agent_id, up_to_seq))


def dump(mem: Memory) -> dict[str, Any]:
    """The agent's critical state as plain data."""
    tree = mem.trees.load()
    return {
        "format": FORMAT,
        "agent_id": mem.agent_id,
        "hot": msgspec.to_builtins(mem.hot()),
        "tree": [
            {
                "path": n.path,
                "description": n.description,
                "created_at": n.created_at,
                "last_activity": n.last_activity,
            }
            for _, n in sorted(tree.nodes.items())
        ],
    }


def canonical(state: dict[str, Any]) -> bytes:
    return json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def load(mem: Memory, state: dict[str, Any]) -> None:
    """Replace the agent's hot state and tree with `state` (validated first, one transaction),
    then regenerate MEMORY.md. Does not enqueue: restoring is not a local change."""
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise InvalidInput("unsupported critical-state format")
    try:
        hot = msgspec.convert(state["hot"], hotmod.HotState)
        nodes = [
            (
                str(n["path"]),
                str(n["description"]),
                float(n["created_at"]),
                float(n["last_activity"]),
            )
            for n in state["tree"]
        ]
    except (KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"malformed critical state ({exc})") from None
    with mem.db.transaction():
        mem.db.execute(
            "INSERT INTO hot_state (agent_id, data, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (agent_id) DO UPDATE SET data = excluded.data, "
            "updated_at = excluded.updated_at",
            (mem.agent_id, hotmod.encode(hot).decode(), hot.updated_at),
        )
        mem.db.execute("DELETE FROM tree_nodes WHERE agent_id = ?", (mem.agent_id,))
        mem.db.executemany(
            "INSERT INTO tree_nodes (agent_id, path, description, created_at, last_activity) "
            "VALUES (?, ?, ?, ?, ?)",
            [(mem.agent_id, *node) for node in nodes],
        )
        problems = mem.trees.load().check()
        if problems:
            raise InvalidInput(f"restored tree breaks its limits: {problems[0]}")
    mem.write_memory_md()
