"""A proposed skill's triggers are the words of what was asked, never politeness, time words or
request filler ("please", "thanks", "today", "now", "just", "can you", "could you"). CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clikit import Cli

FILLER = {"please", "pls", "thanks", "thank", "thx", "today", "now", "just", "can", "could"}
FILLER |= {"you", "hey", "tonight", "again", "quickly", "maybe", "want", "need", "help"}
STEPS = ["git pull --rebase", "make docs", "rsync -a site/ web:/srv/docs", "curl -fsS web/health"]


def conversation(path: Path, session: str, ask: str) -> Path:
    lines: list[dict[str, object]] = [{"type": "session", "id": session}]
    lines.append({"type": "message", "message": {"role": "user", "content": ask}})
    for command in STEPS:
        call = {"type": "toolCall", "name": "bash", "arguments": {"command": command}}
        lines.append({"type": "message", "message": {"role": "assistant", "content": [call]}})
    done = "Done, thanks! The docs are live now."
    lines.append({"type": "message", "message": {"role": "assistant", "content": done}})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


ASKS = [
    "Hey, can you please publish the docs today? Thanks!",
    "could u just publish docs now pls, thx",
    "Please publish the documentation again, I need it live today. Thank you so much!",
    "maybe you can quickly publish the docs tonight? thanks in advance",
]


def test_proposed_triggers_are_content_words_only(cli: Cli, tmp_path: Path) -> None:
    for n, ask in enumerate(ASKS):
        cli.json("conversation-end", str(conversation(tmp_path / f"c{n}.jsonl", f"s{n}", ask)))
    [skill] = cli.json("skills", "list")["skills"]
    triggers = cli.json("skills", "show", skill["name"])["skill"]["triggers"]
    words = {w for t in triggers for w in t.casefold().split()}
    assert words and not words & FILLER, triggers
    assert "publish" in words


def test_a_filler_trigger_never_matches(cli: Cli, tmp_path: Path) -> None:
    for n, ask in enumerate(ASKS[:3]):
        cli.json("conversation-end", str(conversation(tmp_path / f"c{n}.jsonl", f"s{n}", ask)))
    name = cli.json("skills", "list")["skills"][0]["name"]
    spec = cli.json("skills", "show", name)["skill"]
    spec["triggers"] = ["please", "can you publish the docs"]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(spec))
    cli.json("skills", "accept", name, "--file", str(edited))
    unrelated = cli.json("context", "--query", "please book a table for two tonight, thanks")
    assert name not in unrelated["context"]
    asked = cli.json("context", "--query", "could you publish the docs for the v2 release")
    assert name in asked["context"]
