"""Correcting the graph by hand (a person, or an agent that knows better): state a relation,
which takes its place in its slot like any other, or end one (by id, or by what it says)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.graph import slots, store_for
from tiermem.core.graph.extract import OWNER, Relation
from tiermem.core.graph.names import name_key, tool
from tiermem.core.graph.store import Edge, GraphStore
from tiermem.core.graph.validity import negate, state

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

SOURCE = "manual"
_PREDICATE = re.compile(r"[a-z][a-z0-9_]{0,60}")
_SELF = frozenset({"i", "me", "user", "myself"})


def predicate_of(text: str) -> str:
    """A predicate as typed ("lives in", "uses-database") in its stored form (lives_in)."""
    predicate = re.sub(r"[\s-]+", "_", text.strip().casefold())
    if not _PREDICATE.fullmatch(predicate):
        raise InvalidInput(
            f"not a predicate: {text!r} (use snake_case words, e.g. lives_in, works_at, "
            "uses_database)"
        )
    return predicate


def _entity(graph: GraphStore, name: str, kind: str, now: float) -> str:
    name = " ".join(name.split())
    if not name_key(name):
        raise InvalidInput(f"an entity name needs letters or digits: {name!r}")
    if name.casefold() in _SELF:
        name = OWNER
    known = tool(name) if kind == "tool" else None
    return graph.resolve(known[0] if known else name, kind, now)


def add(mem: Memory, subject: str, predicate: str, obj: str, since: float | None) -> dict[str, Any]:
    """Record `subject predicate object` from `since` (default now): the slot's older value
    ends there, a later one ends this."""
    mem.require_memory()
    pred = predicate_of(predicate)
    meaning = slots.slot(pred)
    graph = store_for(mem)
    now = mem.now()
    with mem.db.transaction():
        s = _entity(graph, subject, meaning.subject_kind if meaning else "other", now)
        o = _entity(graph, obj, meaning.object_kind if meaning else "other", now)
        if s == o:
            raise InvalidInput("a relation joins two different entities")
        outcome = state(graph, Relation(subject, pred, obj, since or now), s, o, SOURCE, now)
    return {
        "added": outcome.added,
        "relation": outcome.edge.id if outcome.edge else None,
        "closed": [c.old.id for c in outcome.closed if c.old.id != (outcome.edge or c.old).id],
    }


def invalidate(mem: Memory, target: list[str], at: float | None) -> dict[str, Any]:
    """End a relation at `at` (default now): one by id (`re-…`), or every relation that holds
    of SUBJECT PREDICATE [OBJECT]."""
    graph = store_for(mem)
    when = mem.now() if at is None else at
    with mem.db.transaction():
        if len(target) == 1:
            return {"closed": [_end_one(graph, graph.edge(target[0]), when)]}
        if len(target) not in (2, 3):
            raise InvalidInput("give a relation id, or SUBJECT PREDICATE [OBJECT]")
        subject = graph.find(OWNER if target[0].casefold() in _SELF else target[0]).id
        obj = graph.find(target[2]).id if len(target) == 3 else ""
        pred = predicate_of(target[1])
        outcome = negate(graph, subject, pred, obj, when, SOURCE)
        closed = [c.old.id for c in outcome.closed]
        if not closed:  # raised inside the transaction: the negation is not kept
            raise NotFound(f"nothing holds of {' '.join(target)!r} at that date")
    return {"closed": closed}


def _end_one(graph: GraphStore, edge: Edge, at: float) -> str:
    if edge.valid_to is not None and edge.valid_to <= at:
        raise InvalidInput(f"relation {edge.id} already ended")
    if edge.valid_from is not None and at < edge.valid_from:
        raise InvalidInput(f"relation {edge.id} began after that date")
    graph.end(edge, at)
    return edge.id
