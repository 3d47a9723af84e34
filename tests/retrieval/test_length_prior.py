"""The adaptive length prior: off where memories are alike in length, full where they spread."""

from __future__ import annotations

import math

import pytest

from tiermem.core.config import Config, RetrievalConfig
from tiermem.core.ranking import length_factors
from tiermem.core.warm import NewFact

LONG = (
    "Training plans usually combine easy runs, tempo sessions and intervals, and a sustainable "
    "weekly volume matters more than any single workout. " * 8
)


def test_memories_alike_in_length_are_ranked_by_plain_bm25(open_memory) -> None:
    mem = open_memory()
    mem.store_many(
        [
            NewFact("The marathon in Boston was my first one, in April", "events", 0.5),
            NewFact("My sister ran a marathon in Berlin last autumn too", "events", 0.5),
            NewFact("We watched the marathon runners pass by on Sunday", "events", 0.5),
        ]
    )
    hits = mem.retrieve("marathon", limit=3, reinforce=False).hits
    assert [h.explanation.length_factor for h in hits] == [1.0, 1.0, 1.0]
    best = max(-h.explanation.bm25 for h in hits)
    assert [h.explanation.relevance for h in hits] == [-h.explanation.bm25 / best for h in hits]


def test_a_long_memory_among_short_ones_is_weighed_down(open_memory) -> None:
    mem = open_memory()
    mem.store_many(
        [
            NewFact("I ran my first marathon in Boston", "events", 0.5),
            NewFact(LONG + " The marathon is one goal among many.", "notes", 0.5),
        ]
    )
    hits = mem.retrieve("marathon", limit=2, reinforce=False).hits
    assert hits[0].memory.text == "I ran my first marathon in Boston"
    assert hits[0].explanation.length_factor == 1.0
    assert 0 < hits[1].explanation.length_factor < 1


def test_a_fixed_prior_weighs_down_memories_alike_in_length(open_memory) -> None:
    config = Config(retrieval=RetrievalConfig(length_spread_full=0.0))
    mem = open_memory(config=config)
    mem.store_many(
        [
            NewFact("a marathon", "events", 0.5),
            NewFact("a marathon in Boston", "events", 0.5),
        ]
    )
    factors = sorted(h.explanation.length_factor for h in mem.retrieve("marathon").hits)
    assert factors[0] < 1.0 == factors[1]


def spread(tokens: list[int]) -> float:
    logs = [math.log(t) for t in tokens]
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs))


def test_the_exponent_grows_with_the_spread_between_the_two_thresholds() -> None:
    cfg = RetrievalConfig(length_penalty=0.4, length_spread_min=0.5, length_spread_full=1.5)
    tokens = [10, 30]  # spread ln(3)/2 ≈ 0.55: just above the minimum
    share = (spread(tokens) - 0.5) / (1.5 - 0.5)
    assert length_factors(tokens, cfg) == pytest.approx([1.0, (10 / 30) ** (0.4 * share)])
    wide = [10, 1000]  # spread ≈ 2.3: the full exponent
    assert length_factors(wide, cfg) == pytest.approx([1.0, (10 / 1000) ** 0.4])
    narrow = [10, 12, 14]
    assert length_factors(narrow, cfg) == [1.0, 1.0, 1.0]


def test_no_penalty_and_empty_pools_leave_relevance_alone() -> None:
    assert length_factors([5, 500], RetrievalConfig(length_penalty=0.0)) == [1.0, 1.0]
    assert length_factors([], RetrievalConfig()) == []
    assert length_factors([0, 3], RetrievalConfig(length_spread_full=0.0))[0] == 1.0
