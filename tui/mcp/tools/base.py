"""What every tool module shares: the registry entry and the common parameter pieces."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

SESSION_DOC = "Session id for session hygiene (default: the server's --session / TIERMEM_SESSION)."
Strings = str | list[str]


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its published name and description, and the function that answers it
    (called with the server's `Home` first, then the tool's arguments)."""

    name: str
    fn: Callable[..., dict[str, Any]]
    description: str

    @cached_property
    def arguments(self) -> tuple[str, ...]:
        """The argument names a call may give (every parameter after the `Home`)."""
        return tuple(inspect.signature(self.fn).parameters)[1:]


def strings(value: Strings | None) -> list[str]:
    """A one-or-many parameter as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)
