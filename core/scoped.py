"""The scopes one search covers: the agent's own memory and the shared spaces it includes
(`core.spaces`), with the tier, category and tag conditions (`Filters`). Each candidate gets
its space from its row id's slot; the agent's own are boosted (`[retrieval] own_boost`); what
is true now is arranged within each scope; each returned memory of a space names its writer.
An agent with no space searches exactly as before: one scope, the same statements."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tiermem.core import current, spaces
from tiermem.core import tags as tagmod
from tiermem.core.ranking import Candidate
from tiermem.core.tree import normalize_path
from tiermem.core.warm import SLOT_BITS, TIERS, MemoryStore, Tier


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


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))
