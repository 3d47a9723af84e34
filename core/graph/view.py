"""The graph as people and front ends read it: an entity with its relations (names, time spans)
and the memories and episodes that mention it; relations as lines; search by name."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from tiermem.core import episodes
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.graph import store_for
from tiermem.core.graph.store import Edge, Entity

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

SHOWN = 20


def day(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts)) if ts is not None else ""


def span(edge: Edge) -> str:
    """ "2026-01-04 – 2026-03-01", "since 2026-03-01", "until 2026-03-01"."""
    start, end = day(edge.valid_from), day(edge.valid_to)
    if start and end:
        return f"{start} – {end}"
    if end:
        return f"until {end}"
    return f"since {start}" if start else ""


def relation_dicts(mem: Memory, edges: list[Edge]) -> list[dict[str, Any]]:
    names = store_for(mem).names({e.subject for e in edges} | {e.object for e in edges})
    return [
        {
            "id": e.id,
            "subject": names.get(e.subject, e.subject),
            "predicate": e.predicate,
            "object": names.get(e.object, e.object),
            "valid_from": day(e.valid_from) or None,
            "valid_to": day(e.valid_to) or None,
            "current": e.current,
            "span": span(e),
            "source": e.source,
        }
        for e in edges
    ]


def relation_line(r: dict[str, Any]) -> str:
    when = f" ({r['span']})" if r["span"] else ""
    return f"{r['subject']} → {r['predicate']} → {r['object']}{when}"


def entity_view(mem: Memory, name: str) -> dict[str, Any]:
    """One entity: its names, relations (newest first) and what mentions it."""
    graph = store_for(mem)
    entity = graph.find(name)
    memory_ids = graph.mentioned_in(entity.id, "memory", SHOWN)
    found = {m.id: m for m in mem.memories.get_many(memory_ids)} if memory_ids else {}
    shown_episodes = []
    for ref in graph.mentioned_in(entity.id, "episode", SHOWN):
        try:
            shown_episodes.append(episodes.get(mem.db, mem.agent_id, ref))
        except NotFound:
            continue
    return entity.as_dict() | {
        "relations": relation_dicts(mem, graph.edges(entity.id)),
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


def search(mem: Memory, query: str, limit: int = 20) -> dict[str, Any]:
    """Entities whose names contain the query, and their relations."""
    if not query.strip():
        raise InvalidInput("query is empty")
    graph = store_for(mem)
    found: list[Entity] = graph.entities(query=query, limit=limit)
    edges: dict[str, Edge] = {}
    for entity in found:
        for edge in graph.edges(entity.id, SHOWN):
            edges.setdefault(edge.id, edge)
    return {
        "query": query,
        "entities": [e.as_dict() for e in found],
        "relations": relation_dicts(mem, list(edges.values())),
    }
