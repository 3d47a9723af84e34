"""The oracle every reliability test checks after a fault: storage integrity and every domain
invariant of the memory model, for every agent of a home."""

from __future__ import annotations

import json

from tiermem.core import hot as hotmod
from tiermem.core import snapshot
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import StorageError


def storage_problems(db: Database) -> list[str]:
    """`PRAGMA integrity_check`, the FTS index against its table, foreign keys."""
    problems: list[str] = []
    rows = db.query("PRAGMA integrity_check")
    if [r[0] for r in rows] != ["ok"]:
        problems.append(f"integrity_check: {[r[0] for r in rows][:5]}")
    if db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'memories_fts'") == 0:
        return problems  # an empty database (killed or cut before the first migration)
    try:
        db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    except StorageError as exc:
        problems.append(f"fts integrity-check: {exc}")
    fts = db.scalar("SELECT count(*) FROM memories_fts")
    rows_count = db.scalar("SELECT count(*) FROM memories")
    if fts != rows_count:
        problems.append(f"fts has {fts} rows for {rows_count} memories")
    if db.query("PRAGMA foreign_key_check"):
        problems.append("foreign_key_check found violations")
    return problems


def domain_problems(mem: Memory) -> list[str]:
    """Hot limits, tree limits, one row per memory, nothing both live and forgotten."""
    problems: list[str] = []
    cfg = mem.cfg
    tree = mem.trees.load()
    problems += [f"tree: {p}" for p in tree.check()]
    state = mem.hot()
    if hotmod.size_bytes(state) > cfg.hot.max_bytes:
        problems.append(f"hot is {hotmod.size_bytes(state)} bytes")
    if len(state.critical_lessons) > cfg.hot.max_lessons:
        problems.append(f"{len(state.critical_lessons)} lessons")
    if len(state.active_context.events) > cfg.hot.max_events:
        problems.append(f"{len(state.active_context.events)} events")
    if len(state.active_context.tasks) > cfg.hot.max_pending_tasks:
        problems.append(f"{len(state.active_context.tasks)} tasks")
    duplicated = mem.db.query(
        "SELECT id FROM memories WHERE agent_id = ? GROUP BY id HAVING count(*) > 1",
        (mem.agent_id,),
    )
    if duplicated:
        problems.append(f"memories stored twice: {duplicated[:3]}")
    both = mem.db.query(
        "SELECT m.id FROM memories m JOIN forgotten f ON f.agent_id = m.agent_id AND f.id = m.id "
        "WHERE m.agent_id = ?",
        (mem.agent_id,),
    )
    if both:
        problems.append(f"memories both live and forgotten: {both[:3]}")
    bad_tier = mem.db.query(
        "SELECT id, tier FROM memories WHERE agent_id = ? AND tier NOT IN ('warm','cold','frozen')",
        (mem.agent_id,),
    )
    if bad_tier:
        problems.append(f"memories in no tier: {bad_tier[:3]}")
    return problems


def all_problems(mem: Memory) -> list[str]:
    return storage_problems(mem.db) + domain_problems(mem)


def critical(mem: Memory) -> tuple[bytes, dict[str, float]]:
    """The critical state without the tree's activity times, and those times.

    A store or a retrieval touches tree nodes (`last_activity`) without queueing a push: that
    bookkeeping rides along with the next critical change, so it may lag on the server."""
    state = snapshot.dump(mem)
    times = {node["path"]: node.pop("last_activity") for node in state["tree"]}
    return snapshot.canonical(state), times


def difference(theirs: bytes, ours: bytes) -> str:
    """Where two canonical documents first differ, as `path: restored != local`."""

    def walk(a: object, b: object, path: str) -> str:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    return walk(a.get(key), b.get(key), f"{path}.{key}")
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                if x != y:
                    return walk(x, y, f"{path}[{i}]")
        return f"{path}: {a!r:.200} != {b!r:.200}"

    return walk(json.loads(theirs), json.loads(ours), "$")
