"""`context` injects only memories above the relevance threshold, gives episode abstracts their
own small budget, and reports match count, injected count and top score."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Clock
from tiermem.core.engine import Memory
from tiermem.core.tokens import count_tokens
from tiermem.core.transcript import parse
from tiermem.tui.cli import run

BENCH = Path(__file__).parents[2] / "benchmarks" / "context_threshold.py"


def measure(thresholds: list[float]) -> list[dict[str, float]]:
    """The benchmark's own measurement (benchmarks/context_threshold.py)."""
    spec = importlib.util.spec_from_file_location("context_threshold", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result: list[dict[str, float]] = module.run(thresholds)
    return result


def context(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> Any:
    assert run(["--home", str(home), "--json", "context", *args]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def home(tmp_path: Path, clock: Clock) -> Path:
    with Memory(tmp_path / "home", clock=clock) as mem:
        mem.store("Ledgerly stores invoices in PostgreSQL 16 on the db-prod host.", "projects")
        mem.store("The user drinks oat milk flat whites and avoids sugar.", "preferences")
        for i in range(12):
            text = f"user: Ledgerly invoices session {i}: we reviewed PostgreSQL query plans, part {i}."
            mem.conversation_end(parse(text), text)
    return tmp_path / "home"


def test_an_unrelated_message_injects_nothing_and_says_why(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    out = context(capsys, home, "-q", "What is the capital city of Australia?")
    assert out["memories"] == [] and out["injected_count"] == 0
    assert out["top_score"] < out["threshold"]
    assert "## Relevant memories" not in out["context"]


def test_a_related_message_reports_matches_injected_and_top_score(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    out = context(capsys, home, "-q", "Which database does Ledgerly keep invoices in?")
    assert out["injected_count"] >= 1 and out["match_count"] >= out["injected_count"]
    assert out["top_score"] >= out["threshold"] == 0.35
    assert "PostgreSQL 16" in out["context"]
    everything = context(capsys, home, "-q", "Which database does Ledgerly keep invoices in?")
    assert everything["tokens"]["total"] == count_tokens(everything["context"]) <= 3000


def test_episode_abstracts_keep_to_their_own_budget(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    out = context(capsys, home, "-q", "What did we review about Ledgerly PostgreSQL query plans?")
    assert out["episodes"] and "## Related conversations" in out["context"]
    assert 0 < out["tokens"]["episodes"] <= 200
    section = out["context"].split("## Related conversations")[1]
    assert all(len(line) < 260 for line in section.strip().splitlines())


def test_the_trivial_filter_stays(capsys: pytest.CaptureFixture[str], home: Path) -> None:
    out = context(capsys, home, "-q", "thanks, ok!")
    assert out["trivial"] and out["memories"] == [] and out["episodes"] == []


def test_the_default_threshold_is_precise_on_the_hand_labelled_set() -> None:
    without, chosen = measure([0.0, 0.35])
    assert chosen["precision"] > without["precision"]
    assert chosen["unrelated_with_injection"] == 0 and chosen["recall"] >= 0.8
