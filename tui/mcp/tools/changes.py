"""Facts that change: say that a memory replaced another, undo it, list what changed."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from tiermem.core import supersession, temporal
from tiermem.core.engine import Memory
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import ToolSpec


def memory_supersede(
    home: Home,
    old_id: Annotated[str, Field(description="The memory that is no longer true.")],
    new_id: Annotated[
        str | None,
        Field(description="The memory that replaces it (none: the fact simply ended)."),
    ] = None,
    at: Annotated[
        str | None,
        Field(
            description="When it stopped being true (YYYY-MM-DD; default: when "
            "the new one became true)."
        ),
    ] = None,
) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        when = None if at is None else temporal.parse_day(at, "at")
        return supersession.supersede(mem, old_id, new_id, when).as_dict()

    return home.run(work)


def memory_unsupersede(
    home: Home,
    id: Annotated[str, Field(description="A superseded memory to make current again.")],  # noqa: A002
) -> dict[str, Any]:
    def undo(mem: Memory) -> dict[str, Any]:
        record = supersession.unsupersede(mem, id)
        return {"id": record.id, "current": True}

    return home.run(undo)


def memory_changes(
    home: Home,
    since: Annotated[str, Field(description="From this day (YYYY-MM-DD).")],
    until: Annotated[str | None, Field(description="Up to this day (default: now).")] = None,
) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        start = temporal.start_of(since, "since")
        end = None if until is None else temporal.parse_day(until, "until")
        return {"changes": [c.as_dict() for c in supersession.changes(mem, start, end)]}

    return home.run(work)


SUPERSEDE = ToolSpec(
    "memory_supersede",
    memory_supersede,
    "Say that a stored fact is no longer true: replaced by a newer memory (new_id), or ended "
    "without one. The old memory stays, marked superseded, and ranks below what replaced it. "
    "Use it when the user corrects or updates something you stored (a move, a new job, a "
    "changed decision) and memory_store's `supersedes` was not given.",
)
UNSUPERSEDE = ToolSpec(
    "memory_unsupersede",
    memory_unsupersede,
    "Undo a wrong supersession: the memory is current again.",
)
CHANGES = ToolSpec(
    "memory_changes",
    memory_changes,
    "What changed since a date: each fact replaced (old → new), when, and where the new one "
    "came from.",
)
