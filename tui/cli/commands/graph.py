"""`tiermem graph`: the knowledge graph of entities and relations, what held when, and
corrections by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from tiermem.core import graph as graphmod
from tiermem.core import scoped
from tiermem.core.graph import edit, view
from tiermem.core.graph.dates import parse_when
from tiermem.core.graph.extract import KINDS
from tiermem.tui.cli.options import Options, emit, pass_options

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

AT_HELP = "As of this date (YYYY-MM-DD, YYYY-MM, Unix seconds or e.g. 'March 3')."


@click.group(name="graph")
def graph_group() -> None:
    """The knowledge graph: entities, relations with time spans, search, merge."""


@graph_group.command()
@click.option("--kind", type=click.Choice(list(KINDS)), help="Only entities of this kind.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@pass_options
def entities(opts: Options, kind: str | None, limit: int) -> None:
    """Entities, most mentioned first."""
    with opts.open() as mem:
        found = graphmod.store_for(mem).entities(kind=kind, limit=limit)
    payload = {"entities": [e.as_dict() for e in found]}
    lines = [f"{e.name} ({e.kind}) · {e.mentions} mentions · {e.id}" for e in found]
    emit(opts, payload, "\n".join(lines) or "no entities yet")


@graph_group.command()
@click.argument("name")
@click.option("--at", "at", metavar="DATE", help=AT_HELP)
@pass_options
def show(opts: Options, name: str, at: str | None) -> None:
    """One entity: aliases, relations with their time spans (with --at, those that held
    then), what mentions it."""
    with opts.open() as mem:
        payload = view.entity_view(mem, name, _when(mem, at))
    lines = [f"{payload['name']} ({payload['kind']}) · {payload['id']}"]
    if payload["aliases"]:
        lines.append("aliases: " + ", ".join(payload["aliases"]))
    if at and not payload["relations"]:
        lines.append(f"  nothing held on {payload['at']}")
    lines += ["  " + view.relation_line(r) for r in payload["relations"]]
    lines += [f"  memory {m['id']}: {m['text'][:100]}" for m in payload["memories"]]
    lines += [f"  episode {e['id']}: {e['abstract']}" for e in payload["episodes"]]
    emit(opts, payload, "\n".join(lines))


@graph_group.command()
@click.option("--entity", help="Only the relations of this entity.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@pass_options
def relations(opts: Options, entity: str | None, limit: int) -> None:
    """Relations, newest first, with their time spans (a closed one keeps its history)."""
    with opts.open() as mem:
        graph = graphmod.store_for(mem)
        entity_id = graph.find(entity).id if entity else None
        found = view.relation_dicts(mem, graph.edges(entity_id, limit))
    emit(
        opts, {"relations": found}, "\n".join(map(view.relation_line, found)) or "no relations yet"
    )


@graph_group.command()
@click.argument("query")
@click.option("--at", "at", metavar="DATE", help=AT_HELP)
@pass_options
def search(opts: Options, query: str, at: str | None) -> None:
    """A question ("where does Sam live", "who is my manager"): the answer that holds, then
    what held before; else entities whose names contain the query, with their relations."""
    with opts.open() as mem:
        payload = scoped.graph_search(mem, query, at=_when(mem, at))
    emit(opts, payload, lambda: _search_text(payload))


def _search_text(payload: dict[str, Any]) -> str:
    if "answer" in payload:
        return "\n".join(payload["answer"]) or "nothing known" + (
            f" on {payload['at']}" if payload["at"] else ""
        )
    lines = [
        f"{e['name']} ({e['kind']}) · {e['mentions']} mentions{_from(e)}"
        for e in payload["entities"]
    ]
    lines += ["  " + view.relation_line(r) + _from(r) for r in payload["relations"]]
    return "\n".join(lines) or "no entities found"


def _from(item: dict[str, Any]) -> str:
    return f" [space {item['space']}]" if item.get("space") else ""


@graph_group.command()
@click.argument("entity")
@pass_options
def timeline(opts: Options, entity: str) -> None:
    """An entity's relations in time order, each with the window it held in."""
    with opts.open() as mem:
        payload = view.timeline(mem, entity)
    lines = [f"{payload['name']} ({payload['kind']})"]
    lines += ["  " + view.relation_line(r) for r in payload["relations"]]
    emit(opts, payload, "\n".join(lines) if payload["relations"] else lines[0] + "\n  no relations")


@graph_group.command()
@click.argument("subject")
@click.argument("predicate")
@click.argument("object_", metavar="OBJECT")
@click.option("--since", metavar="DATE", help="When it began (default: now).")
@pass_options
def add(opts: Options, subject: str, predicate: str, object_: str, since: str | None) -> None:
    """State SUBJECT PREDICATE OBJECT ("User lives_in Leeds"); a slot's older value ends
    where it begins. "I" or "me" is the user."""
    with opts.open() as mem:
        payload = edit.add(mem, subject, predicate, object_, _when(mem, since))
    said = f"{subject} → {edit.predicate_of(predicate)} → {object_}"
    text = f"added {said} ({payload['relation']})" if payload["added"] else f"already known: {said}"
    if payload["closed"]:
        text += "\nended: " + ", ".join(payload["closed"])
    emit(opts, payload, text)


@graph_group.command()
@click.argument("target", nargs=-1, required=True, metavar="EDGE_ID | SUBJECT PREDICATE [OBJECT]")
@click.option("--at", "at", metavar="DATE", help="When it ended (default: now).")
@pass_options
def invalidate(opts: Options, target: tuple[str, ...], at: str | None) -> None:
    """End a relation: by its id (`re-…`), or whatever holds of SUBJECT PREDICATE [OBJECT]."""
    with opts.open() as mem:
        payload = edit.invalidate(mem, list(target), _when(mem, at))
    emit(opts, payload, "ended: " + ", ".join(payload["closed"]))


def _when(mem: Memory, text: str | None) -> float | None:
    return None if text is None else parse_when(text, mem.now())


@graph_group.command()
@click.argument("keep")
@click.argument("other")
@pass_options
def merge(opts: Options, keep: str, other: str) -> None:
    """Merge entity OTHER into KEEP: its names become aliases, its relations move over."""
    with opts.open() as mem, mem.db.transaction():
        merged = graphmod.store_for(mem).merge(keep, other, mem.now())
    emit(opts, merged.as_dict(), f"merged {other!r} into {merged.name} ({merged.id})")


@graph_group.command()
@pass_options
def build(opts: Options) -> None:
    """Extract entities and relations from the memories not yet in the graph."""
    with opts.open() as mem:
        report = graphmod.index_memories(mem, limit=None)
    emit(
        opts,
        report.as_dict(),
        f"{report.texts} memories read: {len(report.entities)} entities, "
        f"{report.relations} new relations",
    )
