"""Retrieval: explanations, tree boost, filters, budget, reinforcement, hostile queries."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import MemoryFactory
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.hygiene.extras import set_extras
from tiermem.core.terms import fts_match, query_terms
from tiermem.core.warm import NewFact


@pytest.fixture
def seeded(mem: Memory) -> Memory:
    mem.tree_add("projects/evoclaw/bsc", "BSC integration for hackathon")
    mem.store_many(
        [
            NewFact("Hackathon deadline is Feb 15", "projects/evoclaw/bsc", 0.9),
            NewFact(
                "Decided on zero go-ethereum deps to keep the binary small",
                "projects/evoclaw/architecture",
                0.8,
            ),
            NewFact("Owner prefers direct technical communication", "owner/preferences", 0.7),
            NewFact("The deadline for taxes is in April", "owner/finance", 0.5),
            NewFact(
                "Run tests with pytest -q before pushing",
                "technical/testing",
                0.6,
                commands=("pytest -q",),
            ),
        ]
    )
    return mem


def test_results_carry_explanations(seeded: Memory) -> None:
    result = seeded.retrieve("hackathon deadline")
    top = result.hits[0]
    assert top.memory.text == "Hackathon deadline is Feb 15"
    e = top.explanation
    assert e.path == "projects/evoclaw/bsc"
    assert set(e.matched_terms) == {"hackathon", "deadline"}
    assert e.tree_match is not None and "hackathon" in e.tree_match
    assert e.category_boost > 0 and 0 < e.relevance <= 1 and e.tier == "warm"
    boosted = e.relevance * (1 + e.category_boost) * (1 + e.graph_boost)
    assert e.score == pytest.approx(boosted + 0.01 * e.tier_score)
    assert [c.path for c in result.categories] == ["projects/evoclaw/bsc"]


def test_tree_boost_reorders_equal_text_matches(seeded: Memory) -> None:
    result = seeded.retrieve("deadline hackathon", limit=5)
    texts = [h.memory.text for h in result.hits]
    assert texts.index("Hackathon deadline is Feb 15") < texts.index(
        "The deadline for taxes is in April"
    )


def test_tier_score_is_only_a_tie_break(seeded: Memory, clock) -> None:
    clock.advance(200)  # everything has decayed to almost nothing
    result = seeded.retrieve("binary deps")
    assert result.hits and result.hits[0].memory.text.startswith("Decided on zero")


def test_limit_tier_category(seeded: Memory) -> None:
    assert len(seeded.retrieve("deadline", limit=1).hits) == 1
    only = seeded.retrieve("deadline", category="owner")
    assert [h.memory.category for h in only.hits] == ["owner/finance"]
    assert seeded.retrieve("deadline", tier="cold").hits == []
    assert len(seeded.retrieve("deadline", tier="warm").hits) == 2
    with pytest.raises(InvalidInput):
        seeded.retrieve("deadline", tier="lukewarm")


def test_metadata_is_searchable(seeded: Memory) -> None:
    assert seeded.retrieve("pytest").hits[0].memory.commands == ("pytest -q",)


def test_budget_returns_best_set_that_fits(seeded: Memory) -> None:
    everything = seeded.retrieve("deadline hackathon owner binary", limit=10)
    smallest = min(h.memory.tokens for h in everything.hits)
    result = seeded.retrieve("deadline hackathon owner binary", budget=smallest)
    assert result.tokens <= smallest and len(result.hits) == 1
    assert result.hits[0].memory.id == everything.hits[0].memory.id  # the best, shortened
    roomy = seeded.retrieve("deadline hackathon owner binary", budget=10_000)
    assert len(roomy.hits) == len(everything.hits)


def test_retrieval_reinforces(seeded: Memory, clock) -> None:
    hit = seeded.retrieve("hackathon").hits[0]
    clock.advance(1)
    seeded.retrieve("hackathon")
    record = seeded.get(hit.memory.id)
    assert record.access_count == hit.memory.access_count + 2
    assert record.last_access == clock.now
    untouched = seeded.retrieve("hackathon", reinforce=False).hits[0]
    assert seeded.get(untouched.memory.id).access_count == record.access_count


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "'",
        'deadline"',
        "NOT",
        "AND OR NOT",
        "a*",
        "-x",
        "col:val",
        "(((",
        "NEAR(a b)",
        "^start",
        "🙂🎉",
        "日本語のクエリ",
        "naïve café",
        "x" * 10_000,
        "deadline " * 2000,
        "\x00",
        "%_\\",
        "a:b:c",
        "{text}: hackathon",
    ],
)
def test_hostile_queries_never_raise_sql_errors(seeded: Memory, query: str) -> None:
    result = seeded.retrieve(query)
    assert isinstance(result.hits, list)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_query_is_a_clear_error(seeded: Memory, query: str) -> None:
    with pytest.raises(InvalidInput, match="empty"):
        seeded.retrieve(query)


def test_query_terms() -> None:
    assert query_terms("What did we decide about the Hackathon deadline?", 32) == [
        "decide",
        "hackathon",
        "deadline",
    ]
    assert query_terms("the and", 32) == ["the", "and"]  # stopwords only: keep them
    assert query_terms("🙂", 32) == []
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)), 32)) == 32


def test_unicode_text_is_found(mem: Memory) -> None:
    mem.store("Réunion à Montréal le 3 mars", "events", 0.5)
    mem.store("東京で会議", "events", 0.5)
    assert mem.retrieve("montreal reunion").hits
    assert mem.retrieve("東京で会議").hits


@given(st.text(max_size=300))
def test_any_text_query_gives_results_or_clear_error(tmp_path_factory, text: str) -> None:
    home = tmp_path_factory.mktemp("q")
    with Memory(home) as mem:
        mem.store("Hackathon deadline is Feb 15", "projects", 0.9)
        try:
            result = mem.retrieve(text)
        except InvalidInput as exc:
            assert "empty" in str(exc)
        else:
            assert len(result.hits) <= 5


def test_fts_match_quotes_every_term() -> None:
    assert fts_match(["a", "b"]) == '"a" OR "b"'


def test_a_search_sees_tags_and_tree_nodes_added_since_the_last_search(
    seeded: Memory, open_memory: MemoryFactory
) -> None:
    """What a search reuses from the one before (the tree, whether anything is tagged) is
    dropped as soon as this connection or another one writes."""
    assert seeded.retrieve("kubernetes").hits == []
    first = seeded.retrieve("deadline").hits[0].memory.id
    set_extras(seeded, first, ["kubernetes"], None)  # this connection, no transaction
    assert [h.memory.id for h in seeded.retrieve("kubernetes").hits] == [first]
    assert seeded.retrieve("taxes").hits[0].explanation.tree_match is None
    other = open_memory()
    other.tree_add("owner/finance", "Taxes and invoices")
    other.close()
    explained = seeded.retrieve("taxes").hits[0].explanation
    assert explained.tree_match is not None and explained.tree_match.startswith("owner/finance")


def test_a_search_inside_a_transaction_that_rolls_back_leaves_no_trace(seeded: Memory) -> None:
    assert seeded.retrieve("taxes").hits[0].explanation.tree_match is None
    with pytest.raises(RuntimeError), seeded.db.transaction():
        seeded.tree_add("owner/finance", "Taxes and invoices")
        assert seeded.retrieve("taxes").hits[0].explanation.tree_match is not None
        raise RuntimeError("roll back")
    assert seeded.retrieve("taxes").hits[0].explanation.tree_match is None
