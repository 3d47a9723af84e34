"""The graph as people and front ends read it: an entity with its relations (names, time spans)
and the memories and episodes that mention it; relations as lines; search by name or by
question ("where does Sam live": the current answer first, then what held before); what was
true at a date; an entity's timeline."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tiermem.core import episodes
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.graph import history, question, slots, store_for
from tiermem.core.graph.history import at_time, holds
from tiermem.core.graph.store import Edge, Entity, GraphStore

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

SHOWN = 20


def day(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts)) if ts is not None else ""


def span(edge: Edge) -> str:
    """ "2026-01-04 – 2026-03-01", "since 2026-03-01", "until 2026-03-01", "ended 2026-03-01",
    "planned from 2026-03-01", "corrected"."""
    start, end = day(edge.valid_from), day(edge.valid_to)
    if "negated" in edge.flags:
        return f"ended {start}" if start else "ended"
    if "corrected" in edge.flags:
        return "corrected"
    if "tentative" in edge.flags and edge.valid_to is None:
        return f"planned from {start}" if start else "planned"
    if start and end:
        return f"{start} – {end}"
    if end:
        return f"until {end}"
    return f"since {start}" if start else ""


def relation_dicts(mem: Memory, edges: list[Edge], at: float | None = None) -> list[dict[str, Any]]:
    names = store_for(mem).names({e.subject for e in edges} | {e.object for e in edges})
    when = mem.now() if at is None else at
    return [
        {
            "id": e.id,
            "subject": names.get(e.subject, e.subject),
            "predicate": e.predicate,
            "object": names.get(e.object, e.object),
            "valid_from": day(e.valid_from) or None,
            "valid_to": day(e.valid_to) or None,
            "current": holds(e, when),
            "span": span(e),
            "flags": sorted(e.flags),
            "source": e.source,
            "text": slots.sentence(
                names.get(e.subject, e.subject), e.predicate, names.get(e.object, e.object)
            ),
        }
        for e in edges
    ]


def relation_line(r: dict[str, Any]) -> str:
    when = f" ({r['span']})" if r["span"] else ""
    return f"{r['subject']} → {r['predicate']} → {r['object']}{when}"


def entity_view(mem: Memory, name: str, at: float | None = None) -> dict[str, Any]:
    """One entity: its names, relations (newest first; with `at`, those that held then) and
    what mentions it."""
    graph = store_for(mem)
    entity = graph.find(name)
    edges = graph.edges(entity.id)
    if at is not None:
        holding = {e.id for e in at_time(edges, at)}
        edges = [e for e in edges if e.id in holding]
    memory_ids = graph.mentioned_in(entity.id, "memory", SHOWN)
    found = {m.id: m for m in mem.memories.get_many(memory_ids)} if memory_ids else {}
    shown_episodes = []
    for ref in graph.mentioned_in(entity.id, "episode", SHOWN):
        try:
            shown_episodes.append(episodes.get(mem.db, mem.agent_id, ref))
        except NotFound:
            continue
    return entity.as_dict() | {
        "at": day(at) or None,
        "relations": relation_dicts(mem, edges, at),
        "memories": [
            {"id": i, "text": found[i].text, "tier": found[i].tier}
            for i in memory_ids
            if i in found
        ],
        "episodes": [
            {"id": e.id, "abstract": e.abstract, "started_at": episodes.iso(e.started_at)}
            for e in shown_episodes
        ],
    }


def search(mem: Memory, query: str, limit: int = 20, at: float | None = None) -> dict[str, Any]:
    """A question ("where does Sam live") answered from the relations of whom it names, the
    one that holds first; else the entities whose names contain the query, and their
    relations (with `at`, as they stood then)."""
    if not query.strip():
        raise InvalidInput("query is empty")
    graph = store_for(mem)
    asked = question.parse(query)
    named = question.mentioned_at(graph, query)
    if named and (asked.wh or asked.predicates):
        return answer(mem, graph, query, asked, named[0], at)
    found: list[Entity] = graph.entities(query=query, limit=limit)
    edges: dict[str, Edge] = {}
    for entity in found:
        for edge in graph.edges(entity.id, SHOWN):
            edges.setdefault(edge.id, edge)
    shown = list(edges.values())
    if at is not None:
        shown = at_time(shown, at)
        kept = {e.subject for e in shown} | {e.object for e in shown}
        found = [e for e in found if e.id in kept]
    return {
        "query": query,
        "at": day(at) or None,
        "entities": [e.as_dict() for e in found],
        "relations": relation_dicts(mem, shown, at),
    }


def answer(
    mem: Memory,
    graph: GraphStore,
    query: str,
    asked: question.Question,
    named: tuple[str, int],
    at: float | None,
) -> dict[str, Any]:
    """The relations that answer a question about one entity: what holds at `at` (default
    now) first, then what held before, each with its window, then plans not yet due."""
    entity_id, position = named
    backwards = question.inverse(query, position, asked.predicates)
    side = "object" if backwards else "subject"
    when = mem.now() if at is None else at
    edges = [
        e
        for e in graph.edges(entity_id)
        if getattr(e, side) == entity_id
        and question.wanted(e.predicate, asked.predicates)
        and "negated" not in e.flags
    ]
    current = at_time(edges, when)
    started = [e for e in edges if e not in current and (e.valid_from or 0.0) <= when]
    earlier = [e for e in started if "tentative" not in e.flags or e.valid_to is not None]
    plans = [e for e in edges if "tentative" in e.flags and e not in current and e not in earlier]
    if at is not None:
        plans = []
    earlier.sort(key=lambda e: (e.valid_to or when, e.valid_from or 0.0), reverse=True)
    entity = graph.entities(ids=[entity_id])
    rows = {
        "current": relation_dicts(mem, current, at),
        "history": relation_dicts(mem, earlier, at),
        "planned": relation_dicts(mem, plans, at),
    }
    lines = [f"{r['text']} ({r['span']})" if r["span"] else r["text"] for r in rows["current"]]
    lines += [f"before: {r['text']} ({r['span']})" for r in rows["history"]]
    lines += [f"plan: {r['text']} ({r['span']})" for r in rows["planned"]]
    return {
        "query": query,
        "at": day(at) or None,
        "question": {
            "about": entity[0].name if entity else entity_id,
            "predicates": list(asked.predicates),
            "inverse": backwards,
        },
        "answer": lines,
        **rows,
        "entities": [e.as_dict() for e in entity],
        "relations": rows["current"] + rows["history"] + rows["planned"],
    }


def timeline(mem: Memory, name: str) -> dict[str, Any]:
    """An entity's relations (either side) in time order, each with its window."""
    graph = store_for(mem)
    entity = graph.find(name)
    edges = timeline_edges(graph, entity.id)
    return entity.as_dict() | {"relations": relation_dicts(mem, edges)}


def timeline_edges(graph: GraphStore, entity_id: str) -> list[Edge]:
    return history.timeline(graph.edges(entity_id, 1000))
