"""The per-call context every MCP tool receives: one home and agent, opened on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from tiermem.core.engine import Memory
from tiermem.core.errors import TiermemError
from tiermem.core.paths import DEFAULT_AGENT

T = TypeVar("T")


class Home:
    """The Memory of one home and agent, opened on first use, one call at a time (the SDK runs
    sync tools in worker threads). A failure becomes an MCP tool error, prefixed by its kind."""

    def __init__(self, home: Path | None, agent_id: str, session: str | None) -> None:
        self.home, self.agent_id, self.session = home, agent_id, session
        self._mem: Memory | None = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[Memory], T], creates: bool = False, when_off: bool = False) -> T:
        """Run one tool call. Only a write (`creates`) or the default agent's first run creates
        the home or the agent: a read on a mistyped agent fails with the close match. With
        memory off for the agent every tool refuses (`MemoryOff`), unless it answers for
        itself (`when_off`: the context block comes back empty)."""
        with self._lock:
            try:
                if self._mem is None:
                    self._mem = Memory(
                        self.home, self.agent_id, create=creates or self.agent_id == DEFAULT_AGENT
                    )
                if not when_off:
                    self._mem.require_memory()
                return work(self._mem)
            except TiermemError as exc:
                raise ToolError(f"{type(exc).__name__}: {exc}") from None
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(
                    f"internal error ({type(exc).__name__}); run `tiermem` with TIERMEM_DEBUG=1"
                ) from None

    def session_for(self, given: str | None) -> str | None:
        """The call's session id, else the server's default one."""
        return given or self.session

    def close(self) -> None:
        with self._lock:
            if self._mem is not None:
                self._mem.close()
                self._mem = None
