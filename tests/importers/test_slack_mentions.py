"""A Slack import names people as Slack shows them: `<@U01>` becomes `@Ann` from `users.json`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.clikit import cli_json

FIXTURE = Path(__file__).parent.parent / "fixtures" / "import" / "slack"
DAY = [
    {
        "type": "message",
        "user": "U01",
        "text": "<@U02> decided we move the standup to 9:30 from next week.",
        "ts": "1770282000.000100",
    },
    {
        "type": "message",
        "user": "U02",
        "text": "Thanks <@U01|ann>, I will tell <@U99> and the team.",
        "ts": "1770282060.000200",
    },
]


def test_mentions_are_named_from_the_exports_users(capsys, tmp_path: Path) -> None:
    export = tmp_path / "slack"
    shutil.copytree(FIXTURE, export)
    (export / "general" / "2026-02-05.json").write_text(json.dumps(DAY), encoding="utf-8")
    home = tmp_path / "home"
    cli_json(capsys, home, "import", "--from", "slack", str(export))
    texts = [m["text"] for m in cli_json(capsys, home, "export", "--format", "json")["memories"]]
    said = "\n".join(texts)
    assert "@Ben decided we move the standup to 9:30 from next week." in texts
    # Ben is not the export's owner (Ann wrote the most): what he said is said to be his
    assert "Ben said: Thanks @Ann, I will tell @U99 and the team." in texts  # unknown id kept
    assert "<@" not in said


def test_what_someone_else_said_is_never_the_owners_fact(capsys, tmp_path: Path) -> None:
    export = tmp_path / "slack"
    shutil.copytree(FIXTURE, export)
    day = [
        {"type": "message", "user": "U01", "text": "I live in Lisbon.", "ts": "1770282000.1"},
        {
            "type": "message",
            "user": "U02",
            "text": "Personal news: I moved to Austin last week. Loving the tacos so far.",
            "ts": "1770282060.2",
        },
    ]
    (export / "general" / "2026-02-06.json").write_text(json.dumps(day), encoding="utf-8")
    home = tmp_path / "home"
    cli_json(capsys, home, "import", "--from", "slack", str(export))
    found = cli_json(capsys, home, "retrieve", "where do I live now?")["results"]
    assert found and "Lisbon" in found[0]["text"]
    texts = [m["text"] for m in cli_json(capsys, home, "export", "--format", "json")["memories"]]
    theirs = [t for t in texts if ("Austin" in t or "tacos" in t) and "Conversation" not in t]
    assert theirs and all(t.startswith("Ben said: ") for t in theirs)
