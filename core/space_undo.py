"""Undoing a member's writes to a shared space, and bringing them back: `spaces undo` moves
the memories a member wrote (since a date) to the space's forgotten archive (`core/curate.py`:
kept, out of retrieval), `spaces restore` takes them out again. Nothing is deleted."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiermem.core import curate, spaces
from tiermem.core.errors import NotFound

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.spaces import Written


def undo(space: Memory, writer: str, since: float | None = None) -> list[Written]:
    """Archive every memory `writer` wrote into the space `space` (opened with
    `Memory.open_space`) at or after `since`, in one transaction; what it archived."""
    name = _name(space)
    with space.db.transaction():
        found = spaces.written(space.db, name, by=writer, since=since, undone=False)
        done = [w for w in found if w.memory is not None]
        if not done:
            raise NotFound(_nothing(name, writer, since, "to undo"))
        now = space.now()
        for w in done:
            curate.move_to_forgotten(space, w.memory_id)
            spaces.mark_undone(space.db, space.agent_id, w.memory_id, now)
    return done


def restore(space: Memory, writer: str, since: float | None = None) -> list[Written]:
    """Bring back what `undo` archived of `writer`'s memories (written at or after `since`)."""
    name = _name(space)
    with space.db.transaction():
        found = spaces.written(space.db, name, by=writer, since=since, undone=True)
        if not found:
            raise NotFound(_nothing(name, writer, since, "undone to restore"))
        for w in found:
            curate.undo_forget(space, w.memory_id)
            spaces.mark_undone(space.db, space.agent_id, w.memory_id, None)
    return found


def _name(space: Memory) -> str:
    name = spaces.space_of(space.agent_id)
    if name is None:
        raise NotFound(f"{space.agent_id!r} is an agent, not a shared space")
    return name


def _nothing(name: str, writer: str, since: float | None, what: str) -> str:
    after = "" if since is None else " since then"
    return f"space {name!r} has no memory written by {writer!r}{after} {what}"
