"""The scopes one search covers: the agent's own memory and the shared spaces it includes
(`core.spaces`), with the tier, category and tag conditions (`Filters`). Each candidate gets
its space from its row id's slot; the agent's own are boosted (`[retrieval] own_boost`); what
is true now is arranged within each scope; each returned memory of a space names its writer.
The knowledge graph and episodes of every scope raise its memories (`graph_signals`), a
question's answer comes from the agent's own memory first, else from a space
(`answers_from_spaces`), and `graph_search` asks every scope's graph. An agent with no space
searches exactly as before: one scope, the same statements."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from tiermem.core import current, spaces
from tiermem.core import tags as tagmod
from tiermem.core.db import Row
from tiermem.core.ranking import Candidate, with_count
from tiermem.core.tree import normalize_path
from tiermem.core.warm import SLOT_BITS, TIERS, MemoryStore, Tier

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.graph.signal import GraphSignals

GraphKinds = tuple[bool, bool]
"""Whether a scope has an entity, and an episode (`ReadCache.view`)."""


@dataclass(frozen=True)
class Filters:
    """The tier, category, chosen-category and tag conditions of one search."""

    store: MemoryStore
    tiers: Sequence[Tier]
    category: str | None
    within: tuple[str, ...] = ()
    """Categories chosen by LLM tree search (each with its subcategories)."""
    ids: tuple[str, ...] | None = None
    """Only these memories (those carrying the wanted tags)."""
    others: tuple[MemoryStore, ...] = ()
    """The other scopes searched with the agent's own (the shared spaces it includes)."""

    @property
    def agents(self) -> tuple[str, ...]:
        """The agent ids of every scope searched, the agent's own first."""
        return (self.store.agent_id, *(s.agent_id for s in self.others))

    @property
    def slots(self) -> tuple[int, ...]:
        return (self.store.slot, *(s.slot for s in self.others))

    @property
    def any(self) -> bool:
        return (
            (self.tiers is not TIERS and set(self.tiers) != set(TIERS))
            or bool(self.category)
            or bool(self.within)
            or self.ids is not None
        )

    def sql(self, picked_by: Literal["id", "seq"] | None = None) -> tuple[str, list[object]]:
        """Conditions on `m` (memories) for the agent, tier and category filters. `picked_by`:
        the rows are picked by id or seq; the unary plus keeps the planner from walking a
        whole tier (or, for seqs, all the agent's ids) instead, as it does without stats."""
        agent = "+m.agent_id" if picked_by == "seq" else "m.agent_id"
        tier = "+m.tier" if picked_by else "m.tier"
        scope = f"{agent} = ?" if not self.others else f"{agent} IN ({_marks(self.agents)})"
        sql = f" AND {scope} AND {tier} IN ({_marks(self.tiers)})"
        params: list[object] = [*self.agents, *self.tiers]
        for group in ([self.category] if self.category else [], self.within):
            paths = [normalize_path(p) for p in group]
            if paths:
                either = " OR ".join(
                    ["m.category = ? OR substr(m.category, 1, ?) = ?"] * len(paths)
                )
                sql += f" AND ({either})"
                for path in paths:
                    params += [path, len(path) + 1, path + "/"]
        if self.ids is not None:
            sql += " AND m.id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(list(self.ids)))
        return sql, params


def filters_for(
    store: MemoryStore,
    tiers: Sequence[Tier],
    category: str | None,
    scopes: Sequence[MemoryStore] | None,
    wanted_tags: list[str],
) -> Filters:
    """The conditions of one search: its scopes (None: the agent's own and the spaces it
    includes) and, when tags are wanted, the memories of those scopes carrying them."""
    others = tuple(spaces_of(store) if scopes is None else scopes)
    filters = Filters(store, tiers, category, others=others)
    if not wanted_tags:
        return filters
    return replace(filters, ids=tuple(ids_with(filters, wanted_tags)))


def spaces_of(store: MemoryStore) -> list[MemoryStore]:
    """The scopes of the shared spaces the agent includes (none: a search as before)."""
    return [MemoryStore(store.db, m.scope) for m in spaces.included(store.db, store.agent_id)]


def mark_sources(filters: Filters, found: Sequence[Candidate], own_boost: float) -> None:
    """Each candidate's space (from its row id's slot), and the agent's own boosted (nothing
    to do when the search covers the agent's own scope alone)."""
    if not filters.others:
        return
    by_slot = {s.slot: spaces.space_of(s.agent_id) for s in filters.others}
    for c in found:
        c.space = by_slot.get(c.seq >> SLOT_BITS)
        c.scope_boost = 1.0 if c.space is not None else own_boost


