"""Importers from other memory tools and chat histories (one module per family of formats).

`plan(format, path, ctx)` only reads and returns a `Plan`; `summarize` says what applying it
would do (the dry run); `apply` writes: facts are stored once per (source, key) — the bookkeeping
of `ingest_items` — and conversations go through conversation-end dated at their own time, so
importing twice adds nothing.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.core import interchange
from tiermem.core.errors import InvalidInput, LimitExceeded
from tiermem.core.importers import records
from tiermem.core.importers.base import Conversation, Item, Plan
from tiermem.core.importers.chats import (
    plan_chatgpt,
    plan_claude_ai,
    plan_claude_code,
    plan_slack,
)
from tiermem.core.importers.context import PlanContext
from tiermem.core.importers.mem0 import plan_mem0
from tiermem.core.importers.mempalace import plan_mempalace
from tiermem.core.importers.notes import plan_basic_memory, plan_openclaw
from tiermem.core.ingest import record_items, source_digest, source_items
from tiermem.core.transcript import Transcript
from tiermem.core.warm import NewFact

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

MEMORY_FORMATS: dict[str, Callable[[Path, PlanContext], Plan]] = {
    "openclaw": plan_openclaw,
    "basic-memory": plan_basic_memory,
    "mem0": plan_mem0,
    "mempalace": plan_mempalace,
}
CHAT_FORMATS: dict[str, Callable[[Path], Plan]] = {
    "claude-code": plan_claude_code,
    "chatgpt": plan_chatgpt,
    "claude-ai": plan_claude_ai,
    "slack": plan_slack,
}
FORMATS = (*MEMORY_FORMATS, *CHAT_FORMATS)

__all__ = ["FORMATS", "Conversation", "Item", "Plan", "PlanContext", "apply", "plan", "summarize"]


def context_of(mem: Memory) -> PlanContext:
    projects = tuple(p.name for p in mem.hot().active_context.projects)
    return PlanContext(now=mem.now(), projects=projects, min_words=mem.cfg.distill.min_words)


def plan(fmt: str, path: Path, ctx: PlanContext) -> Plan:
    """Read PATH in the given format; nothing is written."""
    if fmt in MEMORY_FORMATS:
        return MEMORY_FORMATS[fmt](path, ctx)
    if fmt in CHAT_FORMATS:
        return CHAT_FORMATS[fmt](path)
    raise InvalidInput(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")


@dataclass
class ImportSummary:
    """What an import did (or, in a dry run, would do)."""

    format: str
    dry_run: bool
    new: int = 0
    already_imported: int = 0
    stored: int = 0
    merged: int = 0
    categories: dict[str, int] = field(default_factory=dict)
    conversations: int = 0
    facts_from_conversations: int = 0
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def transcript_of(conv: Conversation) -> tuple[Transcript, str]:
    """The transcript conversation-end reads, and its text (its digest makes a replay a no-op)."""
    text = "\n".join(f"{m.role.title()}: {m.text}" for m in conv.messages)
    return Transcript(messages=list(conv.messages), format="import", session_id=conv.id), text


def _new_items(mem: Memory, the_plan: Plan) -> tuple[list[Item], int]:
    known: dict[str, set[str]] = {}
    seen: set[tuple[str, str]] = set()
    new, old = [], 0
    for item in the_plan.items:
        if item.source not in known:
            known[item.source] = set(source_items(mem, item.source))
        if item.key in known[item.source] or (item.source, item.key) in seen:
            old += 1
            continue
        seen.add((item.source, item.key))
        new.append(item)
    return new, old


def _pending(mem: Memory, conv: Conversation) -> bool:
    _, text = transcript_of(conv)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return source_digest(mem, f"session:{conv.id[:200]}") != digest


def summarize(mem: Memory, the_plan: Plan) -> ImportSummary:
    """The dry run: counts, categories and what would be skipped; nothing is written."""
    summary = ImportSummary(the_plan.format, dry_run=True, skipped=list(the_plan.skipped))
    new, summary.already_imported = _new_items(mem, the_plan)
    summary.new = len(new)
    summary.categories = dict(Counter(i.category for i in new).most_common())
    pending = [c for c in the_plan.conversations if _pending(mem, c)]
    summary.conversations = len(pending)
    summary.already_imported += len(the_plan.conversations) - len(pending)
    return summary


def apply(
    mem: Memory,
    the_plan: Plan,
    progress: Callable[[Conversation], None] | None = None,
) -> ImportSummary:
    """Store the plan's new facts (with what each carries), its tree and hot memory, and run
    its new conversations through conversation-end."""
    mem.require_memory()
    summary = summarize(mem, the_plan)
    summary.dry_run = False
    new, _ = _new_items(mem, the_plan)
    with mem.db.transaction():
        _add_tree(mem, the_plan, summary)
        outcomes = mem.store_many([_fact(item) for item in new])
        for source in dict.fromkeys(i.source for i in new):
            pairs = [(i, o) for i, o in zip(new, outcomes, strict=True) if i.source == source]
            record_items(mem, source, [(i.key, o.id, o.created) for i, o in pairs])
            ids = {key: memory_id for key, (memory_id, _) in source_items(mem, source).items()}
            records.restore(mem, [(i, o.id) for i, o in pairs if o.created], ids)
    if the_plan.hot is not None:
        incoming = the_plan.hot
        mem.edit_hot(lambda current: interchange.merge_hot(current, incoming))
    summary.stored = sum(o.created for o in outcomes)
    summary.merged = len(outcomes) - summary.stored
    _run_conversations(mem, the_plan, summary, progress)
    return summary


def _add_tree(mem: Memory, the_plan: Plan, summary: ImportSummary) -> None:
    for path, description in the_plan.tree:
        try:
            mem.tree_add(path, description)
        except (LimitExceeded, InvalidInput) as exc:
            summary.skipped.append(f"tree node {path}: {exc}")


def _run_conversations(
    mem: Memory,
    the_plan: Plan,
    summary: ImportSummary,
    progress: Callable[[Conversation], None] | None,
) -> None:
    oldest_first = sorted(the_plan.conversations, key=lambda c: c.started_at or float("inf"))
    for conv in oldest_first:  # the clock only moves forward, as it did when they happened
        if progress is not None:
            progress(conv)
        if not _pending(mem, conv):
            continue
        transcript, text = transcript_of(conv)
        try:
            with dated(mem, conv.started_at):
                report = mem.conversation_end(transcript, text)
        except InvalidInput as exc:
            summary.skipped.append(f"conversation {conv.title or conv.id}: {exc}")
            summary.conversations -= 1
            continue
        summary.facts_from_conversations += len(report.stored)


def _fact(item: Item) -> NewFact:
    return NewFact(
        text=item.text,
        category=item.category,
        importance=item.importance,
        urls=item.urls,
        commands=item.commands,
        paths=item.paths,
        source=f"import:{item.source}"[:200],
        created_at=item.created_at,
    )


@contextmanager
def dated(mem: Memory, when: float | None) -> Iterator[None]:
    """Run with the memory's clock at `when` (never later than now), so what a conversation
    gives is dated by the conversation."""
    now = mem.now()
    if when is None or when >= now:
        yield
        return
    saved = mem._clock
    mem._clock = lambda: when
    try:
        yield
    finally:
        mem._clock = saved
