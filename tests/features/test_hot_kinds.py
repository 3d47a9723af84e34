"""Hot memory keeps each item's kind: a promoted fact about a person, a preference or a decision
is a key fact, not a critical lesson; facts stored without a category land where a person would
look; the owner profile follows the newest statement of each field. CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clikit import Cli


def sections(markdown: str) -> dict[str, str]:
    """MEMORY.md's sections by title."""
    out: dict[str, str] = {}
    for part in markdown.split("\n## ")[1:]:
        title, _, body = part.partition("\n")
        out[title.strip()] = body
    return out


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("My new manager is Diego Alvarez", "people/diego-alvarez"),
        ("Sarah, my wife, loves hiking in the Alps", "people/sarah"),
        ("my sister Ada lives in Leeds with her two kids", "people/ada"),
        ("I prefer short answers without emojis", "owner/preferences"),
        ("We decided to use Postgres 16 for the billing service", "decisions"),
        ("I moved to Porto last weekend", "owner/profile"),
    ],
)
def test_a_promoted_fact_keeps_its_kind(cli: Cli, text: str, category: str) -> None:
    fact = cli.json("store", "--text", text)
    assert fact["category"] == category and fact["placed_by_content"] is True
    lesson = cli.json("store", "--text", "Never deploy on Fridays after 4pm")
    assert lesson["category"] == "lessons"
    for memory in (fact, lesson):
        cli.json("promote", memory["id"])
    code, out, _ = cli("hot")
    shown = sections(out)
    assert code == 0 and f"[{category}] {text}" in shown["Key Facts"]
    assert text not in shown["Critical Lessons"]
    assert "Never deploy on Fridays after 4pm" in shown["Critical Lessons"]


def test_a_hand_edit_of_memory_md_keeps_the_key_facts(cli: Cli, home: Path) -> None:
    fact = cli.json("store", "--text", "My new manager is Diego Alvarez")["id"]
    cli.json("promote", fact)
    cli.json("hot", "--add-task", "Send the onboarding form")
    memory_md = home / "MEMORY.md"
    text = memory_md.read_text()
    assert "## Key Facts" in text
    memory_md.write_text(
        text.replace("- [pending] Send", "- [pending] Book the flight\n- [pending] Send")
    )
    hot = cli.json("hot")["hot"]
    assert [x["text"] for x in hot["critical_lessons"]] == ["My new manager is Diego Alvarez"]
    assert len(hot["active_context"]["tasks"]) == 2


def test_placement_without_a_category(cli: Cli) -> None:
    cli.json("hot", "--add-project", "Ledgerly")

    def placed(text: str) -> str:
        return str(cli.json("store", "--text", text)["category"])

    assert placed("remind me to call mum on Friday") == "tasks"
    assert placed("i need to renew my passport by dec 3") == "tasks"
    assert placed("we decided to move Ledgerly to Postgres") == "projects/ledgerly/decisions"
    assert placed("We agreed to move the standup to 10am") == "decisions"
    assert placed("Ledgerly invoices are generated every night at 2am") == "projects/ledgerly"
    assert placed("I really like dark roast coffee in the morning") == "owner/preferences"
    assert placed("Priya Natarajan is my new boss") == "people/priya-natarajan"
    assert placed("btw my landlord is Mr. Sousa, he lives upstairs") == "people/sousa"
    assert placed("Accepted the offer, I start at Northwind in May") != "lessons"


def claude_export(path: Path, conversations: list[tuple[str, list[str]]]) -> Path:
    """A claude.ai export: one conversation per (date, what the person said)."""
    out = []
    for n, (day, lines) in enumerate(conversations):
        messages = []
        for i, line in enumerate(lines):
            messages.append({"uuid": f"u{n}{i}", "text": line, "sender": "human"})
            messages.append(
                {"uuid": f"a{n}{i}", "text": "Noted, I'll remember that!", "sender": "assistant"}
            )
        out.append(
            {
                "uuid": f"{path.stem}-conversation-{n}",
                "name": f"chat {n}",
                "created_at": f"{day}T09:00:00.000000Z",
                "chat_messages": messages,
            }
        )
    path.write_text(json.dumps(out))
    return path


def test_the_owner_profile_follows_the_newest_statement(cli: Cli, tmp_path: Path) -> None:
    cli.json("hot", "--update", "owner_profile", json.dumps({"city": "Lisbon", "timezone": "WET"}))
    history = claude_export(
        tmp_path / "a.json",
        [
            ("2025-02-01", ["My manager is Sam Okoro", "I work at Initech as a backend dev"]),
            ("2025-06-01", ["i moved to porto last weekend", "my new boss is Diego Alvarez"]),
        ],
    )
    cli.json("import", "--from", "claude-ai", str(history))
    profile = cli.json("hot")["hot"]["owner_profile"]
    assert profile["city"] == "Porto" and profile["manager"] == "Diego Alvarez"
    assert profile["employer"] == "Initech" and profile["timezone"] == "WET"
    assert "location" not in profile  # the key the profile already had is kept
    older = claude_export(
        tmp_path / "b.json", [("2025-03-01", ["We moved to Berlin.", "I'm vegetarian now"])]
    )
    cli.json("import", "--from", "claude-ai", str(older))
    profile = cli.json("hot")["hot"]["owner_profile"]
    assert profile["city"] == "Porto"  # an older statement does not replace a newer one
    assert profile["diet"] == "vegetarian"  # but fills a field the profile lacked
    talk = tmp_path / "now.txt"
    talk.write_text(
        "User: Just relocated to Lyon for the new job!\nAssistant: So you moved to Nice?\n"
    )
    cli.json("conversation-end", str(talk))
    assert cli.json("hot")["hot"]["owner_profile"]["city"] == "Lyon"
