"""`related_to` links between memories, and the linked memories a recall brings along.

A link is undirected and stored once per pair. A link to a memory that is later deleted is
simply not followed (and dropped by `unlink` or the next `link` of the pair).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tiermem.core.errors import InvalidInput

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.rows import MemoryRow

MAX_LINKS = 50
"""Links a memory may have."""


def _pair(a: str, b: str) -> tuple[str, str]:
    if a == b:
        raise InvalidInput("a memory cannot be linked to itself")
    return (a, b) if a < b else (b, a)


def link(mem: Memory, a: str, b: str) -> bool:
    """Link two existing memories (inside the caller's transaction, or its own); False if
    they already were."""
    low, high = _pair(a, b)
    for memory_id in (low, high):
        mem.get(memory_id)  # NotFound for an unknown id
        if len(linked(mem, [memory_id]).get(memory_id, [])) >= MAX_LINKS:
            raise InvalidInput(f"memory {memory_id} already has {MAX_LINKS} links")
    with mem.db.transaction():
        mem.db.execute(
            "INSERT INTO memory_links (agent_id, a, b, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent_id, a, b) DO NOTHING",
            (mem.agent_id, low, high, mem.now()),
        )
        return int(mem.db.scalar("SELECT changes()")) > 0


def unlink(mem: Memory, a: str, b: str) -> bool:
    """Remove a link; False if there was none."""
    low, high = _pair(a, b)
    with mem.db.transaction():
        mem.db.execute(
            "DELETE FROM memory_links WHERE agent_id = ? AND a = ? AND b = ?",
            (mem.agent_id, low, high),
        )
        return int(mem.db.scalar("SELECT changes()")) > 0


def linked(mem: Memory, ids: Sequence[str]) -> dict[str, list[str]]:
    """memory id → the ids it is linked to (existing memories only), oldest link first."""
    if not ids:
        return {}
    wanted = json.dumps(list(dict.fromkeys(ids)))
    rows = mem.db.query(
        "SELECT l.a, l.b FROM memory_links l WHERE l.agent_id = ? "
        "AND (l.a IN (SELECT value FROM json_each(?)) OR l.b IN (SELECT value FROM json_each(?))) "
        "AND EXISTS (SELECT 1 FROM memories m WHERE m.agent_id = l.agent_id AND m.id = l.a) "
        "AND EXISTS (SELECT 1 FROM memories m WHERE m.agent_id = l.agent_id AND m.id = l.b) "
        "ORDER BY l.created_at, l.a, l.b",
        (mem.agent_id, wanted, wanted),
    )
    keys = set(ids)
    out: dict[str, list[str]] = {}
    for a, b in rows:
        if a in keys:
            out.setdefault(str(a), []).append(str(b))
        if b in keys:
            out.setdefault(str(b), []).append(str(a))
    return out


def context_for(mem: Memory, chosen: Sequence[str], room: int) -> list[tuple[MemoryRow, str]]:
    """The memories linked to `chosen` (not among them), each with the id it is linked from,
    in the order of `chosen`, as many as fit `room` tokens of text."""
    found = linked(mem, chosen)
    order: dict[str, str] = {}
    for memory_id in chosen:
        for other in found.get(memory_id, []):
            if other not in chosen:
                order.setdefault(other, memory_id)
    records = {r.id: r for r in mem.memories.get_many(list(order))}
    out: list[tuple[MemoryRow, str]] = []
    for other, source in order.items():
        record = records.get(other)
        if record is not None and record.tokens <= room:
            out.append((record, source))
            room -= record.tokens
    return out
