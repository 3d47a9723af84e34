"""Hot memory (MEMORY.md, always in context): read it, or update one part of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from tiermem.core import provenance
from tiermem.core.engine import Memory
from tiermem.core.tokens import count_tokens
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import ToolSpec

HotKey = Literal[
    "identity",
    "owner_profile",
    "lesson",
    "event",
    "task",
    "project",
    "complete_task",
    "remove",
]


def memory_hot(
    home: Home,
    action: Annotated[Literal["read", "update"], Field(description="read or update.")] = "read",
    key: Annotated[
        HotKey | None,
        Field(description="What to update (action update)."),
    ] = None,
    value: Annotated[
        dict[str, Any] | str | None,
        Field(description="Object for identity/owner_profile, else the text, name or id."),
    ] = None,
    importance: Annotated[float, Field(ge=0, le=1, description="Lesson importance.")] = 0.7,
    category: Annotated[str, Field(description="Lesson category.")] = "general",
    description: Annotated[str, Field(description="Project description.")] = "",
    status: Annotated[str, Field(description="Project status.")] = "",
) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        pruned: list[str] = []
        if action == "update":
            pruned = update_hot(mem, key, value, importance, category, description, status)
        markdown = mem.memory_md()
        return {
            "hot": msgspec.to_builtins(mem.hot()),
            "provenance": provenance.of_lessons(mem, mem.hot()),
            "memory_md": markdown,
            "bytes": mem.hot_size_bytes(),
            "limit_bytes": mem.cfg.hot.max_bytes,
            "tokens": count_tokens(markdown),
            "pruned": pruned,
        }

    return home.run(work, creates=action == "update")


def update_hot(
    mem: Memory,
    key: str | None,
    value: dict[str, Any] | str | None,
    importance: float,
    category: str,
    description: str,
    status: str,
) -> list[str]:
    """Apply one update; returns what the hot limits moved to warm memory to make room."""
    if key is None:
        raise ToolError("InvalidInput: action update needs a key")
    if key in ("identity", "owner_profile"):
        if not isinstance(value, dict):
            raise ToolError(f"InvalidInput: {key} needs an object value")
        return mem.update_hot(key, value)
    if not isinstance(value, str):
        raise ToolError(f"InvalidInput: {key} needs a text value")
    adders: dict[str, Callable[[str], list[str]]] = {
        "lesson": lambda text: mem.add_lesson(text, importance, category)[1],
        "event": lambda text: mem.add_event(text)[1],
        "task": lambda text: mem.add_task(text)[1],
        "project": lambda text: mem.add_project(text, description, status)[1],
        "complete_task": lambda text: mem.complete_task(text)[1],
    }
    if key in adders:
        return adders[key](value)
    mem.remove_hot_item(value)
    return []


HOT = ToolSpec(
    "memory_hot",
    memory_hot,
    "Read or update hot memory (MEMORY.md, always in context). update: key identity or "
    "owner_profile with an object value (null removes a field); lesson, event, task or "
    "project with a text value; complete_task or remove with an item id or text.",
)
