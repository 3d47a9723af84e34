"""Search-as-you-type: the word being typed matches as a prefix (`retrieve.search(prefix=True)`,
used by the TUI only); default retrieval is unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tui.demo import NOW, FixedClock
from tiermem.core.engine import Memory
from tiermem.core.retrieve import search
from tiermem.core.terms import prefix_variants, unfinished_word


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("k", []),
        ("ku", ["ku"]),
        ("kube", ["kube"]),
        ("deploy", ["deploy", "deplo", "depl"]),
        ("deployin", ["deployin", "deployi", "deploy"]),
    ],
)
def test_prefix_variants(word: str, expected: list[str]) -> None:
    assert prefix_variants(word) == expected


@pytest.mark.parametrize(
    ("query", "terms", "expected"),
    [
        ("kube", ["kube"], "kube"),
        ("hetzner Kub", ["hetzner", "kub"], "kub"),
        ("kube ", ["kube"], None),  # a space: the word is finished
        ("kube.", ["kube"], None),
        ("deploy to", ["deploy"], None),  # the last word is a stopword, not a term
        ("", [], None),
    ],
)
def test_unfinished_word(query: str, terms: list[str], expected: str | None) -> None:
    assert unfinished_word(query, terms) == expected


def test_prefix_finds_words_being_typed_and_default_ranking_does_not(tmp_path: Path) -> None:
    with Memory(tmp_path / "home", clock=FixedClock(NOW)) as mem:
        mem.store("Our kubernetes cluster runs on hetzner", "infra")
        mem.store("Deploying evoclaw is done by the release script", "projects")
        mem.store("Deplete the old stock first", "misc")

        def found(query: str, prefix: bool) -> list[str]:
            result = search(
                mem.memories,
                mem.trees.load(),
                query,
                now=mem.now(),
                retrieval=mem.cfg.retrieval,
                scoring=mem.cfg.scoring,
                prefix=prefix,
            )
            return [h.memory.text.split()[0] for h in result.hits]

        assert found("kube", prefix=True) == ["Our"]
        assert found("kube", prefix=False) == []
        assert mem.retrieve("kube", reinforce=False).hits == []  # the engine's default
        # past the indexed stem ("deploy" of "deploying"): a shorter prefix still finds it,
        # and never the unrelated "deplete"
        assert found("deployi", prefix=True) == ["Deploying"]
        assert found("hetzner clus", prefix=True) == ["Our"]
        assert found("kube ", prefix=True) == []
        [hit] = search(
            mem.memories,
            mem.trees.load(),
            "clus",
            now=mem.now(),
            retrieval=mem.cfg.retrieval,
            scoring=mem.cfg.scoring,
            prefix=True,
        ).hits
        assert hit.explanation.matched_terms == ("clus…",)
