"""Working memory: the agent's scratch state for the task of the current session."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from tiermem.core import working
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import SESSION_DOC, ToolSpec


def _session(home: Home, given: str | None) -> str:
    session = home.session_for(given)
    if not session:
        raise InvalidInput("working memory needs a session id (session_id or the server's)")
    return session


def _shape(mem: Memory, session: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "session": session,
        "working_memory": data,
        "tokens": working.tokens(data),
        "limit_tokens": mem.cfg.working.max_tokens,
    }


def memory_working_get(
    home: Home, session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None
) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        session = _session(home, session_id)
        return _shape(mem, session, working.show(mem, session))

    return home.run(work)


def memory_working_update(
    home: Home,
    changes: Annotated[
        dict[str, Any],
        Field(
            description="A JSON object merged into the working memory (a key set to null is "
            "removed; goal, plan, facts, recent_observations, active_skill, or any key)."
        ),
    ],
    replace: Annotated[
        bool, Field(description="Replace the whole working memory instead of merging.")
    ] = False,
    session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        session = _session(home, session_id)
        update = working.replace if replace else working.patch
        return _shape(mem, session, update(mem, session, changes))

    return home.run(work, creates=True)


GET = ToolSpec(
    "memory_working_get",
    memory_working_get,
    "Read the working memory of the session: the task's goal, plan, facts, recent "
    "observations and active skill (a JSON object; empty at the start of a task).",
)
UPDATE = ToolSpec(
    "memory_working_update",
    memory_working_update,
    "Update the session's working memory (merge patch, or replace). Over its token limit "
    "(default 2,000) the change is refused and nothing changes; conversation_end folds it "
    "into its report and clears it.",
)
