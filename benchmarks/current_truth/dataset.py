"""The dataset as data: each person's export, questions, acknowledgements and the keyword rule.

A person is a folder `data/<person>/` holding `questions.json` and the files tiermem imports (an
`export/` rendered from `chats.txt`, or an OpenClaw `workspace/`). A keyword names an answer: it
matches a memory's text case-insensitively as a whole word or phrase ("Hanna" does not match
"Hannah"), so a memory holds the current answer when it contains one of the `current` keywords.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
TYPES = ("current", "as_of", "changes")


@dataclass(frozen=True)
class Change:
    """One change a `changes` question expects: old keywords, new ones ([] when closed)."""

    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    id: str
    person: str
    type: str
    question: str
    current: tuple[str, ...]
    superseded: tuple[str, ...]
    as_of: str | None = None
    since: str | None = None
    expected: tuple[Change, ...] = ()
    not_expected: tuple[str, ...] = ()


@dataclass(frozen=True)
class Person:
    name: str
    format: str  # the `import --from` format
    path: Path  # what `import` reads
    voice: str
    questions: tuple[Question, ...]
    acks: tuple[str, ...]
    timeline: tuple[dict[str, Any], ...] = field(default=())


def _question(raw: dict[str, Any]) -> Question:
    expected = tuple(Change(tuple(c["old"]), tuple(c["new"])) for c in raw.get("expected", []))
    return Question(
        id=raw["id"],
        person=raw["person"],
        type=raw["type"],
        question=raw["question"],
        current=tuple(raw["current"]),
        superseded=tuple(raw["superseded"]),
        as_of=raw.get("as_of"),
        since=raw.get("since"),
        expected=expected,
        not_expected=tuple(raw.get("not_expected", [])),
    )


def load_person(folder: Path) -> Person:
    """One person from their questions.json."""
    raw = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
    return Person(
        name=raw["person"],
        format=raw["format"],
        path=folder / raw["path"],
        voice=raw["voice"],
        questions=tuple(_question(q) for q in raw["questions"]),
        acks=tuple(raw["acks"]),
        timeline=tuple(raw["timeline"]),
    )


def load_people(names: list[str] | None = None) -> list[Person]:
    """Every person of the dataset (or those named), in name order."""
    folders = sorted(p.parent for p in DATA.glob("*/questions.json"))
    people = [load_person(f) for f in folders]
    return [p for p in people if names is None or p.name in names]


@cache
def _pattern(keyword: str) -> re.Pattern[str]:
    start = r"\b" if re.match(r"\w", keyword) else ""
    end = r"\b" if re.search(r"\w$", keyword) else ""
    return re.compile(start + re.escape(keyword) + end, re.IGNORECASE)


def has(text: str, keywords: tuple[str, ...] | list[str]) -> bool:
    """Whether the text holds any of the keywords (whole words, any case)."""
    return any(_pattern(k).search(text) for k in keywords)


def first_at(text: str, keywords: tuple[str, ...] | list[str]) -> int | None:
    """Where the first of the keywords starts in the text, if any does."""
    hits = [m.start() for k in keywords if (m := _pattern(k).search(text))]
    return min(hits) if hits else None


_SPACE = re.compile(r"[^\w']+")


def normal(text: str) -> str:
    """Lower case, punctuation and runs of spaces as one space: how acknowledgements compare."""
    return _SPACE.sub(" ", text.lower().replace("’", "'")).strip()


def is_ack(memory: str, acks: tuple[str, ...]) -> str | None:
    """The acknowledgement a memory's text repeats (it contains one, or is a 4+ word piece of
    one), else None."""
    text = normal(memory)
    if not text:
        return None
    for ack in acks:
        phrase = normal(ack)
        if phrase in text or (len(text.split()) >= 4 and text in phrase):
            return ack
    return None


def day(text: str) -> date:
    """A YYYY-MM-DD date."""
    return date.fromisoformat(text)


@dataclass(frozen=True)
class Said:
    """One dated text of a person's history and who wrote it: "user" (the person, or the
    agent's own notes about them), "assistant", or "other" (a coworker in Slack)."""

    when: date
    side: str
    text: str


def history(person: Person) -> list[Said]:
    """Everything in a person's source files, oldest first (chats file, or OpenClaw notes)."""
    from benchmarks.current_truth.script import read_script

    folder = person.path.parent
    if person.format == "openclaw":
        notes = sorted((person.path / "memory").glob("*.md"))
        return [
            Said(date.fromisoformat(n.stem), "user", n.read_text(encoding="utf-8")) for n in notes
        ]
    script = read_script(folder / "chats.txt")
    said = []
    for chat in script.chats:
        for m in chat.messages:
            side = "user" if m.speaker == script.me else "other"
            side = "assistant" if script.is_assistant(m.speaker) or m.speaker == "result" else side
            said.append(Said(m.at.astimezone(script.tz).date(), side, m.text))
    return sorted(said, key=lambda s: s.when)
