"""Keyword ranking: the length prior, time cues, query normalisation, explanations."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiermem.core.config import Config, RetrievalConfig
from tiermem.core.terms import matched_terms, query_terms, stem
from tiermem.core.warm import NewFact

LONG = (
    "Training plans usually combine easy runs, tempo sessions and intervals. "
    "A sustainable weekly volume matters more than any single workout, and rest days, "
    "sleep, hydration and strength work all help. " * 6
)


def ts(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, 12, tzinfo=UTC).timestamp()


def test_length_prior_prefers_the_memory_about_the_term(open_memory) -> None:
    mem = open_memory()
    mem.store_many(
        [
            NewFact("I ran my first marathon in Boston", "events", 0.5),
            NewFact(LONG + " The marathon is one goal among many.", "notes", 0.5),
        ]
    )
    hits = mem.retrieve("marathon", limit=2, reinforce=False).hits
    assert hits[0].memory.text == "I ran my first marathon in Boston"
    short, long = (h.explanation for h in hits)
    assert short.length_factor == 1.0 and 0 < long.length_factor < 1
    for e in (short, long):
        assert e.score == pytest.approx(
            e.relevance * (1 + e.category_boost) * (1 + e.time_boost) + 0.01 * e.tier_score
        )


def test_length_penalty_zero_is_plain_bm25(open_memory) -> None:
    mem = open_memory(config=Config(retrieval=RetrievalConfig(length_penalty=0.0)))
    mem.store_many([NewFact("marathon " + LONG, "notes", 0.5), NewFact("a marathon", "x", 0.5)])
    hits = mem.retrieve("marathon", limit=2, reinforce=False).hits
    assert [h.explanation.length_factor for h in hits] == [1.0, 1.0]
    best = max(-h.explanation.bm25 for h in hits)
    assert [h.explanation.relevance for h in hits] == [-h.explanation.bm25 / best for h in hits]


@pytest.fixture
def hikes(open_memory, clock):
    def make(temporal_boost: float = 0.25):
        clock.now = ts(2026, 6, 1)
        mem = open_memory(config=Config(retrieval=RetrievalConfig(temporal_boost=temporal_boost)))
        mem.store_many(
            [
                NewFact("Went hiking with Anna", "events", 0.5, created_at=ts(2026, 3, 10)),
                NewFact("Went hiking with Ben", "events", 0.5, created_at=ts(2026, 5, 25)),
            ]
        )
        return mem

    return make


def test_time_cue_raises_memories_dated_inside_it(hikes) -> None:
    result = hikes().retrieve("who did I go hiking with in March?", reinforce=False)
    assert result.terms == ["go", "hiking", "march"]
    assert result.time_windows == ["'in march' → 2026-03-01..2026-03-31"]
    top = result.hits[0]
    assert top.memory.text == "Went hiking with Anna"
    assert top.explanation.time_boost == 0.25
    assert top.explanation.time_match == result.time_windows[0]
    assert result.hits[1].explanation.time_match is None


def test_time_cues_off_leaves_the_tie_to_recency(hikes) -> None:
    result = hikes(temporal_boost=0.0).retrieve("hiking in March", reinforce=False)
    assert result.time_windows == []
    assert result.hits[0].memory.text == "Went hiking with Ben"  # the newer: tier tie-break


def test_time_only_words_are_not_searched(hikes) -> None:
    result = hikes().retrieve("who did I go hiking with last week", reinforce=False)
    assert result.terms == ["go", "hiking"]
    assert result.hits[0].memory.text == "Went hiking with Ben"
    assert result.hits[0].explanation.time_match == "'last week' → 2026-05-25..2026-06-01"


def test_query_normalisation_drops_contraction_fragments() -> None:
    assert query_terms("I've set up my friend's tank, don't ask", 32) == [
        "set",
        "friend",
        "tank",
        "ask",
    ]


def test_matched_terms_explains_like_a_stemmer() -> None:
    stems = {stem(t): t for t in ("deadline", "games", "run")}
    assert matched_terms("Deadlines while GAMING; rerun", stems) == ("deadline", "games")
    assert matched_terms("deadlier", {"dead": "dead"}) == ("dead",)  # up to 4 more letters…
    assert matched_terms("deadlines", {"dead": "dead"}) == ()  # …not 5
    assert matched_terms("undead", {"dead": "dead"}) == ()  # at a word start only


def test_candidate_pool_bounds_what_is_ranked(open_memory) -> None:
    mem = open_memory(config=Config(retrieval=RetrievalConfig(candidate_pool=3)))
    mem.store_many([NewFact(f"note {i} about tea", "notes", 0.5) for i in range(10)])
    result = mem.retrieve("tea", limit=10, reinforce=False)
    assert result.candidates == 3 and len(result.hits) == 3
