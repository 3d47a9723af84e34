"""Rule distillation drops knowledge-free lead-ins and keeps a decision once when the assistant
echoes what the user decided."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tiermem.tui.cli import run


def distilled(capsys, tmp_path: Path, text: str) -> dict[str, Any]:
    transcript = tmp_path / "t.txt"
    transcript.write_text(text)
    assert run(["--home", str(tmp_path / "home"), "--json", "distill", str(transcript)]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_filler_lead_ins_are_dropped_from_the_fact(capsys, tmp_path: Path) -> None:
    out = distilled(
        capsys,
        tmp_path,
        "User: Also remember that the staging database is rebuilt every Sunday night.\n"
        "User: Note: the office printer needs a new toner cartridge soon.\n"
        "User: Remember to back up the vault before upgrading.\n",
    )
    texts = [f["text"] for f in out["facts"]]
    assert "The staging database is rebuilt every Sunday night." in texts
    assert "The office printer needs a new toner cartridge soon." in texts
    assert "Remember to back up the vault before upgrading." in texts  # a lesson cue, kept


def test_a_todo_prefix_makes_a_task_without_the_prefix(capsys, tmp_path: Path) -> None:
    out = distilled(
        capsys, tmp_path, "User: TODO: rotate the Stripe webhook secret before the audit.\n"
    )
    assert out["tasks"] == ["Rotate the Stripe webhook secret before the audit."]
    assert [f["kind"] for f in out["facts"]] == ["task"]


def test_the_assistants_echo_of_a_decision_is_merged_into_the_users(capsys, tmp_path: Path) -> None:
    out = distilled(
        capsys,
        tmp_path,
        "User: We decided to use Postgres 16 for the billing service.\n"
        "Assistant: Great, we'll go with Postgres 16 for the billing service then.\n"
        "Assistant: I decided to restart the worker pool tonight.\n"
        "Assistant: The platform team decided to pin Node 20 for the frontend build.\n",
    )
    assert out["decisions"] == [  # the assistant's own plan ("I decided…") is not the user's
        "We decided to use Postgres 16 for the billing service.",
        "The platform team decided to pin Node 20 for the frontend build.",
    ]


def test_conversation_end_stores_an_echoed_decision_once(capsys, tmp_path: Path) -> None:
    transcript = tmp_path / "t.txt"
    transcript.write_text(
        "User: We agreed to move the standup to 9:30 on weekdays.\n"
        "Assistant: Agreed, the standup moves to 9:30 on weekdays.\n"
    )
    home = str(tmp_path / "home")
    assert run(["--home", home, "conversation-end", str(transcript)]) == 0
    capsys.readouterr()
    assert run(["--home", home, "--json", "export", "--format", "json"]) == 0
    texts = [m["text"] for m in json.loads(capsys.readouterr().out)["memories"]]
    assert sum("standup" in t and "Conversation" not in t for t in texts) == 1


def test_store_without_a_category_is_placed_as_distillation_places_it(
    capsys, tmp_path: Path
) -> None:
    home = str(tmp_path / "home")
    assert run(["--home", home, "store", "--text", "We decided to deploy on Tuesdays only"]) == 0
    assert capsys.readouterr().out.endswith(" in decisions (placed by its content)\n")
    assert run(["--home", home, "hot", "--add-project", "Atlas"]) == 0
    capsys.readouterr()
    assert run(["--home", home, "--json", "store", "--text", "Atlas builds take nine minutes"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["category"] == "projects/atlas" and stored["placed_by_content"] is True
    assert (
        run(["--home", home, "--json", "store", "--text", "Atlas docs", "--category", "docs"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["placed_by_content"] is False
