"""`context` treats every real question as one (a question mark, a wh-word in any case, "whats",
a name) and injects what answers it; greetings, thanks and small talk stay trivial. CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clikit import cli_json

FACTS = {
    "cat": "My cat is called Miso",
    "offsite": "The team offsite is in Sintra on March 3",
    "move": "I moved to Porto last weekend",
    "manager": "My new manager is Diego Alvarez",
    "db": "Ledgerly now uses Postgres",
}


@pytest.fixture
def stored(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    ids = {
        key: cli_json(capsys, home, "store", "--text", text)["id"] for key, text in FACTS.items()
    }
    return home, ids


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("what is my cat called", "cat"),
        ("whats my cats name", "cat"),
        ("What's the name of my cat?", "cat"),
        ("where is the team offsite?", "offsite"),
        ("Where's the offsite", "offsite"),
        ("offsite when?", "offsite"),
        ("Where do I live now and who is my manager?", "manager"),
        ("who's my manager", "manager"),
        ("Diego?", "manager"),
        ("which database does ledgerly use", "db"),
        ("what db ledgerly use", "db"),
        ("WHICH DB DOES LEDGERLY USE", "db"),
    ],
)
def test_a_question_is_never_trivial_and_gets_its_answer(
    capsys, stored: tuple[Path, dict[str, str]], question: str, answer: str
) -> None:
    home, ids = stored
    block = cli_json(capsys, home, "context", "--query", question)
    assert block["trivial"] is False
    assert ids[answer] in block["memories"], block["notes"]


@pytest.mark.parametrize(
    "message",
    [
        "hi",
        "thanks!",
        "ok cool",
        "hey there",
        "how are you?",
        "thx!!",
        "Thanks Diego!",
        "good morning :)",
        "ok thanks, bye",
        "Yes, sure, sounds good to me",
        "what's up?",
    ],
)
def test_greetings_and_thanks_stay_trivial(
    capsys, stored: tuple[Path, dict[str, str]], message: str
) -> None:
    home, _ = stored
    block = cli_json(capsys, home, "context", "--query", message)
    assert block["trivial"] is True and block["memories"] == []


def test_a_named_entity_with_content_is_not_trivial(
    capsys, stored: tuple[Path, dict[str, str]]
) -> None:
    home, ids = stored
    block = cli_json(capsys, home, "context", "--query", "Diego Alvarez intro call")
    assert block["trivial"] is False and ids["manager"] in block["memories"]
