"""Working memory: per session, size-limited, shown by context, folded and cleared at the end of
the conversation; through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clikit import Cli

STATE = {
    "goal": "send the project update email to John",
    "plan": ["get_recipient", "compose", "send"],
    "facts": {"project_deadline": "2025-04-10"},
    "recent_observations": ["draft created"],
    "active_skill": "send_email",
}


def test_set_show_merge_and_clear_per_session(cli: Cli) -> None:
    cli.json("store", "--text", "a first fact makes the home", "--category", "ci")
    assert cli.json("working", "show", "--session", "s1")["working_memory"] == {}
    saved = cli.json("working", "set", json.dumps(STATE), "--session", "s1")
    assert saved["working_memory"] == STATE and 0 < saved["tokens"] <= saved["limit_tokens"]
    assert cli.json("working", "show", "--session", "s2")["working_memory"] == {}
    merged = cli.json(
        "working",
        "set",
        '{"facts": {"to": "john@example.org"}, "active_skill": null}',
        "--session",
        "s1",
        "--merge",
    )["working_memory"]
    assert merged["facts"] == {"project_deadline": "2025-04-10", "to": "john@example.org"}
    assert "active_skill" not in merged and merged["goal"] == STATE["goal"]
    assert cli.json("working", "clear", "--session", "s1")["cleared"] == merged
    assert cli.json("working", "show", "--session", "s1")["working_memory"] == {}


def test_over_the_limit_is_refused_with_exit_5_and_nothing_changes(cli: Cli) -> None:
    cli.json("working", "set", json.dumps(STATE), "--session", "s1")
    huge = {"facts": {f"k{i}": "some words that cost tokens " * 3 for i in range(200)}}
    code, out, err = cli("working", "set", json.dumps(huge), "--session", "s1")
    assert code == 5 and "LimitExceeded" not in out and "over the limit of 2000" in err
    assert "Traceback" not in err
    assert cli.json("working", "show", "--session", "s1")["working_memory"] == STATE
    code, _, err = cli("working", "set", "[1, 2]", "--session", "s1")
    assert code == 3 and "JSON object" in err
    code, _, err = cli("working", "set", "{not json", "--session", "s1")
    assert code == 3 and "not valid JSON" in err


def test_context_shows_the_sessions_working_memory(cli: Cli) -> None:
    cli.json("working", "set", json.dumps(STATE), "--session", "s1")
    block = cli.json("context", "--session", "s1")
    assert "## Working memory" in block["context"] and "send_email" in block["context"]
    other = cli.json("context", "--session", "s2")
    assert "## Working memory" not in other["context"]
    tight = cli.json("context", "--session", "s1", "--budget", "60")
    assert tight["tokens"]["total"] <= 60 and "working memory left out" in " ".join(tight["notes"])


def test_conversation_end_folds_the_working_memory_into_its_report_and_clears_it(
    cli: Cli, tmp_path: Path
) -> None:
    cli.json("working", "set", json.dumps(STATE), "--session", "s1")
    transcript = tmp_path / "t.txt"
    transcript.write_text(
        "User: please email John the project update, the deadline is April 10\n"
        "Assistant: Done, I sent the update to John with the April 10 deadline.\n"
    )
    report = cli.json("conversation-end", str(transcript), "--session", "s1")
    assert report["working_memory"] == STATE
    assert cli.json("working", "show", "--session", "s1")["working_memory"] == {}
