"""The current-truth dataset is well formed: exports import, questions are complete and dated
inside the history, keywords name things the people said, acknowledgements are assistant-only.
(Shape only: no scores, no timings.)"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from benchmarks.current_truth import render
from benchmarks.current_truth.dataset import (
    TYPES,
    Person,
    Question,
    Said,
    has,
    history,
    load_people,
    normal,
)
from benchmarks.current_truth.script import read_script

PEOPLE = load_people()
QUESTIONS = [q for p in PEOPLE for q in p.questions]
FORMATS = {"chatgpt", "claude-ai", "claude-code", "slack", "openclaw"}
TIERMEM = Path(sys.executable).parent / "tiermem"


def said_by(person: Person, side: str, until: date | None = None) -> str:
    """All the text one side wrote, up to a day, as one string."""
    texts = [s.text for s in history(person) if s.side == side]
    if until is not None:
        texts = [s.text for s in history(person) if s.side == side and s.when <= until]
    return "\n".join(texts)


def span(person: Person) -> tuple[date, date]:
    said: list[Said] = history(person)
    return said[0].when, said[-1].when


def test_the_dataset_has_its_people_formats_and_counts() -> None:
    assert len(PEOPLE) >= 6
    assert {p.format for p in PEOPLE} == FORMATS
    assert len({p.voice for p in PEOPLE}) == len(PEOPLE)
    for person in PEOPLE:
        first, last = span(person)
        assert (last - first).days >= 90, person.name
        assert len(person.timeline) >= 8, person.name
        assert len(person.questions) >= 15, person.name
        assert {q.type for q in person.questions} == set(TYPES), person.name


@pytest.mark.parametrize("person", PEOPLE, ids=lambda p: p.name)
def test_the_committed_exports_match_the_chats_files(person: Person, tmp_path: Path) -> None:
    if person.format == "openclaw":
        assert (person.path / "memory").is_dir()
        return
    render.render(person.path.parent, tmp_path / "export")
    assert render.same_tree(tmp_path / "export", person.path), "run benchmarks.current_truth.render"


@pytest.mark.parametrize("person", PEOPLE, ids=lambda p: p.name)
def test_every_export_parses_with_the_importers_dry_run(person: Person, tmp_path: Path) -> None:
    argv = [str(TIERMEM), "--home", str(tmp_path / "home"), "--agent-id", person.name, "--json"]
    argv += ["import", "--from", person.format, str(person.path), "--dry-run"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["skipped"] == []
    if person.format == "openclaw":
        assert plan["new"] >= len(list((person.path / "memory").glob("*.md")))
    else:
        script = read_script(person.path.parent / "chats.txt")
        expected = len(list(person.path.glob("*/*.json"))) if person.format == "slack" else None
        assert plan["conversations"] == (expected or len(script.chats))
    assert not (tmp_path / "home").exists(), "a dry run writes nothing"


@pytest.mark.parametrize(
    "person", [p for p in PEOPLE if p.format != "openclaw"], ids=lambda p: p.name
)
def test_every_message_is_dated_inside_the_history(person: Person) -> None:
    script = read_script(person.path.parent / "chats.txt")
    assert 12 <= len(script.chats) <= 25
    for chat in script.chats:
        times = [m.at for m in chat.messages]
        assert times == sorted(times), chat.title
        assert all(date(2026, 7, 1) <= t.date() <= date(2026, 11, 30) for t in times)


def _stamps(person: Person) -> list[object]:
    """The time field of every message, read from the export as the importer would."""
    root = person.path
    if person.format == "chatgpt":
        convs = json.loads((root / "conversations.json").read_text(encoding="utf-8"))
        nodes = [n["message"] for c in convs for n in c["mapping"].values() if n["message"]]
        return [m["create_time"] for m in nodes if m["author"]["role"] in ("user", "assistant")]
    if person.format == "claude-ai":
        convs = json.loads((root / "conversations.json").read_text(encoding="utf-8"))
        return [m["created_at"] for c in convs for m in c["chat_messages"]]
    if person.format == "claude-code":
        lines = [json.loads(x) for f in root.rglob("*.jsonl") for x in f.read_text().splitlines()]
        return [x["timestamp"] for x in lines]
    days = [json.loads(f.read_text(encoding="utf-8")) for f in root.glob("*/*.json")]
    return [m["ts"] for d in days for m in d]


@pytest.mark.parametrize(
    "person", [p for p in PEOPLE if p.format != "openclaw"], ids=lambda p: p.name
)
def test_every_exported_message_carries_its_time_in_the_formats_field(person: Person) -> None:
    stamps = _stamps(person)
    assert stamps and all(isinstance(s, (str, float)) and s for s in stamps)
    assert len(set(stamps)) > len(stamps) // 2


def test_question_ids_are_unique_and_fields_complete() -> None:
    assert len({q.id for q in QUESTIONS}) == len(QUESTIONS)
    for q in QUESTIONS:
        assert q.type in TYPES and q.question.strip() and q.person
        for word in (*q.current, *q.superseded, *q.not_expected):
            assert word.strip() == word and word, q.id
        if q.type == "current":
            assert q.current, q.id
        if q.type == "as_of":
            assert q.as_of and (q.current or q.superseded), q.id
        if q.type == "changes":
            assert q.since and q.expected, q.id
            assert all(c.old and all(w.strip() for w in (*c.old, *c.new)) for c in q.expected)


@pytest.mark.parametrize("person", PEOPLE, ids=lambda p: p.name)
def test_dates_fall_within_or_before_the_history(person: Person) -> None:
    first, last = span(person)
    for q in person.questions:
        assert q.person == person.name
        for text in (q.as_of, q.since):
            if text:
                assert date.fromisoformat(text) <= last, q.id
        if q.since:
            assert date.fromisoformat(q.since) >= first, q.id
    for change in person.timeline:
        assert first <= date.fromisoformat(change["date"]) <= last, change


@pytest.mark.parametrize("person", PEOPLE, ids=lambda p: p.name)
def test_keywords_name_what_was_said(person: Person) -> None:
    everything = "\n".join(s.text for s in history(person))
    own = said_by(person, "user")
    for q in person.questions:
        if q.current:
            assert has(own, q.current), f"{q.id}: no current keyword in the person's words"
        if q.superseded:
            assert has(everything, q.superseded), f"{q.id}: no superseded keyword anywhere"
        for change in q.expected:
            assert has(own, change.old), f"{q.id}: {change.old}"
            assert not change.new or has(own, change.new), f"{q.id}: {change.new}"


@pytest.mark.parametrize("person", PEOPLE, ids=lambda p: p.name)
def test_questions_before_any_fact_have_nothing_said_yet(person: Person) -> None:
    for q in person.questions:
        if q.type == "as_of" and not q.current:
            assert q.as_of
            before = said_by(person, "user", date.fromisoformat(q.as_of))
            assert not has(before, q.superseded), q.id


@pytest.mark.parametrize("person", [p for p in PEOPLE if p.acks], ids=lambda p: p.name)
def test_acknowledgements_are_the_assistants_only(person: Person) -> None:
    assistant = normal(said_by(person, "assistant"))
    others = normal(said_by(person, "user") + "\n" + said_by(person, "other"))
    for ack in person.acks:
        assert normal(ack) in assistant, ack
        assert normal(ack) not in others, ack


def test_every_question_belongs_to_a_known_person() -> None:
    names = {p.name for p in PEOPLE}
    assert all(isinstance(q, Question) and q.person in names for q in QUESTIONS)
