"""Writing a memory, changing it in place and reading one back by id."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal

import msgspec
from pydantic import Field

from tiermem.core import context as ctx
from tiermem.core import curate, hygiene, links
from tiermem.core.engine import Memory
from tiermem.core.interchange import record_dict
from tiermem.core.remember import Entry, remember
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import SESSION_DOC, Strings, ToolSpec, strings


def memory_store(
    home: Home,
    content: Annotated[str, Field(description="The fact to remember (one fact).")],
    category: Annotated[
        str | None,
        Field(
            description="Category path, e.g. preferences, projects/evoclaw/bsc, people/sarah "
            "(default: placed by its content)."
        ),
    ] = None,
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
    related_to: Annotated[
        list[str] | None, Field(description="Ids of related memories to link it to.")
    ] = None,
    supersedes: Annotated[
        list[str] | None,
        Field(
            description="Ids of memories this one replaces (a fact that changed: they stay, "
            "marked superseded, and rank below it)."
        ),
    ] = None,
    space: Annotated[
        str | None,
        Field(
            description="Store into this shared space instead of the agent's own memory (the "
            "agent must include it as a writer)."
        ),
    ] = None,
) -> dict[str, Any]:
    entry = Entry(
        content,
        category,
        importance=importance,
        priority=priority,
        urls=strings(url),
        commands=strings(command),
        paths=strings(path),
        tags=tags or [],
        expires=expires,
        related_to=related_to or [],
        supersedes=supersedes or [],
        source="mcp" if not context else "mcp: " + " ".join(context.split())[:200],
        space=space,
    )
    return home.run(lambda mem: _store(mem, entry), creates=True)


def _store(mem: Memory, entry: Entry) -> dict[str, Any]:
    done = remember(mem, entry)
    o = done.outcome
    with contextlib.ExitStack() as scope:  # a space's memory lives in the space's scope
        holder = scope.enter_context(mem.open_space(entry.space)) if entry.space else mem
        importance = holder.get(o.id).importance
    return done.common() | {
        "space": entry.space,
        "stored": o.created,
        "priority": ctx.priority_of(importance),
        "token_cost": o.tokens,
        "expires": ctx.iso(done.expires_at) if done.expires_at else None,
    }


def memory_get(
    home: Home,
    id: Annotated[str, Field(description="A memory id or a hot lesson id.")],  # noqa: A002
    session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
) -> dict[str, Any]:
    return home.run(lambda mem: _get(mem, id, home.session_for(session_id)))


def _get(mem: Memory, item_id: str, session: str | None) -> dict[str, Any]:
    for lesson in mem.hot().critical_lessons:
        if lesson.id == item_id:
            if session:
                hygiene.track(mem, session, [], [lesson.id])
            return {"kind": "lesson", **msgspec.to_builtins(lesson)}
    listed = curate.get_listed(mem, item_id)
    if session:
        hygiene.track(mem, session, [item_id])
    record = listed.record
    tags, expires = hygiene.extras_for(mem, [item_id]).get(item_id, ((), None))
    return (
        {"kind": "memory"}
        | record_dict(record)
        | {
            "priority": ctx.priority_of(record.importance),
            "score": round(record.score(mem.now(), mem.cfg.scoring), 4),
            "pinned": listed.pinned,
            "tags": list(tags),
            "related_to": links.linked(mem, [item_id]).get(item_id, []),
            "expires": ctx.iso(expires) if expires else None,
            "hot_lesson": curate.hot_lesson_for(mem, item_id),
            "sessions": hygiene.sessions_of(mem, item_id),
        }
    )


def memory_update(
    home: Home,
    id: Annotated[str, Field(description="The memory's id (it stays the same).")],  # noqa: A002
    content: Annotated[str | None, Field(description="The new text.")] = None,
    category: Annotated[str | None, Field(description="The new category path.")] = None,
    priority: Annotated[
        Literal["critical", "high", "medium", "low"] | None,
        Field(description="critical 0.95, high 0.8, medium 0.5, low 0.3."),
    ] = None,
    importance: Annotated[
        float | None, Field(ge=0, le=1, description="0-1; instead of priority.")
    ] = None,
    url: Annotated[
        Strings | None, Field(description="URL(s): replace the memory's URLs ([] clears).")
    ] = None,
    command: Annotated[
        Strings | None, Field(description="Shell command(s): replace them ([] clears).")
    ] = None,
    path: Annotated[
        Strings | None, Field(description="File path(s): replace them ([] clears).")
    ] = None,
) -> dict[str, Any]:
    def update(mem: Memory) -> dict[str, Any]:
        curate.edit(
            mem,
            id,
            text=content,
            category=category,
            importance=ctx.importance_for(priority, importance),
            urls=None if url is None else strings(url),
            commands=None if command is None else strings(command),
            paths=None if path is None else strings(path),
        )
        return _get(mem, id, None)

    return home.run(update)


STORE = ToolSpec(
    "memory_store",
    memory_store,
    "Store a memory (structured write): categorised, deduplicated (storing a known "
    "fact reinforces it and merges its tags), with a priority or importance, tags, "
    "links to related memories (related_to), an expiry date and URLs/commands/paths. "
    "Returns its id and token cost.",
)
GET = ToolSpec(
    "memory_get",
    memory_get,
    "Get one memory (or hot lesson) by id, with its metadata, score, tags, links, pin, the "
    "sessions that recalled it, and its hot lesson if it has one.",
)
UPDATE = ToolSpec(
    "memory_update",
    memory_update,
    "Change a stored memory in place: its text, category, priority or importance, "
    "URLs/commands/paths (a given list replaces the old one). Its id, tags, expiry, pin and "
    "session history stay. Returns the memory as memory_get does.",
)
