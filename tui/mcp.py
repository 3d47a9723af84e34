"""`tiermem mcp`: the MCP server an agent's client starts (stdio, the official `mcp` SDK).

Each tool is a thin mapping of its arguments onto the core (`core.context`, `core.hygiene`,
`core.audit`, the `Memory` facade); no rule lives here. The memory home is opened on the first
call and kept; calls are serialised on it (the SDK runs sync tools in worker threads). A
failure is an MCP tool error (`isError`, the message the CLI would print, prefixed by its
kind): the server keeps running. Nothing but the protocol is written to stdout.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from tiermem.core import audit, curate, hygiene
from tiermem.core import context as ctx
from tiermem.core import transcript as transcriptmod
from tiermem.core.engine import Memory
from tiermem.core.errors import TiermemError
from tiermem.core.interchange import record_dict
from tiermem.core.tokens import count_tokens

T = TypeVar("T")

INSTRUCTIONS = """tiermem is this agent's long-term memory (hot memory always in context, warm and
cold memories found through a category tree). Before answering, call memory_context with the
user's message (or memory_recall for a specific question) and put the result in your ctx.
Call memory_store for anything worth remembering (decisions, preferences, facts, URLs,
commands). Pass the same session_id in a conversation: memories recalled in 3 sessions are
promoted to hot memory, hot lessons unused for 3 sessions are demoted."""

SESSION_DOC = "Session id for session hygiene (default: the server's --session / TIERMEM_SESSION)."
Strings = str | list[str]


class _Home:
    """The Memory of one home and agent, opened on first use, one call at a time."""

    def __init__(self, home: Path | None, agent_id: str, session: str | None) -> None:
        self.home, self.agent_id, self.session = home, agent_id, session
        self._mem: Memory | None = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[Memory], T]) -> T:
        with self._lock:
            try:
                if self._mem is None:
                    self._mem = Memory(self.home, self.agent_id)
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
        return given or self.session

    def close(self) -> None:
        with self._lock:
            if self._mem is not None:
                self._mem.close()
                self._mem = None


def _strings(value: Strings | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def build_server(
    home: Path | None, agent_id: str, session: str | None = None
) -> tuple[MCPServer, _Home]:
    """The server with every tool registered (and the home it serves, for closing)."""
    server: MCPServer = MCPServer(
        "tiermem", instructions=INSTRUCTIONS, version=_version(), log_level="WARNING"
    )
    state = _Home(home, agent_id, session)

    @server.tool(
        description=(
            "Store a memory (structured write): categorised, deduplicated (storing a known "
            "fact reinforces it and merges its tags), with a priority or importance, tags, an "
            "expiry date and URLs/commands/paths. Returns its id and token cost."
        )
    )
    def memory_store(
        content: Annotated[str, Field(description="The fact to remember (one fact).")],
        category: Annotated[
            str,
            Field(
                description="Category path, e.g. preferences, projects/evoclaw/bsc, people/sarah."
            ),
        ] = "facts",
        priority: Annotated[
            Literal["critical", "high", "medium", "low"] | None,
            Field(description="critical 0.95, high 0.8, medium 0.5 (default), low 0.3."),
        ] = None,
        importance: Annotated[
            float | None, Field(ge=0, le=1, description="0-1; instead of priority.")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Free-form tags.")] = None,
        expires: Annotated[
            str | None,
            Field(description="ISO date or date-time: archived to cold after it."),
        ] = None,
        url: Annotated[Strings | None, Field(description="URL(s) to keep with it.")] = None,
        command: Annotated[
            Strings | None, Field(description="Shell command(s) to keep with it.")
        ] = None,
        path: Annotated[Strings | None, Field(description="File path(s) to keep with it.")] = None,
        context: Annotated[str | None, Field(description="Why this is stored.")] = None,
    ) -> dict[str, Any]:
        return state.run(
            lambda mem: ctx.store_entry(
                mem,
                content,
                category,
                priority=priority,
                importance=importance,
                tags=tags or [],
                expires=expires,
                urls=_strings(url),
                commands=_strings(command),
                paths=_strings(path),
                context=context,
            )
        )

    @server.tool(
        description=(
            "Recall the memories relevant to a query within a token budget (the JSON of the "
            "returned entries fits it), best first, each with why it was found. Filters: "
            "categories (each with its subcategories) and a minimum priority."
        )
    )
    def memory_recall(
        query: Annotated[str, Field(description="What to recall, in natural language.")],
        categories: Annotated[
            list[str] | None, Field(description="Only these categories (and below).")
        ] = None,
        priority_min: Annotated[
            Literal["critical", "high", "medium", "low"] | None,
            Field(description="Leave out entries below this priority."),
        ] = None,
        token_budget: Annotated[
            int, Field(ge=1, description="Most tokens the entries may take.")
        ] = ctx.DEFAULT_RECALL_BUDGET,
        format: Annotated[  # noqa: A002 (the seed's parameter name)
            Literal["brief", "detailed"],
            Field(description="brief, or detailed (scores, metadata, explanation)."),
        ] = "brief",
        session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
    ) -> dict[str, Any]:
        return state.run(
            lambda mem: ctx.recall(
                mem,
                query,
                categories=categories or [],
                priority_min=priority_min,
                budget=token_budget,
                fmt=format,
                session=state.session_for(session_id),
            ).as_dict()
        )

    @server.tool(
        description=(
            "Search every tier (warm, cold archive) by keywords through the category tree; "
            "results carry their explanation. No budget: use memory_recall for context."
        )
    )
    def memory_search(
        query: Annotated[str, Field(description="Keywords or a question.")],
        limit: Annotated[int, Field(ge=1, le=100, description="Most results.")] = 10,
        tier: Annotated[
            Literal["warm", "cold", "frozen", "all"] | None,
            Field(description="Only this tier (cold includes frozen)."),
        ] = None,
        category: Annotated[str | None, Field(description="Only this category and below.")] = None,
        session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
    ) -> dict[str, Any]:
        def work(mem: Memory) -> dict[str, Any]:
            result = mem.retrieve(query, limit=limit, tier=tier, category=category)
            hygiene.track_result(mem, state.session_for(session_id), result)
            return {
                "query": query,
                "terms": result.terms,
                "tree_matches": [{"path": c.path, "reason": c.reason} for c in result.categories],
                "candidates": result.candidates,
                "notes": result.notes,
                "results": [
                    {
                        "id": h.memory.id,
                        "category": h.memory.category,
                        "content": h.memory.text,
                        "tier": h.memory.tier,
                        "priority": ctx.priority_of(h.memory.importance),
                        "score": round(h.explanation.score, 4),
                        "why": ctx.why(h),
                    }
                    for h in result.hits
                ],
            }

        return state.run(work)

    @server.tool(
        description=(
            "Get one memory (or hot lesson) by id, with its metadata, score, tags, pin, the "
            "sessions that recalled it, and its hot lesson if it has one."
        )
    )
    def memory_get(
        id: Annotated[str, Field(description="A memory id or a hot lesson id.")],  # noqa: A002
        session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
    ) -> dict[str, Any]:
        def work(mem: Memory) -> dict[str, Any]:
            session = state.session_for(session_id)
            for lesson in mem.hot().critical_lessons:
                if lesson.id == id:
                    if session:
                        hygiene.track(mem, session, [], [lesson.id])
                    return {"kind": "lesson", **msgspec.to_builtins(lesson)}
            listed = curate.get_listed(mem, id)
            if session:
                hygiene.track(mem, session, [id])
            record = listed.record
            tags, expires = hygiene.extras_for(mem, [id]).get(id, ((), None))
            return (
                {"kind": "memory"}
                | record_dict(record)
                | {
                    "priority": ctx.priority_of(record.importance),
                    "score": round(record.score(mem.now(), mem.cfg.scoring), 4),
                    "pinned": listed.pinned,
                    "tags": list(tags),
                    "expires": ctx.iso(expires) if expires else None,
                    "hot_lesson": curate.hot_lesson_for(mem, id),
                    "sessions": hygiene.sessions_of(mem, id),
                }
            )

        return state.run(work)

    @server.tool(
        description=(
            "Read or update hot memory (MEMORY.md, always in context). update: key identity or "
            "owner_profile with an object value (null removes a field); lesson, event, task or "
            "project with a text value; complete_task or remove with an item id or text."
        )
    )
    def memory_hot(
        action: Annotated[Literal["read", "update"], Field(description="read or update.")] = "read",
        key: Annotated[
            Literal[
                "identity",
                "owner_profile",
                "lesson",
                "event",
                "task",
                "project",
                "complete_task",
                "remove",
            ]
            | None,
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
                pruned = _update_hot(mem, key, value, importance, category, description, status)
            markdown = mem.memory_md()
            return {
                "hot": msgspec.to_builtins(mem.hot()),
                "memory_md": markdown,
                "bytes": mem.hot_size_bytes(),
                "limit_bytes": mem.cfg.hot.max_bytes,
                "tokens": count_tokens(markdown),
                "pruned": pruned,
            }

        return state.run(work)

    @server.tool(
        description=(
            "Memory system health and statistics: markdown files (MEMORY.md, daily notes), the "
            "structured store by category, priority and tier, and the always-loaded index size "
            "in tokens with the on-demand domains."
        )
    )
    def memory_index_status() -> dict[str, Any]:
        return state.run(audit.index_status)

    @server.tool(
        description=(
            "Token audit: tokens per source, near-duplicate pairs, and recommendations with the "
            "tokens each would save."
        )
    )
    def memory_audit(
        scope: Annotated[
            Literal["all", "hot", "tree", "warm", "archive", "files"],
            Field(description="What to analyse."),
        ] = "all",
        recommend: Annotated[bool, Field(description="Include recommendations.")] = True,
    ) -> dict[str, Any]:
        return state.run(lambda mem: audit.audit(mem, scope, recommend))

    @server.tool(
        description=(
            "Forget: a hot entry leaves hot memory (kept in warm); any other memory is archived "
            "(out of recall, restorable with memory_restore). Give id (an id or category:slug) "
            "or keyword (every entry containing it). Nothing is deleted."
        )
    )
    def memory_forget(
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
            return state.run(lambda mem: hygiene.forget_keyword(mem, keyword).as_dict())
        return state.run(lambda mem: hygiene.forget(mem, id or ""))

    @server.tool(
        description=(
            "Pin (or unpin) a memory or hot lesson: a pinned memory is never evicted, a pinned "
            "hot lesson never demoted."
        )
    )
    def memory_pin(
        id: Annotated[str, Field(description="Memory id, hot lesson id or category:slug.")],  # noqa: A002
        unpin: Annotated[bool, Field(description="Remove the pin instead.")] = False,
    ) -> dict[str, Any]:
        return state.run(lambda mem: hygiene.pin(mem, id, not unpin))

    @server.tool(description="Restore a forgotten (archived) memory to where it was.")
    def memory_restore(
        id: Annotated[str, Field(description="Forgotten memory id or category:slug.")],  # noqa: A002
        session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
    ) -> dict[str, Any]:
        return state.run(lambda mem: hygiene.restore(mem, id, state.session_for(session_id)))

    @server.tool(
        description=(
            "The block to put in the prompt before answering a message: hot memory, the tree "
            "index (under 1,500 tokens together) and the relevant memories, all within the "
            "budget. A trivial message (under 3 meaningful words) gets the always-loaded part."
        )
    )
    def memory_context(
        message: Annotated[
            str | None, Field(description="The user's message (none: always-loaded part).")
        ] = None,
        token_budget: Annotated[
            int, Field(ge=1, description="Most tokens of the whole block.")
        ] = ctx.DEFAULT_CONTEXT_BUDGET,
        session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
    ) -> dict[str, Any]:
        return state.run(
            lambda mem: ctx.build_context(
                mem, message, budget=token_budget, session=state.session_for(session_id)
            ).as_dict()
        )

    @server.tool(
        description=(
            "After a conversation (for clients without hooks): distill the transcript into "
            "facts, update hot memory, act on the owner's [[pin:…]]-style tags and run session "
            "hygiene (promote what 3 sessions recalled, demote hot lessons unused for 3). "
            "Calling it twice with the same transcript changes nothing."
        )
    )
    def memory_conversation_end(
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
            session = state.session_for(session_id)
            return mem.conversation_end(parsed, transcript, mode=mode, session=session).as_dict()

        return state.run(work)

    @server.tool(
        description=(
            "Session hygiene report (seed 002 format): hot bullets, pins, promotions, "
            "demotions, archive, staleness of hot lessons."
        )
    )
    def memory_health() -> dict[str, Any]:
        def work(mem: Memory) -> dict[str, Any]:
            report = hygiene.health(mem)
            return {"report": report.text()} | report.as_dict()

        return state.run(work)

    return server, state


def _update_hot(
    mem: Memory,
    key: str | None,
    value: dict[str, Any] | str | None,
    importance: float,
    category: str,
    description: str,
    status: str,
) -> list[str]:
    if key is None:
        raise ToolError("InvalidInput: action update needs a key")
    if key in ("identity", "owner_profile"):
        if not isinstance(value, dict):
            raise ToolError(f"InvalidInput: {key} needs an object value")
        return mem.update_hot(key, value)
    if not isinstance(value, str):
        raise ToolError(f"InvalidInput: {key} needs a text value")
    if key == "lesson":
        return mem.add_lesson(value, importance, category)[1]
    if key == "event":
        return mem.add_event(value)[1]
    if key == "task":
        return mem.add_task(value)[1]
    if key == "project":
        return mem.add_project(value, description, status)[1]
    if key == "complete_task":
        return mem.complete_task(value)[1]
    mem.remove_hot_item(value)
    return []


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

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
        "kind: `InvalidInput`, `NotFound`, `LimitExceeded`, `StorageError`, `ConfigError`.",
        "",
    ]
    for tool in tool_list(server):
        lines += [f"## {tool.name}", "", tool.description or "", ""]
        props: dict[str, Any] = tool.input_schema.get("properties", {})
        required = set(tool.input_schema.get("required", []))
        if not props:
            lines += ["No parameters.", ""]
            continue
        lines += [
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
    return "\n".join(lines)


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
    """Run the stdio server until the client closes it."""
    server, state = build_server(home, agent_id, session)
    try:
        server.run("stdio")
    finally:
        state.close()
