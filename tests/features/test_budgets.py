"""Budgets: one unit (the tokens of a memory's text) and the best result always fits."""

from __future__ import annotations

from tests.clikit import Cli
from tiermem.core.tokens import count_tokens

LONG = (
    "The release checklist: freeze the branch on Monday, run the full integration suite, "
    "ask the security team for a review of every new dependency, write the changelog with "
    "links to each merged pull request, tag the release candidate, deploy it to staging, "
    "watch the error rate for a day, then promote it to production during office hours."
)


def test_a_small_budget_returns_the_best_result_shortened(cli: Cli) -> None:
    cli.json("store", "--text", LONG, "--category", "release")
    assert count_tokens(LONG) > 50
    found = cli.json("retrieve", "release checklist", "--budget", "20")
    [hit] = found["results"]
    assert hit["text"].endswith(" […]") and LONG.startswith(hit["text"][:-4])
    assert found["tokens"] == count_tokens(hit["text"]) <= 20
    assert any("shortened" in n for n in found["notes"])
    recalled = cli.json("recall", "release checklist", "--budget", "20")
    [entry] = recalled["entries"]
    assert entry["shortened"] and entry["content"] == hit["text"]
    assert recalled["token_count"] == found["tokens"]  # the same unit and the same fit


def test_budgets_count_the_same_text_tokens_in_retrieve_and_recall(cli: Cli) -> None:
    for i in range(6):
        cli.json(
            "store", "--text", f"Backup job {i} copies the photos to the NAS", "--category", "home"
        )
    found = cli.json("retrieve", "backup photos", "--budget", "50")
    recalled = cli.json("recall", "backup photos", "--budget", "50")
    assert found["tokens"] == sum(count_tokens(r["text"]) for r in found["results"]) <= 50
    assert recalled["token_count"] == found["tokens"]
    assert len(recalled["entries"]) == len(found["results"]) >= 1
    assert not any(e.get("shortened") for e in recalled["entries"])


def test_a_budget_too_small_for_any_text_returns_nothing_with_a_note(cli: Cli) -> None:
    cli.json("store", "--text", LONG, "--category", "release")
    recalled = cli.json("recall", "release checklist", "--budget", "1")
    assert recalled["entries"] == [] and "no entry fits the token budget" in recalled["notes"]
