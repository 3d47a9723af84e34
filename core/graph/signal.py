"""The graph and episodes as a retrieval signal: memories that mention an entity the query
names (or one related to it) and the facts of episodes that match the query are raised, and
each says how it was reached ("via Maya → works_on → Ledgerly")."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import cast

from tiermem.core import episodes
from tiermem.core.config import GraphConfig
from tiermem.core.current import ANSWERS
from tiermem.core.db import Database, Row
from tiermem.core.graph import history, known_mentions_by_key, ngram_keys, question
from tiermem.core.graph.extract import OWNER
from tiermem.core.graph.store import GraphStore
from tiermem.core.ranking import ROW_FIELDS, Candidate, with_count

_QUESTION = re.compile(r"\?|\b(?:what|whats|what's|where|who|whom|whose|which|when|how)\b", re.I)
ANSWER_BOOST = 1.0
"""A question's current answer: as relevant as the best keyword match, then doubled."""
NEIGHBOURS = 10
MEMORIES_PER_ENTITY = 50
EPISODES = 3
EPISODE_MIN_RELEVANCE = 0.5

_Reach = tuple[str, list[str], list[tuple[str, str, list[str]]]]
"""An entity's name, the memories naming it, and (neighbour, path, the memories naming it)."""


@dataclass
class GraphSignals:
    """One agent's graph signal (retrieve.search's `signals`), built only for an agent that has
    a graph or an episode (the read cache knows which)."""

    db: Database
    agent_id: str
    cfg: GraphConfig
    entities: bool = True
    """The agent has an entity: the query's names are looked up."""
    episodes: bool = True
    """The agent has an episode: episodes are searched."""
    memo: dict[object, object] = field(default_factory=dict)
    """Lookups kept while nothing is written (`ReadCache.memo`)."""

    def apply(
        self, query: str, found: list[Candidate], where: tuple[str, list[object]]
    ) -> list[Candidate]:
        """`found` with the signal's boosts and reasons, plus memories reached only through an
        entity of the query (within the same filters)."""
        reached = self._entity_paths(query)
        for memory_id, mark in self._answers(query).items():
            reached[memory_id] = mark  # a question's current answer outranks a mention
        linked = self._episode_facts(query)
        by_id = {str(c.row[0]): c for c in found}
        for memory_id, (boost, via) in linked.items():
            c = by_id.get(memory_id)
            if c is not None:
                _mark(c, boost, via)
        extra = [m for m in reached if m not in by_id]
        for memory_id, (boost, via) in reached.items():
            c = by_id.get(memory_id)
            if c is not None:
                _mark(c, boost, via)
        return found + self._fetch(extra, reached, where)

    def _entity_paths(self, query: str) -> dict[str, tuple[float, str]]:
        """memory id → (boost, "via …") for memories mentioning a query entity or a neighbour."""
        if not self.entities:
            return {}
        hits = self._known(ngram_keys(query, capitalised=False))
        out: dict[str, tuple[float, str]] = {}
        boost = self.cfg.entity_boost
        for entity_id in sorted(hits):
            name, refs, neighbours = self._reach(entity_id)
            for ref in refs:
                out.setdefault(ref, (boost, f"entity {name}"))
            for other, path, other_refs in neighbours:
                if other in hits:
                    continue
                for ref in other_refs:
                    out.setdefault(ref, (boost / 2, path))
        return out

    def _answers(self, query: str) -> dict[str, tuple[float, str]]:
        """memory id → (boost, "answers …") for the memories stating what holds now for what a
        question asks ("who is my manager" → the memory that said who it is now)."""
        if not self.entities or not _QUESTION.search(query):
            return {}
        asked = question.parse(query)
        if not asked.predicates:
            return {}
        graph = GraphStore(self.db, self.agent_id)
        about = question.mentioned(graph, query)
        owner = graph.lookup(OWNER) if asked.first_person or not about else None
        out: dict[str, tuple[float, str]] = {}
        for entity_id in [*about, *([owner] if owner else [])][:3]:
            edges = [
                e for e in graph.edges(entity_id) if question.wanted(e.predicate, asked.predicates)
            ]
            holding = [e for e in history.at_time(edges, time.time()) if e.firm and e.memory]
            names = graph.names({e.subject for e in holding} | {e.object for e in holding})
            for e in holding:
                via = f"{ANSWERS}{names.get(e.subject, e.subject)} → {e.predicate} → "
                out.setdefault(str(e.memory), (ANSWER_BOOST, via + names.get(e.object, e.object)))
        return out

    def _known(self, keys: set[str]) -> set[str]:
        """The entities the name keys mean (each key's answer kept in the memo)."""
        asked = [k for k in keys if ("name", k) not in self.memo]
        if asked:
            found = known_mentions_by_key(self.db, self.agent_id, set(asked))
            for key in asked:
                self.memo["name", key] = found.get(key, frozenset())
        hits: set[str] = set()
        for key in keys:
            hits |= self.memo["name", key]  # type: ignore[arg-type]
        return hits

    def _reach(self, entity_id: str) -> _Reach:
        """An entity's name, the memories naming it, and its neighbours: (id, "a → rel → b",
        the memories naming that neighbour)."""
        key = ("reach", entity_id)
        known = self.memo.get(key)
        if known is not None:
            return known  # type: ignore[return-value]
        graph = GraphStore(self.db, self.agent_id)
        name = graph.names({entity_id}).get(entity_id, entity_id)
        refs = graph.mentioned_in(entity_id, "memory", MEMORIES_PER_ENTITY)
        neighbours = []
        for edge in graph.edges(entity_id, NEIGHBOURS):
            if not edge.object or edge.flags & {"negated", "corrected"}:
                continue  # the record of an ending, or a statement that never held
            other = edge.object if edge.subject == entity_id else edge.subject
            other_name = graph.names({other}).get(other, other)
            subject, obj = (name, other_name) if edge.subject == entity_id else (other_name, name)
            path = f"{subject} → {edge.predicate} → {obj}"
            neighbours.append(
                (other, path, graph.mentioned_in(other, "memory", MEMORIES_PER_ENTITY))
            )
        reach: _Reach = (name, refs, neighbours)
        self.memo[key] = reach
        return reach

    def _episode_facts(self, query: str) -> dict[str, tuple[float, str]]:
        out: dict[str, tuple[float, str]] = {}
        if self.cfg.episode_boost <= 0 or not self.episodes:
            return out
        for episode, relevance in episodes.search(self.db, self.agent_id, query, EPISODES):
            if relevance < EPISODE_MIN_RELEVANCE:
                continue
            via = f"episode {episode.id} ({episode.abstract[:60]})"
            for fact_id in episode.fact_ids:
                out.setdefault(fact_id, (self.cfg.episode_boost * relevance, via))
        return out

    def _fetch(
        self,
        ids: list[str],
        reached: dict[str, tuple[float, str]],
        where: tuple[str, list[object]],
    ) -> list[Candidate]:
        """The rows of the memories reached only through the graph (within the filters; each
        id's row, or its absence, kept in the memo)."""
        if not ids:
            return []
        sql, params = where
        scope = (sql, tuple(params))
        asked = [i for i in ids if ("row", scope, i) not in self.memo]
        if asked:
            rows = self.db.query(
                f"SELECT m.seq, {ROW_FIELDS} FROM memories m WHERE m.id IN "
                f"({','.join('?' * len(asked))}){sql}",
                [*asked, *params],
            )
            for memory_id in asked:
                self.memo["row", scope, memory_id] = None
            for r in rows:
                self.memo["row", scope, str(r[1])] = r
        out = []
        for memory_id in ids:
            row = cast("Row | None", self.memo["row", scope, memory_id])
            if row is None:
                continue
            boost, via = reached[memory_id]
            c = Candidate(int(row[0]), with_count(row[1:]), relevance=boost, found_by="graph")
            c.via = via
            out.append(c)
        return out


def _mark(c: Candidate, boost: float, via: str) -> None:
    if boost > c.signal_boost:
        c.signal_boost, c.via = boost, via
