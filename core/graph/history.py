"""What was true when: the relations that held at a moment (a slot shows its one value then),
an entity's timeline, and the short lines of current facts a context block carries ("User
lives in Leeds since 2026-10-19 (before: Manchester)")."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from tiermem.core.db import Database
from tiermem.core.graph import question, slots
from tiermem.core.graph.dates import iso
from tiermem.core.graph.extract import OWNER
from tiermem.core.graph.store import Edge, GraphStore

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

_NEVER = float("-inf")


def holds(edge: Edge, at: float) -> bool:
    """The relation was so at `at`: a fact within its window, a plan only from its date on
    (an undated plan never), a negation or a what-if never."""
    if edge.flags & {"negated", "corrected", "hypothetical"}:
        return False
    if "tentative" in edge.flags and edge.valid_from is None:
        return False
    started = edge.valid_from is None or edge.valid_from <= at
    return started and (edge.valid_to is None or at < edge.valid_to)


def _slot_key(edge: Edge) -> tuple[str, str] | None:
    side = slots.exclusive(edge.predicate)
    if side == "subject":
        return (edge.subject, edge.predicate)
    if side == "object":
        return (edge.object, edge.predicate)
    return None


def at_time(edges: Iterable[Edge], at: float) -> list[Edge]:
    """The relations that held at `at`; of a slot only its latest value then (a plan that came
    due outranks the fact it would replace, a fact outranks a plan of the same date)."""
    best: dict[tuple[str, str], Edge] = {}
    out: list[Edge] = []
    for edge in edges:
        if not holds(edge, at):
            continue
        key = _slot_key(edge)
        if key is None:
            out.append(edge)
            continue
        known = best.get(key)
        if known is None or _rank(edge) > _rank(known):
            best[key] = edge
    return out + list(best.values())


def _rank(edge: Edge) -> tuple[float, int, float]:
    start = edge.valid_from if edge.valid_from is not None else _NEVER
    return (start, 0 if "tentative" in edge.flags else 1, edge.created_at)


def before(edge: Edge, edges: Iterable[Edge]) -> Edge | None:
    """The value the relation's slot had just before it began."""
    key = _slot_key(edge)
    if key is None or edge.valid_from is None:
        return None
    same = [e for e in edges if e.id != edge.id and _slot_key(e) == key and e.firm]
    held = at_time(same, edge.valid_from - 1.0)
    return held[0] if held else None


def timeline(edges: Iterable[Edge]) -> list[Edge]:
    """Relations in time order: by when they began (or were learnt)."""
    return sorted(
        edges,
        key=lambda e: (
            e.valid_from if e.valid_from is not None else e.created_at,
            e.created_at,
            e.id,
        ),
    )


def fact_line(edge: Edge, names: dict[str, str], previous: Edge | None) -> str:
    """'User lives in Leeds since 2026-10-19 (before: Manchester)'."""
    text = slots.sentence(
        names.get(edge.subject, edge.subject), edge.predicate, names.get(edge.object, edge.object)
    )
    if edge.valid_from is not None:
        text += f" since {iso(edge.valid_from)}"
    if "tentative" in edge.flags:
        text += " (planned)"
    if previous is not None:
        text += f" (before: {names.get(previous.object, previous.object)})"
    return text


def current_facts(
    source: Database | Memory,
    agent: str,
    query: str,
    at: float | None,
    limit: int,
    answered: Mapping[str, float] | None = None,
) -> list[str]:
    """Short lines of the facts that hold at `at` (default now) about what `query` names (the
    user when it says "I", "my", or names nothing the graph knows), with what each replaced:
    for an agent's context block. `answered`: predicates a newer statement answers, with its
    date; a fact of one that began before it is left out (the graph did not read the change)."""
    db = source if isinstance(source, Database) else source.db
    graph = GraphStore(db, agent)
    when = at if at is not None else _now(source)
    asked = question.parse(query)
    owner = graph.lookup(OWNER)
    ids = question.mentioned(graph, query) or ([owner] if owner else [])
    lines: list[str] = []
    for entity_id in ids:
        edges = graph.edges(entity_id)
        holding = [
            e
            for e in at_time(edges, when)
            if e.subject == entity_id
            or (e.object == entity_id and slots.exclusive(e.predicate) == "object")
        ]
        if answered:
            holding = [e for e in holding if not _older_than_answer(e, answered)]
        if asked and asked.predicates:
            wanted = [e for e in holding if question.wanted(e.predicate, asked.predicates)]
            holding = wanted or holding
        if not holding:
            continue
        names = graph.names(
            {e.subject for e in holding} | {e.object for e in holding} | {e.object for e in edges}
        )
        for edge in sorted(
            holding, key=lambda e: (slots.exclusive(e.predicate) is None, e.predicate)
        ):
            lines.append(fact_line(edge, names, before(edge, edges)))
            if len(lines) >= limit:
                return lines
    return lines


def _older_than_answer(edge: Edge, answered: Mapping[str, float]) -> bool:
    said = answered.get(edge.predicate)
    began = edge.valid_from if edge.valid_from is not None else edge.created_at
    return said is not None and began < said


def _now(source: Database | Memory) -> float:
    return source.now() if not isinstance(source, Database) else time.time()
