"""When a relation holds: a new value of a slot closes the old one where it begins (so the
history stays), whatever order the statements arrive in; a negation closes with no successor;
a plan closes nothing; a correction replaces the wrong statement at once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tiermem.core.graph import slots
from tiermem.core.graph.extract import CORRECTION, NEGATED, PAST, TENTATIVE, Relation
from tiermem.core.graph.store import Edge, GraphStore


@dataclass(frozen=True)
class Closed:
    """A relation another one ended (`new` is None for a negation)."""

    old: Edge
    new: Edge | None
    at: float
    by: str
    """The source of the statement that ended it (the negation's, when `new` is None)."""


@dataclass
class Outcome:
    """What recording one relation did."""

    added: bool = False
    closed: list[Closed] = field(default_factory=list)
    edge: Edge | None = None
    """The relation recorded."""


def relate(
    graph: GraphStore,
    r: Relation,
    subject: str,
    obj: str,
    source: str,
    now: float,
    replaces: str | None = None,
) -> Outcome:
    """Record a relation (entity ids `subject` and `obj`, `obj` "" for a negation that names
    no value) read from `source` at `now`, the text's date."""
    if NEGATED in r.flags:
        at = r.valid_from or r.valid_to or now
        return negate(graph, subject, r.predicate, obj, at, source, now)
    if CORRECTION in r.flags:
        return _correct(graph, r, subject, obj, source, now, replaces)
    if TENTATIVE in r.flags:
        return _plan(graph, r, subject, obj, source, now)
    if PAST in r.flags:
        return _past(graph, r, subject, obj, source, now)
    out = state(graph, r, subject, obj, source, now)
    if replaces and out.added:
        _replace(graph, out, subject, r.predicate, replaces, source, now, r.valid_from or now)
    return out


def _edge(
    graph: GraphStore,
    subject: str,
    predicate: str,
    obj: str,
    span: tuple[float | None, float | None],
    source: str,
    now: float,
    flags: frozenset[str] = frozenset(),
) -> Edge:
    tag = ",".join(sorted(flags - {CORRECTION}))
    rid = graph.edge_id(subject, predicate, obj, span[0], tag)
    return Edge(rid, subject, predicate, obj, span[0], span[1], source, flags, now)


def state(
    graph: GraphStore,
    r: Relation,
    subject: str,
    obj: str,
    source: str,
    now: float,
    flags: frozenset[str] = frozenset(),
) -> Outcome:
    """A fact: known already, or recorded and put in its place in its slot's history."""
    begins = r.valid_from
    if begins is None and r.valid_to is None:
        begins = now  # a relation stated without dates holds from when it was learnt
    edge = _edge(graph, subject, r.predicate, obj, (begins, r.valid_to), source, now, flags)
    if graph.has(edge.id) or (r.valid_to is None and _open(graph, subject, r.predicate, obj)):
        return Outcome()
    out = Outcome(added=True)
    for plan in _open(graph, subject, r.predicate, obj, firm=False):
        if TENTATIVE in plan.flags:  # a plan that came true
            graph.end(plan, max(begins or now, plan.valid_from or now))
    side = slots.exclusive(r.predicate)
    if side and begins is not None:
        edge = _settle(graph, edge, side, out)
    graph.insert(edge)
    out.edge = edge
    return out


def _open(
    graph: GraphStore, subject: str, predicate: str, obj: str, firm: bool = True
) -> list[Edge]:
    """The open relations saying this (facts, or with `firm` False the others)."""
    found = graph.select(
        "agent_id = ? AND subject = ? AND predicate = ? AND object = ? AND valid_to IS NULL",
        [graph.agent, subject, predicate, obj],
    )
    return [e for e in found if e.firm == firm]


def _settle(graph: GraphStore, edge: Edge, side: str, out: Outcome) -> Edge:
    """Close what the new relation follows; end it where a later known one (or a later
    negation) begins."""
    begins = edge.valid_from if edge.valid_from is not None else 0.0
    anchor = edge.object if side == "object" else edge.subject
    rows = graph.slot(anchor, edge.predicate, by_object=side == "object")
    if side == "subject":  # "I left Globex" says no predicate: it ends whichever held
        rows += graph.slot(anchor, "")
    mine = edge.subject if side == "object" else edge.object
    successor: Edge | None = None
    ends = edge.valid_to
    for row in rows:
        other = row.subject if side == "object" else row.object
        if NEGATED in row.flags:
            stop = _stops(row, edge, begins)
            if other in (mine, "") and stop is not None and (ends is None or stop < ends):
                ends, successor = stop, row
            continue
        if other == mine or not row.firm:
            continue
        start = row.valid_from
        if start is not None and start > begins:
            if ends is None or start < ends:
                ends, successor = start, row
        elif row.valid_to is None or row.valid_to > begins:
            graph.end(row, begins)
            out.closed.append(Closed(row, edge, begins, edge.source))
    if successor is not None and ends is not None:
        edge = Edge(**{**edge.__dict__, "valid_to": ends})
        new = None if NEGATED in successor.flags else successor
        out.closed.append(Closed(edge, new, ends, successor.source))
    return edge


def _stops(marker: Edge, edge: Edge, begins: float) -> float | None:
    """Where a known negation ends a statement that arrives after it: one dated before the
    negation, or said before it."""
    at = marker.valid_from
    if at is None or (at <= begins and marker.created_at <= edge.created_at):
        return None
    return max(at, begins)


def negate(
    graph: GraphStore,
    subject: str,
    predicate: str,
    obj: str,
    at: float,
    source: str,
    said: float | None = None,
) -> Outcome:
    """End what a negation (said at `said`) says is no longer so ("I left Acme": works_at
    Acme, at `at`); an empty predicate or object ends any. A statement made before the
    negation ends even if it was only learnt after `at`. A marker row keeps the negation, so
    a statement of the old fact that arrives later still ends there."""
    said = at if said is None else said
    marker = _edge(graph, subject, predicate, obj, (at, at), source, at, frozenset({NEGATED}))
    if graph.has(marker.id):
        return Outcome()
    out = Outcome(added=True)
    where, params = "agent_id = ? AND subject = ?", [graph.agent, subject]
    if predicate:
        where += " AND predicate = ?"
        params.append(predicate)
    if obj:
        where += " AND object = ?"
        params.append(obj)
    for row in graph.select(where, params):
        if NEGATED in row.flags or (row.valid_to is not None and row.valid_to <= at):
            continue
        if TENTATIVE in row.flags:
            graph.end(row, max(at, row.valid_from or at))
        elif row.valid_from is None or row.valid_from <= at or row.created_at <= said:
            ends = max(at, row.valid_from or at)
            graph.end(row, ends)
            out.closed.append(Closed(row, None, ends, source))
    graph.insert(marker)
    return out


def _plan(
    graph: GraphStore, r: Relation, subject: str, obj: str, source: str, now: float
) -> Outcome:
    """A plan or hypothesis: recorded, never closing anything."""
    edge = _edge(graph, subject, r.predicate, obj, (r.valid_from, r.valid_to), source, now, r.flags)
    if graph.has(edge.id) or _open(graph, subject, r.predicate, obj, firm=False):
        return Outcome()
    graph.insert(edge)
    return Outcome(added=True)


def _past(
    graph: GraphStore, r: Relation, subject: str, obj: str, source: str, now: float
) -> Outcome:
    """'I used to live in Leeds': an open statement of it ends; else it is kept as history."""
    ends = r.valid_to if r.valid_to is not None else now
    if _open(graph, subject, r.predicate, obj):
        return negate(graph, subject, r.predicate, obj, ends, source)
    if any(e.object == obj for e in graph.slot(subject, r.predicate)):
        return Outcome()
    edge = _edge(graph, subject, r.predicate, obj, (r.valid_from, ends), source, now)
    if graph.has(edge.id):
        return Outcome()
    graph.insert(edge)
    return Outcome(added=True)


def _replace(
    graph: GraphStore,
    out: Outcome,
    subject: str,
    predicate: str,
    old: str,
    source: str,
    now: float,
    at: float,
) -> None:
    """'From A to B': A ends where B begins; A is kept as history when the graph lacked it."""
    rows = [e for e in graph.slot(subject, predicate) if e.object == old]
    for row in rows:
        if not row.firm or (row.valid_to is not None and row.valid_to <= at):
            continue
        if row.valid_from is None or row.valid_from <= at:
            graph.end(row, at)
            out.closed.append(Closed(row, out.edge, at, source))
    if not rows:
        graph.insert(_edge(graph, subject, predicate, old, (None, at), source, now))


def _correct(
    graph: GraphStore,
    r: Relation,
    subject: str,
    obj: str,
    source: str,
    now: float,
    wrong: str | None,
) -> Outcome:
    """A correction: the wrong statement never held (its window closes where it began) and
    the right one holds from then."""
    target = _wrong_statement(graph, subject, r.predicate, obj, wrong)
    if target is None:
        if not (subject and r.predicate):
            return Outcome()
        return state(graph, r, subject, obj, source, now, frozenset({CORRECTION}))
    begins = target.valid_from if target.valid_from is not None else now
    graph.end(target, begins, frozenset({"corrected"}))
    graph.adopt_kind(obj, target.object)
    fixed = Relation(target.subject, target.predicate, obj, begins)
    out = state(graph, fixed, target.subject, obj, source, now, frozenset({CORRECTION}))
    out.closed.insert(0, Closed(target, out.edge, begins, source))
    out.added = True
    return out


def _wrong_statement(
    graph: GraphStore, subject: str, predicate: str, obj: str, wrong: str | None
) -> Edge | None:
    """The open statement a correction replaces: the one naming the wrong value, else the
    subject's latest in the slot, else the latest the graph learnt."""
    where, params = "agent_id = ? AND valid_to IS NULL AND object != ?", [graph.agent, obj]
    if subject:
        where += " AND subject = ?"
        params.append(subject)
    if predicate:
        where += " AND predicate = ?"
        params.append(predicate)
    if wrong:
        where += " AND object = ?"
        params.append(wrong)
    found = [
        e
        for e in graph.select(f"{where} ORDER BY created_at DESC, rowid DESC", params, 20)
        if e.firm
    ]
    return found[0] if found else None


def settle(graph: GraphStore, edge_ids: Iterable[str]) -> list[Closed]:
    """Relations another path wrote as they were (a pull from another device) put in their
    place in their slots: the older value ends where a newer begins, whatever order they came
    in."""
    out = Outcome()
    wanted = sorted(set(edge_ids))
    for start in range(0, len(wanted), 400):
        chunk = wanted[start : start + 400]
        rows = graph.select(
            f"agent_id = ? AND id IN ({','.join('?' * len(chunk))})", [graph.agent, *chunk]
        )
        for edge in rows:
            side = slots.exclusive(edge.predicate)
            if not side or not edge.firm or edge.valid_from is None:
                continue
            placed = _settle(graph, edge, side, out)
            if placed.valid_to is not None and placed.valid_to != edge.valid_to:
                graph.end(edge, placed.valid_to)
    return out.closed
