"""The graph and episodes as a retrieval signal: memories that mention an entity the query
names (or one related to it) and the facts of episodes that match the query are raised, and
each says how it was reached ("via Maya → works_on → Ledgerly")."""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.core import episodes
from tiermem.core.config import GraphConfig
from tiermem.core.db import Database
from tiermem.core.graph import known_mentions, ngram_keys
from tiermem.core.graph.store import GraphStore
from tiermem.core.ranking import ROW_FIELDS, Candidate, with_count

NEIGHBOURS = 10
MEMORIES_PER_ENTITY = 50
EPISODES = 3
EPISODE_MIN_RELEVANCE = 0.5


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

    def apply(
        self, query: str, found: list[Candidate], where: tuple[str, list[object]]
    ) -> list[Candidate]:
        """`found` with the signal's boosts and reasons, plus memories reached only through an
        entity of the query (within the same filters)."""
        reached = self._entity_paths(query)
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
        graph = GraphStore(self.db, self.agent_id)
        hits = known_mentions(self.db, self.agent_id, ngram_keys(query, capitalised=False))
        if not hits:
            return {}
        names = graph.names(hits)
        out: dict[str, tuple[float, str]] = {}
        boost = self.cfg.entity_boost
        for entity_id in sorted(hits):
            name = names.get(entity_id, entity_id)
            for ref in graph.mentioned_in(entity_id, "memory", MEMORIES_PER_ENTITY):
                out.setdefault(ref, (boost, f"entity {name}"))
            for edge in graph.edges(entity_id, NEIGHBOURS):
                other = edge.object if edge.subject == entity_id else edge.subject
                if other in hits:
                    continue
                other_name = graph.names({other}).get(other, other)
                path = f"{names.get(edge.subject, other_name)} → {edge.predicate} → " + (
                    other_name if edge.subject == entity_id else name
                )
                for ref in graph.mentioned_in(other, "memory", MEMORIES_PER_ENTITY):
                    out.setdefault(ref, (boost / 2, path))
        return out

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
        if not ids:
            return []
        sql, params = where
        rows = self.db.query(
            f"SELECT m.seq, {ROW_FIELDS} FROM memories m WHERE m.id IN "
            f"({','.join('?' * len(ids))}){sql}",
            [*ids, *params],
        )
        out = []
        for r in rows:
            boost, via = reached[str(r[1])]
            c = Candidate(seq=int(r[0]), row=with_count(r[1:]), relevance=boost, found_by="graph")
            c.via = via
            out.append(c)
        return out


def _mark(c: Candidate, boost: float, via: str) -> None:
    if boost > c.signal_boost:
        c.signal_boost, c.via = boost, via
