"""Hybrid fusion, keyword first (retrieve._hybrid): a confident keyword ranking stands with
vector-only results after it; a query whose words the memories do not share is fused. A fake
vector index with fixed similarities keeps these deterministic and runs them on both drivers
(the real model is exercised in test_vectors.py)."""

from __future__ import annotations

import pytest

from tiermem.core.config import Config, RetrievalConfig
from tiermem.core.engine import Memory
from tiermem.core.retrieve import RetrievalResult, search
from tiermem.core.warm import NewFact

FACTS = {
    "flights": "Booked flights to Lisbon for the conference",
    "badge": "The conference badge pickup opens at nine",
    "passport": "Packed the travel adapter and the passport",
    "dinner": "Dinner reservations are at the seafood place",
    "trip": "The trip budget is still open",
}


class FakeVectors:
    """retrieve.VectorSearch with given similarities (by memory text key)."""

    def __init__(self, mem: Memory, similarity: dict[str, float]) -> None:
        seqs = {str(r[1]): int(r[0]) for r in mem.db.query("SELECT seq, text FROM memories")}
        self.ranked = sorted(
            ((seqs[FACTS[key]], sim) for key, sim in similarity.items()), key=lambda r: -r[1]
        )

    def similar(self, query: str, pool: int) -> list[tuple[int, float]]:
        return self.ranked[:pool]


@pytest.fixture
def mem(open_memory) -> Memory:
    memory: Memory = open_memory()
    memory.store_many([NewFact(text, "travel", 0.5) for text in FACTS.values()])
    return memory


def hybrid(
    mem: Memory, query: str, similarity: dict[str, float], **settings: float
) -> RetrievalResult:
    config = Config(retrieval=RetrievalConfig(**settings))  # type: ignore[arg-type]
    return search(
        mem.memories,
        mem.trees.load(),
        query,
        now=mem.now(),
        retrieval=config.retrieval,
        scoring=config.scoring,
        limit=10,
        mode="hybrid",
        vectors=FakeVectors(mem, similarity),
    )


def keys(result: RetrievalResult) -> list[str]:
    by_text = {text: key for key, text in FACTS.items()}
    return [by_text[h.memory.text] for h in result.hits]


SIMILARITY = {"passport": 0.95, "badge": 0.5, "flights": 0.4, "dinner": 0.1}


def test_confident_keyword_ranking_stands_with_vector_results_after_it(mem: Memory) -> None:
    query = "conference flights Lisbon"  # the best keyword result has all three terms
    keyword = mem.retrieve(query, limit=10, reinforce=False)
    result = hybrid(mem, query, SIMILARITY)
    assert keys(keyword) == ["flights", "badge"]
    assert keys(result) == ["flights", "badge", "passport", "dinner"]
    assert result.notes == [
        "the best keyword result has 100% of the query's terms (more than 30%): keyword "
        "ranking kept, vector results after it"
    ]
    flights, badge, passport, _ = (h.explanation for h in result.hits)
    assert (flights.found_by, flights.keyword_rank, flights.vector_rank) == ("both", 1, 3)
    assert flights.similarity == pytest.approx(0.4)
    # keyword relevance as in keyword mode, not fused
    assert [flights.relevance, badge.relevance] == [h.explanation.relevance for h in keyword.hits]
    assert (passport.found_by, passport.keyword_rank, passport.vector_rank) == ("vector", None, 1)


def test_always_fusing_lets_similarity_reorder_a_confident_query(mem: Memory) -> None:
    result = hybrid(mem, "conference flights Lisbon", SIMILARITY, hybrid_keyword_coverage=1.0)
    assert keys(result) == ["flights", "passport", "badge", "dinner"]
    assert "keyword and vector rankings fused" in result.notes[0]
    # 0.5 × min-max keyword relevance + 0.5 × min-max similarity (0.4 among 0.1 … 0.95)
    assert result.hits[0].explanation.relevance == pytest.approx(0.5 + 0.5 * 0.3 / 0.85)
    assert result.hits[1].explanation.relevance == pytest.approx(0.5)


def test_a_query_in_other_words_is_fused(mem: Memory) -> None:
    """Only 'trip' of five terms is in the best keyword result (20% ≤ 30%): similarity counts."""
    query = "documents needed for my trip abroad soon"
    similarity = {"passport": 0.9, "flights": 0.6, "trip": 0.3, "dinner": 0.1}
    assert keys(mem.retrieve(query, limit=10, reinforce=False)) == ["trip"]
    result = hybrid(mem, query, similarity)
    assert result.notes == [
        "the best keyword result has 20% of the query's terms (at most 30%): keyword and "
        "vector rankings fused"
    ]
    assert keys(result) == ["trip", "passport", "flights", "dinner"]
    trip, passport, *_ = (h.explanation for h in result.hits)
    assert trip.found_by == "both" and passport.found_by == "vector"
    assert trip.relevance == pytest.approx(0.5 + 0.5 * 0.2 / 0.8)  # its only keyword match
    # the paraphrase ranks as high as a memory found by keywords only would
    assert passport.relevance == pytest.approx(0.5)
    stricter = hybrid(mem, query, similarity, hybrid_keyword_coverage=0.1)
    assert keys(stricter) == ["trip", "passport", "flights", "dinner"]
    assert "keyword ranking kept" in stricter.notes[0]
    assert stricter.hits[0].explanation.relevance == pytest.approx(1.0)  # keyword's own


def test_no_keyword_match_ranks_by_similarity(mem: Memory) -> None:
    result = hybrid(mem, "documents abroad", SIMILARITY)
    assert keys(result) == ["passport", "badge", "flights", "dinner"]
    assert "has 0% of the query's terms" in result.notes[0]
    assert {h.explanation.found_by for h in result.hits} == {"vector"}
