"""LLM mode keeps rule mode's contract: its prompt states the same rules, items the LLM made of
the assistant's acknowledgements are dropped, and the owner profile comes from the person's own
words. Through `conversation-end --mode llm` against a real loopback server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.clikit import cli_json
from tests.write.conftest import completion

TALK = (
    "User: i moved to porto last weekend\n"
    "Assistant: Got it, I'll update your location.\n"
    "User: remind me to call mum on Friday\n"
    "Assistant: Sure, I'll remind you to call your mum on Friday.\n"
)


def answer() -> dict[str, Any]:
    return {
        "facts": [
            {"text": "The user moved to Porto", "category": "owner/profile", "importance": 0.8},
            {"text": "I'll update your location.", "category": "notes", "importance": 0.5},
            {
                "text": "The assistant will remind the user on Friday",
                "category": "tasks",
                "importance": 0.6,
            },
        ],
        "decisions": [],
        "lessons": ["Got it, I'll update your location."],
        "tasks": ["Call mum on Friday", "Sure, I'll remind you to call your mum on Friday."],
        "events": ["Noted!"],
        "people": [],
        "urls": [],
        "commands": [],
        "paths": [],
        "summary": "moved to Porto",
    }


def test_llm_mode_keeps_the_person_and_drops_the_assistants_words(
    capsys, home: Path, tmp_path: Path, chat_server, monkeypatch
) -> None:
    server = chat_server(lambda body: (200, completion(json.dumps(answer()))))
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "tiny-test")
    transcript = tmp_path / "t.txt"
    transcript.write_text(TALK)
    cli_json(capsys, home, "hot", "--update", "owner_profile", '{"location": "Lisbon"}')
    ended = cli_json(capsys, home, "conversation-end", "--mode", "llm", str(transcript))
    assert ended["mode"] == "llm" and ended["fallback"] is None
    prompt = server.requests[-1]["body"]["messages"][0]["content"]
    for rule in ("acknowledgements, promises", "explicit lessons or rules", "own to-dos"):
        assert rule in prompt
    hot = cli_json(capsys, home, "hot")["hot"]
    assert [t["text"] for t in hot["active_context"]["tasks"]] == ["Call mum on Friday"]
    assert [x["text"] for x in hot["critical_lessons"]] == ["The user moved to Porto"]
    assert hot["active_context"]["events"] == []
    assert hot["owner_profile"] == {"location": "Porto"}
    stored = json.dumps(cli_json(capsys, home, "export", "--format", "json")["memories"])
    assert "The user moved to Porto" in stored
    assert "I'll update" not in stored and "assistant will remind" not in stored
