"""Session hygiene: forget, pin, restore, and the health report."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from tiermem.core import hygiene
from tiermem.core.engine import Memory
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import SESSION_DOC, ToolSpec


def memory_forget(
    home: Home,
    id: Annotated[  # noqa: A002
        str | None, Field(description="Memory id, hot lesson id or category:slug.")
    ] = None,
    keyword: Annotated[
        str | None, Field(description="Forget every entry containing this word.")
    ] = None,
) -> dict[str, Any]:
    if (id is None) == (keyword is None):
        raise ToolError("InvalidInput: give id or keyword (one of them)")
    if keyword is not None:
        return home.run(lambda mem: hygiene.forget_keyword(mem, keyword).as_dict())
    return home.run(lambda mem: hygiene.forget_entry(mem, id or ""))


def memory_pin(
    home: Home,
    id: Annotated[str, Field(description="Memory id, hot lesson id or category:slug.")],  # noqa: A002
    unpin: Annotated[bool, Field(description="Remove the pin instead.")] = False,
) -> dict[str, Any]:
    return home.run(lambda mem: hygiene.pin(mem, id, not unpin))


def memory_restore(
    home: Home,
    id: Annotated[str, Field(description="Forgotten memory id or category:slug.")],  # noqa: A002
    session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
) -> dict[str, Any]:
    return home.run(lambda mem: hygiene.restore(mem, id, home.session_for(session_id)))


def memory_health(home: Home) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        report = hygiene.health(mem)
        return {"report": report.text()} | report.as_dict()

    return home.run(work)


FORGET = ToolSpec(
    "memory_forget",
    memory_forget,
    "Forget: a hot entry leaves hot memory (kept in warm); any other memory is archived "
    "(out of recall, restorable with memory_restore). Give id (an id or category:slug) "
    "or keyword (every entry containing it). Nothing is deleted.",
)
PIN = ToolSpec(
    "memory_pin",
    memory_pin,
    "Pin (or unpin) a memory or hot lesson: a pinned memory is never evicted, a pinned "
    "hot lesson never demoted.",
)
RESTORE = ToolSpec(
    "memory_restore", memory_restore, "Restore a forgotten (archived) memory to where it was."
)
HEALTH = ToolSpec(
    "memory_health",
    memory_health,
    "Session hygiene report: hot bullets, pins, promotions, "
    "demotions, archive, staleness of hot lessons.",
)