def arrange(
    filters: Filters, ranked: list[Candidate], now: float, as_of: float | None
) -> list[Candidate]:
    """What is true now first (`core.current`), within each scope: a memory is replaced only
    by one of its own scope."""
    store = filters.store
    if not filters.others:
        return current.arrange(store.db, store.agent_id, ranked, now, as_of)
    out: list[Candidate] = []
    for scope in (store, *filters.others):
        mine = [c for c in ranked if c.seq >> SLOT_BITS == scope.slot]
        arranged = current.arrange(store.db, scope.agent_id, mine, now, as_of)
        space = spaces.space_of(scope.agent_id)
        for c in arranged:  # a successor the search did not find joins with its scope's mark
            c.space = space
            c.scope_boost = mine[0].scope_boost if mine else 1.0
        out += arranged
    return sorted(out, key=lambda c: (-c.score, c.seq))


def ids_with(filters: Filters, wanted: list[str]) -> list[str]:
    """Memories of the searched scopes carrying every one of the `wanted` tags."""
    db = filters.store.db
    return sorted(i for a in filters.agents for i in tagmod.ids_with(db, a, wanted))


def writers(filters: Filters, chosen: Sequence[Candidate]) -> None:
    """Who wrote each returned memory of a space (`core.spaces`), for its explanation."""
    for scope in filters.others:
        mine = [c for c in chosen if c.seq >> SLOT_BITS == scope.slot]
        if mine:
            by = spaces.writers_of(scope.db, scope.agent_id, [str(c.row[0]) for c in mine])
            for c in mine:
                c.written_by = by.get(str(c.row[0]))


# -- the graph, episodes and answers across scopes ----------------------------------------------


@dataclass(frozen=True)
class EveryScope:
    """The graph signal of several scopes as one (`retrieve.Signals`): each scope's graph and
    episodes raise, and add, memories of that scope."""

    parts: tuple[GraphSignals, ...]

    def apply(
        self, query: str, found: list[Candidate], where: tuple[str, list[object]]
    ) -> list[Candidate]:
        for part in self.parts:
            found = part.apply(query, found, where)
        return found


def graph_signals(
    mem: Memory, own: GraphKinds, others: Sequence[MemoryStore]
) -> GraphSignals | EveryScope | None:
    """The graph and episode signal of a search: the agent's own (`own` says what it has) and
    each space's in `others` that has an entity or an episode, each with its own lookups
    kept while nothing is written. None: no scope has a graph, or the signal is off."""
    if not mem.cfg.graph.retrieval_signal:
        return None
    memo = mem.reads.memo()
    parts = [] if not any(own) else [(mem.memories, own, memo)]
    for store in others:
        kinds = _graph_kinds(store, memo)
        if any(kinds):
            parts.append((store, kinds, _scope_memo(memo, store.agent_id)))
    if not parts:
        return None
    from tiermem.core.graph.signal import GraphSignals  # only a scope with a graph needs it

    signals = tuple(
        GraphSignals(s.db, s.agent_id, mem.cfg.graph, entities=k[0], episodes=k[1], memo=m)
        for s, k, m in parts
    )
    return signals[0] if len(signals) == 1 else EveryScope(signals)


def _graph_kinds(store: MemoryStore, memo: dict[object, object]) -> GraphKinds:
    """Whether a space's scope has an entity and an episode (kept in the read cache)."""
    key = ("graph kinds", store.agent_id)
    known = memo.get(key)
    if known is None:
        row = store.db.query_one(
            "SELECT EXISTS (SELECT 1 FROM entity_names WHERE agent_id = ?), "
            "EXISTS (SELECT 1 FROM episodes WHERE agent_id = ?)",
            (store.agent_id, store.agent_id),
        )
        known = memo[key] = (False, False) if row is None else (bool(row[0]), bool(row[1]))
    return known  # type: ignore[return-value]


def _scope_memo(memo: dict[object, object], agent_id: str) -> dict[object, object]:
    """A space's own lookups inside the read cache's memo (entity ids are per scope)."""
    mine = memo.setdefault(("graph memo", agent_id), {})
    if len(mine) > _SCOPE_MEMO_MAX:  # type: ignore[arg-type]
        mine = memo[("graph memo", agent_id)] = {}
    return mine  # type: ignore[return-value]


_SCOPE_MEMO_MAX = 4096


def answers_from_spaces(
    filters: Filters, query: str, ranked: list[Candidate], when: float
) -> list[Candidate]:
    """A question's newest answer in each space searched (`core.answers`), after the agent's
    own answer (`current.answer_first` on the agent's own scope runs first): a space's answer
    goes first when the agent's own memory states no answer, else right after it."""
    if not filters.others or not current.QUESTION.search(query):
        return ranked
    from tiermem.core import answers  # the statement rules load only for a question

    asked = answers.asked(query)
    if asked is None:
        return ranked
    own = answers.newest(filters.store.db, filters.store.slot, asked, when, _only(filters))
    after = None if own is None else own[0]
    for scope in reversed(filters.others):
        found = answers.newest(scope.db, scope.slot, asked, when, _only(filters, scope))
        if found is not None:
            ranked = _place_answer(ranked, scope, found, after)
    return ranked


