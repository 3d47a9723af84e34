"""The per-call context every MCP tool receives: one home and agent, opened on first use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from mcp.server.mcpserver.exceptions import ToolError

from tiermem.core import paths
from tiermem.core.config import Config, load_config
from tiermem.core.engine import Memory, require_memory_on
from tiermem.core.errors import TiermemError
from tiermem.core.paths import DEFAULT_AGENT

T = TypeVar("T")


class Home:
    """The Memory of one home and agent, opened on first use, one call at a time (the SDK runs
    sync tools in worker threads). A failure becomes an MCP tool error, prefixed by its kind."""

    def __init__(self, home: Path | None, agent_id: str, session: str | None) -> None:
        self.home, self.agent_id, self.session = home, agent_id, session
        self._mem: Memory | None = None
        self._cfg: Config | None = None
        self._lock = threading.Lock()

    def run(
        self,
        work: Callable[[Memory], T],
        creates: bool = False,
        when_off: Callable[[], T] | None = None,
    ) -> T:
        """Run one tool call. Only a write (`creates`) or the default agent's first run creates
        the home or the agent: a read on a mistyped agent fails with the close match. With
        memory off for the agent (read from config.toml before anything is opened, so nothing
        is created) every tool refuses (`MemoryOff`), unless it answers for itself
        (`when_off`: the context block comes back empty)."""
        with self._lock:
            try:
                cfg = self._config()
                if not cfg.memory_on(self.agent_id):
                    if when_off is None:
                        require_memory_on(cfg, self.agent_id)
                    else:
                        return when_off()
                if self._mem is None:
                    create = creates or self.agent_id == DEFAULT_AGENT
                    self._mem = Memory(self.home, self.agent_id, config=cfg, create=create)
                return work(self._mem)
            except TiermemError as exc:
                raise ToolError(f"{type(exc).__name__}: {exc}") from None
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(
                    f"internal error ({type(exc).__name__}); run `tiermem` with TIERMEM_DEBUG=1"
                ) from None

    def _config(self) -> Config:
        """The home's config.toml, read once (as the memory it opens reads it)."""
        if self._cfg is None:
            root = self.home if self.home is not None else paths.default_home()
            self._cfg = load_config(paths.Home(root).config_path)
        return self._cfg

    def session_for(self, given: str | None) -> str | None:
        """The call's session id, else the server's default one."""
        return given or self.session

    def close(self) -> None:
        with self._lock:
            if self._mem is not None:
                self._mem.close()
                self._mem = None
