"""`tiermem mcp`: the MCP server an agent's client starts (stdio, the official `mcp` SDK).

Each tool (`tiermem.tui.mcp.tools`) is a thin mapping of its arguments onto the core
(`core.context`, `core.hygiene`, `core.audit`, the `Memory` facade); no rule lives here. The
memory home is opened on the first call and kept; calls are serialised on it. A failure is an
MCP tool error (`isError`, the message the CLI would print, prefixed by its kind): the server
keeps running. Arguments are checked before a tool runs: one the tool does not take, or one of
the wrong type or range, is an `InvalidInput` error naming it. Nothing but the protocol is
written to stdout.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import FrameType
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError

from tiermem.core.errors import EXIT_INTERRUPTED, InvalidInput, NotFound
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools import TOOLS, ToolSpec

INSTRUCTIONS = """tiermem is this agent's long-term memory (hot memory always in context, warm and
cold memories found through a category tree). Before answering, call memory_context with the
user's message (or memory_recall for a specific question) and put the result in your ctx.
Call memory_store for anything worth remembering (decisions, preferences, facts, URLs,
commands). When the user says something changed (they moved, a new manager, a decision
reversed, "actually it's X"), store the new fact with `supersedes` naming the memory it
replaces, or call memory_supersede; the old one stays, ranked below the new. Undo a wrong one
with memory_unsupersede; memory_changes lists what changed since a date, and `as_of` on recall
answers what was true then. Pass the same session_id in a conversation: memories recalled in 3
sessions are promoted to hot memory, hot lessons unused for 3 sessions are demoted."""


class ToolServer(MCPServer):
    """The SDK's server with tiermem's error texts: each starts with its kind (the SDK's own
    `Error executing tool …` prefix and pydantic's report are replaced), and a call with an
    argument the tool does not take is refused instead of the argument being dropped."""

    def __init__(self, specs: tuple[ToolSpec, ...]) -> None:
        super().__init__(
            "tiermem", instructions=INSTRUCTIONS, version=_version(), log_level="WARNING"
        )
        self.arguments = {spec.name: spec.arguments for spec in specs}

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        if name not in self.arguments:
            raise ToolError(f"{NotFound.__name__}: unknown tool {name!r}")
        unknown = sorted(set(arguments) - set(self.arguments[name]))
        if unknown:
            raise ToolError(
                f"{InvalidInput.__name__}: {name} takes no argument "
                f"{', '.join(repr(u) for u in unknown)} (it takes: "
                f"{', '.join(self.arguments[name]) or 'none'})"
            )
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            raise ToolError(_error_text(name, exc)) from exc.__cause__


def _error_text(tool: str, exc: ToolError) -> str:
    """A tool error as its kind and message: the tool's own (already `Kind: …`), or the
    arguments that failed validation, by name (never the values given)."""
    cause = exc.__cause__
    if isinstance(cause, ToolError):
        return str(cause)
    if isinstance(cause, ValidationError):
        problems = [
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg'][:1].lower()}"
            f"{e['msg'][1:]}"
            for e in cause.errors(include_url=False)
        ]
        return f"{InvalidInput.__name__}: {tool}: {'; '.join(problems)}"
    return str(exc)


def build_server(
    home: Path | None, agent_id: str, session: str | None = None
) -> tuple[MCPServer, Home]:
    """The server with every tool of the registry (and the home it serves, for closing)."""
    server = ToolServer(TOOLS)
    state = Home(home, agent_id, session)
    for spec in TOOLS:
        server.add_tool(_bound(spec, state), name=spec.name, description=spec.description)
    return server, state


def _bound(spec: ToolSpec, home: Home) -> Callable[..., dict[str, Any]]:
    """The tool's function with the home bound: the SDK reads the schema of what is left."""
    tool = functools.partial(spec.fn, home)
    tool.__name__ = spec.name  # type: ignore[attr-defined]  # the SDK names its models by it
    return tool


def _version() -> str:
    try:
        return version("tiermem")
    except PackageNotFoundError:
        return "0"


def tool_list(server: MCPServer) -> list[Any]:
    return asyncio.run(server.list_tools())


def tools_markdown(server: MCPServer) -> str:
    """The tools and their parameters as markdown (packaging/openclaw/TOOLS.md is this text)."""
    lines = [
        "# tiermem MCP tools",
        "",
        "Generated by `tiermem mcp --tools-doc` from the server's own schemas; a test keeps this",
        "file equal to it. Errors are MCP tool errors (`isError`) whose text starts with the",
        "kind: `InvalidInput`, `NotFound`, `LimitExceeded`, `StorageError`, `ConfigError`;",
        "an argument a tool does not take, or of the wrong type or range, is `InvalidInput`.",
        "",
    ]
    for tool in tool_list(server):
        lines += [f"## {tool.name}", "", tool.description or "", ""]
        lines += _parameters_table(tool.input_schema)
    return "\n".join(lines)


def _parameters_table(schema: dict[str, Any]) -> list[str]:
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    if not props:
        return ["No parameters.", ""]
    lines = [
        "| parameter | type | required | default | description |",
        "|---|---|---|---|---|",
    ]
    for name, spec in props.items():
        default = "" if name in required else f"`{json.dumps(spec.get('default'))}`"
        lines.append(
            f"| `{name}` | {_type_of(spec)} | {'yes' if name in required else 'no'} | "
            f"{default} | {spec.get('description', '')} |"
        )
    lines.append("")
    return lines


def _type_of(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return " \\| ".join(f"`{v}`" for v in spec["enum"])
    if "anyOf" in spec:
        kinds = [_type_of(s) for s in spec["anyOf"] if s.get("type") != "null"]
        return " \\| ".join(kinds) + " \\| null"
    kind = str(spec.get("type", "any"))
    if kind == "array":
        return f"array of {_type_of(spec.get('items', {}))}"
    return kind


def serve(home: Path | None, agent_id: str, session: str | None) -> None:
    """Run the stdio server until the client closes standard input or the first ctrl-C."""
    server, state = build_server(home, agent_id, session)
    previous = signal.signal(signal.SIGINT, _stop_now)
    try:
        server.run("stdio")
    finally:
        signal.signal(signal.SIGINT, previous)
        state.close()


def _stop_now(signum: int, frame: FrameType | None) -> None:
    """End the process at once: the SDK reads stdin in a worker thread that would otherwise
    keep it alive until the next line arrives. SQLite rolls back any unfinished write."""
    sys.stderr.write("tiermem: mcp server stopped (ctrl+c)\n")
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)
