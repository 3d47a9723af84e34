"""Neighbouring query words as phrases (`adjacent_pairs`): through the CLI, on and off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem.core.terms import adjacent_pairs, fts_match, query_terms
from tiermem.tui.cli import run

APART = "the recipe my aunt wrote needs a cocktail"
SIDE_BY_SIDE = "my aunt wrote down a cocktail recipe today"


def retrieve(capsys: pytest.CaptureFixture[str], home: Path, query: str) -> list[str]:
    assert run(["--home", str(home), "--json", "retrieve", query]) == 0
    found = json.loads(capsys.readouterr().out)
    return [hit["text"] for hit in found["results"]]


@pytest.fixture
def home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Two memories with the same words and length; the one holding the pair is the less
    important, so that without phrases it loses the tie-break."""
    home = tmp_path / "home"
    for text, importance in ((APART, "0.9"), (SIDE_BY_SIDE, "0.3")):
        stored = ["store", "--text", text, "--category", "notes", "--importance", importance]
        assert run(["--home", str(home), *stored]) == 0
    capsys.readouterr()
    return home


def test_memory_with_the_query_words_side_by_side_ranks_first(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    (home / "config.toml").write_text("[retrieval]\nadjacent_pairs = true\n")
    assert retrieve(capsys, home, "which cocktail recipe did I note?") == [SIDE_BY_SIDE, APART]


def test_by_default_words_rank_alone(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    assert retrieve(capsys, home, "which cocktail recipe did I note?") == [APART, SIDE_BY_SIDE]


def test_pairs_are_search_terms_side_by_side_in_the_query() -> None:
    query = 'Did I try the "cocktail recipe" at Sam\'s, or a cocktail?'
    terms = query_terms(query, 32)
    assert adjacent_pairs(query, terms) == [("cocktail", "recipe")]
    assert fts_match(terms[:2], pairs=[("cocktail", 'reci"pe')]) == (
        '"try" OR "cocktail" OR "cocktail reci""pe"'
    )
