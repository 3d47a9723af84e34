"""`tiermem graph`: the knowledge graph of entities and relations."""

from __future__ import annotations

import click

from tiermem.core import graph as graphmod
from tiermem.core.graph import view
from tiermem.core.graph.extract import KINDS
from tiermem.tui.cli.options import Options, emit, pass_options


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
@pass_options
def show(opts: Options, name: str) -> None:
    """One entity: aliases, relations with their time spans, what mentions it."""
    with opts.open() as mem:
        payload = view.entity_view(mem, name)
    lines = [f"{payload['name']} ({payload['kind']}) · {payload['id']}"]
    if payload["aliases"]:
        lines.append("aliases: " + ", ".join(payload["aliases"]))
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
@pass_options
def search(opts: Options, query: str) -> None:
    """Entities whose names contain the query, with their relations."""
    with opts.open() as mem:
        payload = view.search(mem, query)
    lines = [f"{e['name']} ({e['kind']}) · {e['mentions']} mentions" for e in payload["entities"]]
    lines += ["  " + view.relation_line(r) for r in payload["relations"]]
    emit(opts, payload, "\n".join(lines) or "no entities found")


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
