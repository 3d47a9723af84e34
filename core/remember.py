"""One structured write, the same from every front end (`tiermem store`, MCP `memory_store`, the
TUI's store form): a fact placed by its content unless a category is given, its priority or
importance, tags, expiry, links and the memories it replaces, all in one transaction.

Batch writers (conversation end, importers, dreaming) store through `Memory.store_many`, the
step this one ends in, so every memory gets the same checks, dedup, graph indexing and
supersession whichever way it came in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.core import spaces, temporal
from tiermem.core.errors import InvalidInput
from tiermem.core.warm import StoreOutcome

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

DEFAULT_IMPORTANCE = 0.5


@dataclass(frozen=True)
class Entry:
    """What a front end asks to remember; `category=None` places it by its content."""

    text: str
    category: str | None = None
    importance: float | None = None
    priority: str | None = None
    urls: Sequence[str] = ()
    commands: Sequence[str] = ()
    paths: Sequence[str] = ()
    tags: Sequence[str] = ()
    expires: str | None = None
    related_to: Sequence[str] = ()
    supersedes: Sequence[str] = ()
    source: str = ""
    space: str | None = None
    """Store into this shared space (the agent must include it as a writer) instead of the
    agent's own memory."""
    count_tokens: bool = True
    """False leaves the token count to the first read that needs it (a one-shot command then
    never loads the tokenizer)."""


@dataclass(frozen=True)
class Remembered:
    """What storing an entry did."""

    outcome: StoreOutcome
    placed_by_content: bool
    tree_node: str | None
    tags: tuple[str, ...]
    related_to: list[str]
    expires_at: float | None
    superseded: list[str]

    def common(self) -> dict[str, Any]:
        """The fields every front end reports."""
        o = self.outcome
        return {
            "id": o.id,
            "category": o.category,
            "tree_node": self.tree_node,
            "deduplicated": not o.created,
            "merged_into": o.merged_into,
            "similarity": o.similarity,
            "tags": list(self.tags),
            "related_to": self.related_to,
            "supersedes": self.superseded,
        }


def remember(mem: Memory, entry: Entry) -> Remembered:
    """Store `entry` in the agent's own memory (`_remember`), or with `entry.space` into that
    shared space, which records this agent as the writer of a new memory; refused unless this
    agent is a writer of the space."""
    mem.require_memory()
    if entry.space is None:
        return _remember(mem, entry)
    spaces.require_writer(mem.db, mem.agent_id, entry.space)
    target = mem.open_space(entry.space)
    try:
        with target.db.transaction():
            done = _remember(target, entry)
            if done.outcome.created:
                spaces.record_writer(
                    target.db, target.agent_id, done.outcome.id, mem.agent_id, target.now()
                )
    finally:
        target.close()
    return done


def _remember(mem: Memory, entry: Entry) -> Remembered:
    """Store `entry` (a known fact is reinforced and gains the tags); an unknown related or
    superseded id stores nothing.

    What only some entries need (priorities, tags and expiry, links, supersession) is imported
    where they need it: a plain `tiermem store` starts faster without."""
    importance = entry.importance
    if entry.priority is not None:
        from tiermem.core import context

        importance = context.importance_for(entry.priority, entry.importance)
    expires_at = parse_expiry(entry.expires, mem.now()) if entry.expires else None
    category = entry.category or place(mem, entry.text)
    with mem.db.transaction():
        outcome = mem.store(
            entry.text,
            category,
            DEFAULT_IMPORTANCE if importance is None else importance,
            urls=entry.urls,
            commands=entry.commands,
            paths=entry.paths,
            source=entry.source,
            count_tokens=entry.count_tokens,
        )
        tags = _set_extras(mem, outcome.id, entry.tags, expires_at)
        if entry.related_to:
            from tiermem.core import links

            for other in entry.related_to:
                links.link(mem, outcome.id, other)
        if entry.supersedes:
            from tiermem.core import supersession

            for old in entry.supersedes:
                supersession.supersede(mem, old, outcome.id)
    related: list[str] = []
    if entry.related_to:
        from tiermem.core import links

        related = links.linked(mem, [outcome.id]).get(outcome.id, [])
    return Remembered(
        outcome=outcome,
        placed_by_content=entry.category is None,
        tree_node=mem.trees.load().node_for(outcome.category),
        tags=tags,
        related_to=related,
        expires_at=expires_at,
        superseded=list(entry.supersedes),
    )


def _set_extras(
    mem: Memory, memory_id: str, tags: Sequence[str], expires_at: float | None
) -> tuple[str, ...]:
    """The memory's tags after adding `tags` and setting its expiry; none asked, nothing done."""
    if not tags and expires_at is None:
        return ()
    from tiermem.core import hygiene  # the hygiene package: only tags and expiry need it

    return hygiene.set_extras(mem, memory_id, tags, expires_at)


def place(mem: Memory, text: str) -> str:
    """The category distillation would give `text` (its projects known from hot memory)."""
    from tiermem.core import distill  # the write path: only a store without a category needs it

    projects = [p.name for p in mem.hot().active_context.projects]

    _kind, category, _importance = distill.classify(" ".join(text.split()), projects)
    return category


def parse_expiry(value: str, now: float) -> float:
    """An ISO date (the memory expires at the end of that day, UTC) or date-time; never in
    the past."""
    ts, _day = temporal.end_of(value, "expires")
    if ts <= now:
        raise InvalidInput(f"expires {value!r} is already past")
    return ts
