"""The end of a conversation, for clients without hooks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tiermem.core import transcript as transcriptmod
from tiermem.core.engine import Memory
from tiermem.sync.push import kick
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import SESSION_DOC, ToolSpec


def memory_conversation_end(
    home: Home,
    transcript: Annotated[
        str,
        Field(description="OpenClaw JSONL, chat JSONL, or User:/Assistant: lines."),
    ],
    session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
    mode: Annotated[
        Literal["rule", "llm"] | None,
        Field(description="Distillation: rule (default, no LLM) or llm ([llm] endpoint)."),
    ] = None,
) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        parsed = transcriptmod.parse(transcript)
        session = home.session_for(session_id)
        report = mem.conversation_end(parsed, transcript, mode=mode, session=session)
        return report.as_dict() | {"push": kick.kick(mem)}

    return home.run(work, creates=True)


CONVERSATION_END = ToolSpec(
    "memory_conversation_end",
    memory_conversation_end,
    "After a conversation (for clients without hooks): distill the transcript into "
    "facts, update hot memory, act on the owner's [[pin:…]]-style tags and run session "
    "hygiene (promote what 3 sessions recalled, demote hot lessons unused for 3). "
    "With sync set up, the push starts in the background at once (`push` says how). "
    "Calling it twice with the same transcript changes nothing.",
)