def _only(filters: Filters, scope: MemoryStore | None = None) -> tuple[str, list[object]]:
    """The search's conditions on one scope (default: the agent's own)."""
    return replace(filters, store=scope or filters.store, others=()).sql(picked_by="id")


def _place_answer(
    ranked: list[Candidate], scope: MemoryStore, found: tuple[int, Row, str], after: int | None
) -> list[Candidate]:
    """A space's answer first, or right after the agent's own answer (seq `after`)."""
    seq, row, why = found
    answer = next((c for c in ranked if c.seq == seq), None)
    if answer is None:
        answer = Candidate(seq, with_count(row), found_by="answer")
        ranked.append(answer)
    answer.space, answer.scope_boost = spaces.space_of(scope.agent_id), 1.0
    answer.relevance, answer.via = max(answer.relevance, 1.0), why
    own = next((c for c in ranked if c.seq == after), None)
    below = [c for c in ranked if c is not answer and c is not own]
    top = max((c.score for c in below), default=0.0)
    answer.score = max(answer.score, top * (1 + 1e-6) + 1e-9)
    if own is not None and own.score > top:
        answer.score = min(answer.score, (own.score + top) / 2)
    return sorted(ranked, key=lambda c: (-c.score, c.seq))


def graph_search(
    mem: Memory, query: str, *, at: float | None = None, entity: bool = False
) -> dict[str, Any]:
    """`graph search` over the agent's own graph and each included space's
    (`core.graph.view.search` in each scope), every entity and relation labelled with its
    `space` (None: the agent's own) and `scope_boost`. A question is answered by the scopes
    that know it, what holds now first and the agent's own first among equals; else the
    entities found, by mentions × the scope's boost. `entity`: the best one in full."""
    from tiermem.core.graph import view  # the graph's reading code: only graph searches need it

    mem.require_memory()
    included = spaces.included(mem.db, mem.agent_id)
    own_boost = mem.cfg.retrieval.own_boost if included else 1.0
    with contextlib.ExitStack() as stack:
        scopes = [(mem, own_boost)] + [
            (stack.enter_context(mem.open_space(m.space)), 1.0) for m in included
        ]
        found = [_labelled(view.search(m, query, at=at), m, boost) for m, boost in scopes]
        out = _merge_answers(found) if any("answer" in f for f in found) else _merge_names(found)
        if entity and out["entities"]:
            best = out["entities"][0]
            where = next(m for m, _ in scopes if spaces.space_of(m.agent_id) == best["space"])
            out["entity"] = view.entity_view(where, best["id"], at) | {"space": best["space"]}
    return out


def _labelled(found: dict[str, Any], mem: Memory, boost: float) -> dict[str, Any]:
    """A scope's graph search result, each entity and relation saying its scope."""
    label = {"space": spaces.space_of(mem.agent_id), "scope_boost": boost}
    for key in ("entities", "relations", "current", "history", "planned"):
        for item in found.get(key, ()):
            item.update(label)
    return found | label


def _merge_answers(found: list[dict[str, Any]]) -> dict[str, Any]:
    """The scopes that answered the question, best first (what holds now, then the boost):
    their answer lines (a space's marked `[space NAME]`) and relations in that order."""
    answered = sorted(
        (f for f in found if "answer" in f),
        key=lambda f: -(1.0 if f["current"] else 0.5 if f["answer"] else 0.0) * f["scope_boost"],
    )
    out = dict(answered[0])
    out["answer"] = [
        line if f["space"] is None else f"[space {f['space']}] {line}"
        for f in answered
        for line in f["answer"]
    ]
    for key in ("current", "history", "planned", "entities", "relations"):
        out[key] = [item for f in answered for item in f[key]]
    return _sources(out, found)


def _merge_names(found: list[dict[str, Any]]) -> dict[str, Any]:
    """Entities whose names contain the query in every scope, by mentions × the scope's
    boost, with their relations."""
    out = dict(found[0])
    out["entities"] = sorted(
        (e for f in found for e in f["entities"]),
        key=lambda e: -e["mentions"] * e["scope_boost"],
    )
    out["relations"] = [r for f in found for r in f["relations"]]
    return _sources(out, found)


def _sources(out: dict[str, Any], found: list[dict[str, Any]]) -> dict[str, Any]:
    out.pop("space", None)
    out.pop("scope_boost", None)
    out["searched"] = [f["space"] for f in found]
    return out


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))
