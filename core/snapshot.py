"""Critical state: what must survive the loss of a device (hot state + tree index).

`dump` gives a canonical document (sorted keys, no whitespace) so two homes hold the same
critical state exactly when their dumps are equal; `load` writes one back in one transaction.
Changes to critical state are recorded in the durable outbox (`core.outbox`), which the sync
engine drains.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypeVar, cast

import msgspec

from tiermem.core import clocks
from tiermem.core import conflicts as conflictmod
from tiermem.core import hot as hotmod
from tiermem.core.errors import InvalidInput
from tiermem.core.outbox import CRITICAL as CRITICAL  # the outbox's public names, kept here too
from tiermem.core.outbox import acknowledge as acknowledge
from tiermem.core.outbox import enqueue as enqueue
from tiermem.core.outbox import pending as pending

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

FORMAT = 1
DOCUMENT_FORMAT = 2
"""`document`: the critical state with its per-field clocks, seen vector and conflicts."""


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


def canonical_hot(hot: hotmod.HotState) -> dict[str, Any]:
    """The hot state as plain data in a canonical order (items unique by id; lessons as the
    limits rank them, events and tasks oldest first, projects by last update), so that equal
    states give equal documents whatever order they were built in."""
    ctx = hot.active_context
    state = hotmod.HotState(
        identity=dict(hot.identity),
        owner_profile=dict(hot.owner_profile),
        active_context=hotmod.ActiveContext(
            projects=sorted(_unique(ctx.projects), key=lambda p: (p.updated_at, p.id)),
            events=sorted(_unique(ctx.events), key=lambda e: (e.timestamp, e.id)),
            tasks=sorted(_unique(ctx.tasks), key=lambda t: (t.timestamp, t.id)),
        ),
        critical_lessons=sorted(
            _unique(hot.critical_lessons), key=lambda x: (-x.importance, -x.timestamp, x.id)
        ),
        updated_at=hot.updated_at,
    )
    return cast(dict[str, Any], msgspec.to_builtins(state))


_Item = TypeVar("_Item", hotmod.Lesson, hotmod.Event, hotmod.Task, hotmod.Project)


def _unique(items: list[_Item]) -> list[_Item]:
    """The last entry of each id (what a merge by id keeps)."""
    return list({item.id: item for item in items}.values())


def tree_rows(mem: Memory) -> list[dict[str, Any]]:
    """The tree's nodes by path (SQLite's text order is Python's: UTF-8 keeps code points)."""
    return [
        {"path": path, "description": description, "created_at": c, "last_activity": a}
        for path, description, c, a in mem.db.query(
            "SELECT path, description, created_at, last_activity FROM tree_nodes "
            "WHERE agent_id = ? ORDER BY path",
            (mem.agent_id,),
        )
    ]


def document(mem: Memory, device_hex: str) -> dict[str, Any]:
    """The critical state with the clocks of its fields (`core.clocks`; this device's own
    stamps carry `device_hex`), the seen vector and the conflict records: the payload the sync
    engine seals as the `critical` record and `tiermem.sync.merge` merges. Call
    `clocks.stamp` first (in a transaction) so that every change is stamped."""
    clock_rows, seen_rows = clocks.read(mem.db, mem.agent_id)
    hot = mem.hot()
    tree = tree_rows(mem)
    conflicts = conflictmod.synced(mem.db, mem.agent_id)
    values = clocks.item_values(hot, [(n["path"], n["description"]) for n in tree])
    return _document(mem.agent_id, device_hex, hot, tree, values, clock_rows, seen_rows, conflicts)


def stamped_document(mem: Memory, device_hex: str) -> dict[str, Any]:
    """`clocks.stamp`, then `document`, in one transaction that reads each table once: what
    a push seals. Writes nothing when every change was stamped as it was made."""
    db, agent_id = mem.db, mem.agent_id
    with db.transaction():
        hot = mem.hot()
        tree = tree_rows(mem)
        values = clocks.item_values(hot, [(n["path"], n["description"]) for n in tree])
        clock_rows, seen_rows = clocks.stamped(db, agent_id, mem.now(), values)
        conflicts = conflictmod.synced(db, agent_id)
    return _document(agent_id, device_hex, hot, tree, values, clock_rows, seen_rows, conflicts)


