"""Neighbouring query words as phrases: through the CLI, with the setting on and off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem.core.terms import fts_match
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
    assert retrieve(capsys, home, "which cocktail recipe did I note?") == [SIDE_BY_SIDE, APART]


def test_phrases_off_leaves_plain_word_ranking(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    (home / "config.toml").write_text("[retrieval]\nadjacent_pairs = false\n")
    assert retrieve(capsys, home, "which cocktail recipe did I note?") == [APART, SIDE_BY_SIDE]


def test_pairs_are_quoted_phrases_of_neighbouring_terms() -> None:
    assert fts_match(["a", 'b"c', "d"], pairs=True) == (
        '"a" OR "b""c" OR "d" OR "a b""c" OR "b""c d"'
    )
