"""Where the tokens go: index status and the token audit."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tiermem.core import audit
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import ToolSpec


def memory_index_status(home: Home) -> dict[str, Any]:
    return home.run(audit.index_status)


def memory_audit(
    home: Home,
    scope: Annotated[
        Literal["all", "hot", "tree", "warm", "archive", "files"],
        Field(description="What to analyse."),
    ] = "all",
    recommend: Annotated[bool, Field(description="Include recommendations.")] = True,
) -> dict[str, Any]:
    return home.run(lambda mem: audit.audit(mem, scope, recommend))


INDEX_STATUS = ToolSpec(
    "memory_index_status",
    memory_index_status,
    "Memory system health and statistics: markdown files (MEMORY.md, daily notes), the "
    "structured store by category, priority and tier, and the always-loaded index size "
    "in tokens with the on-demand domains.",
)
AUDIT = ToolSpec(
    "memory_audit",
    memory_audit,
    "Token audit: tokens per source, near-duplicate pairs, and recommendations with the "
    "tokens each would save.",
)