def _document(
    agent_id: str,
    device_hex: str,
    hot: hotmod.HotState,
    tree: list[dict[str, Any]],
    values: dict[str, dict[str, Any]],
    clock_rows: clocks.Clocks,
    seen_rows: dict[str, str],
    conflicts: list[dict[str, Any]],
) -> dict[str, Any]:
    seen: dict[str, str] = {}
    for device, stamp in seen_rows.items():
        writer = device or device_hex
        seen[writer] = max(seen.get(writer, ""), clocks.version(stamp, writer))
    return {
        "format": DOCUMENT_FORMAT,
        "agent_id": agent_id,
        "hot": canonical_hot(hot),
        "tree": tree,
        "clocks": clocks.document_clocks(clock_rows, values, device_hex),
        "seen": seen,
        "conflicts": conflicts,
    }


def parse(state: Any) -> tuple[hotmod.HotState, list[tuple[str, str, float, float]]]:
    """The hot state and tree rows of a dump or document (InvalidInput if malformed)."""
    if not isinstance(state, dict) or state.get("format") not in (FORMAT, DOCUMENT_FORMAT):
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
        if state["format"] == DOCUMENT_FORMAT:
            clock_table(state, hot, nodes)
            for text in dict(state["seen"]).values():
                clocks.check_version(text)
            if not all(isinstance(c, dict) for c in state["conflicts"]):
                raise ValueError("a conflict record is not an object")
    except (KeyError, TypeError, ValueError, AttributeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"malformed critical state ({exc})") from None
    return hot, nodes


def write_state(
    mem: Memory, hot: hotmod.HotState, nodes: list[tuple[str, str, float, float]]
) -> None:
    """Replace hot state and tree (inside the caller's transaction); InvalidInput if the tree
    breaks its limits."""
    previous = hotmod.render_digest(hotmod.render_markdown(mem.hot_store.load()))
    mem.db.execute(
        "INSERT INTO hot_state (agent_id, data, updated_at, previous_render) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (agent_id) DO UPDATE SET data = excluded.data, "
        "updated_at = excluded.updated_at, previous_render = excluded.previous_render",
        (mem.agent_id, hotmod.encode(hot).decode(), hot.updated_at, previous),
    )
    mem.db.execute("DELETE FROM tree_nodes WHERE agent_id = ?", (mem.agent_id,))
    if nodes:
        mem.db.executemany(
            "INSERT INTO tree_nodes (agent_id, path, description, created_at, last_activity) "
            "VALUES (?, ?, ?, ?, ?)",
            [(mem.agent_id, *node) for node in nodes],
        )
    problems = mem.trees.load().check()
    if problems:
        raise InvalidInput(f"restored tree breaks its limits: {problems[0]}")


def clock_table(
    state: dict[str, Any],
    hot: hotmod.HotState,
    nodes: list[tuple[str, str, float, float]],
) -> dict[str, dict[str, str]]:
    """A document's clocks, expanded: item → field → version text (ValueError if malformed)."""
    values = clocks.item_values(hot, [(n[0], n[1]) for n in nodes])
    return clocks.expand(state["clocks"], values)


def local_clocks(
    state: dict[str, Any], device_hex: str | None
) -> tuple[clocks.Clocks, dict[str, str]]:
    """A document's clocks and seen vector as the local tables hold them (`device_hex`'s
    own stamps as this device's)."""

    def writer(device: str) -> str:
        return clocks.LOCAL if device == device_hex else device

    table: clocks.Clocks = {}
    hot, nodes = parse(state)
    for item, fields in clock_table(state, hot, nodes).items():
        for field, text in fields.items():
            stamp, device = clocks.split_version(str(text))
            table.setdefault(str(item), {})[str(field)] = (stamp, writer(device))
    seen: dict[str, str] = {}
    for device, text in state["seen"].items():
        key = writer(str(device))
        seen[key] = max(seen.get(key, ""), clocks.split_version(str(text))[0])
    return table, seen


def load(mem: Memory, state: dict[str, Any]) -> None:
    """Replace the agent's hot state and tree with `state` (validated first, one transaction),
    then regenerate MEMORY.md. Does not enqueue: restoring is not a local change. A document
    (`document`) also brings its clocks and conflict records; a plain dump leaves the clocks to
    the next stamp."""
    hot, nodes = parse(state)
    with mem.db.transaction():
        write_state(mem, hot, nodes)
        if state["format"] == DOCUMENT_FORMAT:
            table, seen = local_clocks(state, None)
            values = clocks.item_values(hot, [(n[0], n[1]) for n in nodes])
            clocks.write(mem.db, mem.agent_id, values, table, seen)
            conflictmod.absorb(mem.db, mem.agent_id, list(state["conflicts"]), mem.now())
    mem.write_memory_md()
