"""Storing and finding memories: `store`, `retrieve`, `cold`, `get`."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

import click

from tiermem.core import temporal
from tiermem.core.engine import TIER_CHOICES
from tiermem.core.errors import InvalidInput
from tiermem.core.interchange import record_dict
from tiermem.core.tokens import count_tokens
from tiermem.tui.cli.lazy import lazy_import
from tiermem.tui.cli.options import Options, emit, pass_options, session_option, when

if TYPE_CHECKING:
    from tiermem.core import hygiene, links, remember
    from tiermem.core.retrieve import Explanation, RetrievalResult
else:  # only a session, tags or links need them; `store` and `retrieve` start faster without
    hygiene = lazy_import("tiermem.core.hygiene")
    links = lazy_import("tiermem.core.links")
    remember = lazy_import("tiermem.core.remember")  # only `store` writes

TIER = click.Choice(TIER_CHOICES)


@click.command()
@click.option("--text", required=True, help="The fact to remember.")
@click.option(
    "--category",
    help="Category path, e.g. projects/evoclaw/bsc (default: placed by its content, as "
    "distillation places facts).",
)
@click.option(
    "--importance",
    type=float,
    default=0.5,
    show_default=True,
    help="0.9-1.0 critical, 0.7-0.8 decisions, 0.4-0.6 facts, below 0.4 casual.",
)
@click.option("--url", multiple=True, help="A URL (repeatable).")
@click.option("--command", multiple=True, help="A shell command (repeatable).")
@click.option("--path", multiple=True, help="A file path (repeatable).")
@click.option("--tag", multiple=True, help="A tag (repeatable): `retrieve --tag T` finds it.")
@click.option("--related-to", multiple=True, metavar="ID", help="Link to this memory (repeatable).")
@click.option(
    "--supersedes",
    multiple=True,
    metavar="ID",
    help="A memory this one replaces (repeatable): it stays, marked superseded.",
)
@click.option(
    "--space",
    metavar="NAME",
    help="Store into this shared space (the agent must include it as a writer; `tiermem spaces`).",
)
@pass_options
def store(
    opts: Options,
    text: str,
    category: str | None,
    importance: float,
    url: tuple[str, ...],
    command: tuple[str, ...],
    path: tuple[str, ...],
    tag: tuple[str, ...],
    related_to: tuple[str, ...],
    supersedes: tuple[str, ...],
    space: str | None,
) -> None:
    """Store a fact in warm memory (storing a known fact reinforces it instead)."""
    entry = remember.Entry(
        text,
        category,
        importance,
        urls=url,
        commands=command,
        paths=path,
        tags=tag,
        related_to=related_to,
        supersedes=supersedes,
        source="cli",
        space=space,
        count_tokens=False,  # counted by the first read that needs it: starts fast
    )
    with opts.open(create=True) as mem:
        done = remember.remember(mem, entry)
        with contextlib.ExitStack() as scope:  # a space's memory lives in the space's scope
            holder = scope.enter_context(mem.open_space(space)) if space else mem
            urls, commands, paths = holder.memories.metadata_of(done.outcome.id)
    outcome, node, placed = done.outcome, done.tree_node, done.placed_by_content
    payload = done.common() | {
        "created": outcome.created,
        "placed_by_content": placed,
        "metadata": {"urls": urls, "commands": commands, "paths": paths},
        "space": space,
    }
    if opts.json:  # the tokenizer takes longer to load than the rest of this command
        payload["tokens"] = count_tokens(text)
    verb = "stored" if outcome.created else "already known, reinforced"
    if outcome.similarity is not None and outcome.similarity < 1.0:
        verb = f"near-duplicate ({outcome.similarity:.0%} similar) of a known fact, reinforced"
    where = f"{node or 'root'}" + (" (placed by its content)" if placed else "")
    if space:
        where = f"space {space}: {where}"
    emit(opts, payload, f"{verb}: {outcome.id} in {where}")


@click.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), help="Most results (default 5).")
@click.option(
    "--tier", type=TIER, help="Search only this tier (default: all; cold includes frozen)."
)
@click.option("--category", help="Only this category and below.")
@click.option("--tag", multiple=True, help="Only memories with this tag (repeatable; or tag:T).")
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    help="Most tokens of the results' text (the best one always, shortened if need be).",
)
@click.option(
    "--mode",
    type=click.Choice(["keyword", "vector", "hybrid"]),
    help="keyword (default), vector or hybrid (the vector extra; default: [retrieval] mode).",
)
@click.option(
    "--llm",
    is_flag=True,
    help="LLM tree search: the [llm] endpoint picks the categories (falls back to keyword).",
)
@click.option(
    "--as-of",
    metavar="DATE",
    help="What was true then (YYYY-MM-DD): later facts left out, later changes undone.",
)
@session_option
@pass_options
def retrieve(
    opts: Options,
    query: str,
    limit: int | None,
    tier: str | None,
    category: str | None,
    tag: tuple[str, ...],
    budget: int | None,
    mode: str | None,
    llm: bool,
    as_of: str | None,
    session: str | None,
) -> None:
    """Find memories through the tree, with the reason each was found."""
    if not query.strip():
        raise InvalidInput("query is empty")
    as_of_ts = temporal.parse_day(as_of) if as_of else None
    with opts.open(create=session is not None) as mem:  # a session's first turn creates
        result = mem.retrieve(
            query,
            limit=limit,
            tier=tier,
            category=category,
            budget=budget,
            mode=mode,
            llm=llm,
            tags=tag,
            as_of=as_of_ts,
        )
        if session and not mem.read_only:
            hygiene.track_result(mem, session, result)
    emit(opts, retrieval_payload(result), lambda: render_retrieval(result))


@click.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@pass_options
def cold(opts: Options, query: str, limit: int) -> None:
    """Search the cold archive (cold and frozen facts)."""
    with opts.open() as mem:
        result = mem.retrieve(query, limit=limit, tier="cold")
    emit(opts, retrieval_payload(result), lambda: render_retrieval(result))


@click.command()
@click.argument("memory_id")
@pass_options
def get(opts: Options, memory_id: str) -> None:
    """Show one memory with its metadata and score."""
    with opts.open() as mem:
        memory = mem.get(memory_id)
        score = memory.score(mem.now(), mem.cfg.scoring)
        tags = hygiene.extras_for(mem, [memory_id]).get(memory_id, ((), None))[0]
        related = links.linked(mem, [memory_id]).get(memory_id, [])
    payload = record_dict(memory) | {"score": score, "tags": list(tags), "related_to": related}
    emit(opts, payload, lambda: render_record(payload))


def render_record(record: dict[str, Any]) -> str:
    """One memory as lines: dates as dates, each URL, command and path on its own line."""
    lines = [
        f"id:           {record['id']}",
        f"text:         {record['text']}",
        f"category:     {record['category']}",
        f"tier:         {record['tier']}",
        f"importance:   {record['importance']:.2f}",
        f"score:        {record['score']:.2f}",
        f"created:      {when(record['created_at'])}",
        f"last access:  {when(record['last_access'])}",
        f"accesses:     {record['access_count']}",
        f"source:       {record['source'] or '-'}",
    ]
    for key, label in (("urls", "url"), ("commands", "command"), ("paths", "path")):
        lines += [f"{label + ':':<13} {value}" for value in record["metadata"][key]]
    if record.get("tags"):
        lines.append(f"tags:         {', '.join(record['tags'])}")
    lines += [f"related to:   {other}" for other in record.get("related_to", [])]
    return "\n".join(lines)


def retrieval_payload(result: RetrievalResult) -> dict[str, Any]:
    return {
        "query": result.query,
        "terms": result.terms,
        "tree_matches": [{"path": c.path, "reason": c.reason} for c in result.categories],
        "candidates": result.candidates,
        "budget": result.budget,
        "tokens": result.tokens,
        "notes": result.notes,
        "mode": result.mode,
        "time_windows": result.time_windows,
        "results": [
            record_dict(h.memory)
            | {
                "explanation": dataclasses.asdict(h.explanation)
                | {"matched_terms": list(h.explanation.matched_terms)}
            }
            for h in result.hits
        ],
    }


def _relevance(e: Explanation) -> str:
    """What matched and how well; a query of tags alone has no words to match, only a filter."""
    if e.found_by == "tag" and not e.matched_terms:
        return f"tag filter {', '.join(e.matched_tags) or '-'} (no words to rank by)"
    return f"matched {', '.join(e.matched_terms) or '-'}; relevance {e.relevance:.2f}"


def _source(e: Explanation) -> str:
    """The shared space a result came from, with its writer ('' for the agent's own)."""
    if e.space is None:
        return ""
    return f" [space {e.space}" + (f", by {e.written_by}]" if e.written_by else "]")


def render_retrieval(result: RetrievalResult) -> str:
    lines = [f"note: {n}" for n in result.notes] if result.hits else []
    lines += [f"time: {w}" for w in result.time_windows]
    for c in result.categories:
        lines.append(f"tree: {c.path} ({c.reason})")
    if not result.hits:
        lines.append(
            "no memories found" + (f" ({'; '.join(result.notes)})" if result.notes else "")
        )
    for i, hit in enumerate(result.hits, 1):
        e = hit.explanation
        lines.append(f"{i}. [{e.tier}]{_source(e)} {hit.memory.text}")
        why = f"   path {e.path or 'root'}; " + _relevance(e)
        if e.scope_boost != 1.0:
            why += f"; own memory x{e.scope_boost:g}"
        if e.similarity is not None:
            why += f" (similarity {e.similarity:.2f}, found by {e.found_by})"
        if e.category_boost:
            why += f" +{e.category_boost:.0%} category"
        if e.time_boost:
            why += f" +{e.time_boost:.0%} time {e.time_match}"
        if e.tags:
            why += f"; tags {', '.join(e.tags)}"
        why += f"; tier score {e.tier_score:.2f}; id {hit.memory.id}"
        lines.append(why)
        if e.llm_reason:
            lines.append(f"   LLM: {e.llm_reason}")
        if e.via:
            lines.append(f"   via {e.via}")
        if e.supersession:
            lines.append(f"   {e.supersession}")
    if result.budget:
        lines.append(f"{result.tokens}/{result.budget} tokens")
    return "\n".join(lines)
