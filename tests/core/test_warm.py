"""Warm facts: content-addressed ids, dedup by reinforcement, the score formula and tiers."""

from __future__ import annotations

import math

import pytest

from tiermem.core.config import ScoringConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.scoring import classify, half_life_days, score
from tiermem.core.warm import NewFact, memory_id

CFG = ScoringConfig()


def test_score_formula_exact() -> None:
    now = 100 * 86400.0
    created = now - 15 * 86400.0
    assert score(0.8, created, 3, now, CFG) == pytest.approx(0.8 * math.exp(-0.5) * 1.3)
    assert score(1.0, now, 0, now, CFG) == 1.0


def test_half_life_is_tau_ln2() -> None:
    assert half_life_days(CFG) == pytest.approx(20.79, abs=0.01)


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        (0.7, "hot"),
        (0.69, "warm"),
        (0.3, "warm"),
        (0.29, "cold"),
        (0.05, "cold"),
        (0.049, "frozen"),
    ],
)
def test_tier_thresholds(value: float, tier: str) -> None:
    assert classify(value, CFG) == tier


def test_ids_are_content_addressed_per_agent() -> None:
    assert memory_id("a", "Hello  World") == memory_id("a", "hello world")
    assert memory_id("a", "hello") != memory_id("b", "hello")


def test_store_and_get(mem: Memory, clock) -> None:
    out = mem.store(
        "Use uv for Python installs",
        "tools/python",
        0.6,
        urls=["https://docs.astral.sh/uv/"],
        commands=["uv tool install x"],
    )
    record = mem.get(out.id)
    assert record.text == "Use uv for Python installs"
    assert record.category == "tools/python" and record.tier == "warm"
    assert record.urls == ("https://docs.astral.sh/uv/",)
    assert record.commands == ("uv tool install x",)
    assert record.created_at == clock.now and record.tokens > 0
    with pytest.raises(NotFound):
        mem.get("0000000000000000")


def test_storing_again_reinforces_instead_of_duplicating(mem: Memory) -> None:
    first = mem.store("The API lives at api.example.com", "tech", 0.4, urls=["https://a.example"])
    second = mem.store("the API lives at  api.example.com", "tech", 0.7, urls=["https://b.example"])
    assert first.created and not second.created and second.merged_into == first.id
    record = mem.get(first.id)
    assert record.access_count == 1 and record.importance == 0.7
    assert record.urls == ("https://a.example", "https://b.example")
    assert mem.memories.counts()["warm"] == 1


def test_batch_with_duplicates_inside(mem: Memory) -> None:
    facts = [NewFact("same fact", "c", 0.5), NewFact("Same  fact", "c", 0.6), NewFact("other", "c")]
    outcomes = mem.store_many(facts)
    assert [o.created for o in outcomes] == [True, False, True]
    assert mem.memories.counts()["warm"] == 2


@pytest.mark.parametrize(
    ("text", "importance", "category"),
    [
        ("", 0.5, "c"),
        ("   ", 0.5, "c"),
        ("ok", 7, "c"),
        ("ok", -0.1, "c"),
        ("ok", 0.5, " / "),
        ("a\x00b", 0.5, "c"),
        ("x" * 70_000, 0.5, "c"),
    ],
)
def test_bad_input_stores_nothing(mem: Memory, text: str, importance: float, category: str) -> None:
    with pytest.raises(InvalidInput):
        mem.store(text, category, importance)
    assert mem.memories.counts() == {"warm": 0, "cold": 0, "frozen": 0}


def test_url_search(mem: Memory) -> None:
    mem.store("Docs", "tech", urls=["https://Docs.Example.com/x"])
    mem.store("Other", "tech", urls=["https://other.org"])
    assert [m.text for m in mem.memories.search_url("docs.example")] == ["Docs"]
