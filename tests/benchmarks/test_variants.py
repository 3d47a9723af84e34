"""The robustness benchmark's variants: LongMemEval's conversations as memories of other
shapes, built from a small question in LongMemEval's format."""

from __future__ import annotations

from typing import Any

from benchmarks.longmemeval import build
from benchmarks.variants import (
    BUILDERS,
    build_cut,
    build_facts,
    build_sessions,
    build_turns,
    build_user,
    split_half,
)

REPLY = (
    "There are many good options for a trip like this one, and the right choice depends on "
    "your budget, the season, how much time you have and what you enjoy doing most. " * 4
)


def question() -> tuple[dict[str, Any], list[Any]]:
    sessions = [
        [
            {"role": "user", "content": "I decided to adopt a rescue dog named Biscuit today."},
            {"role": "assistant", "content": REPLY},
        ],
        [
            {"role": "user", "content": "Can you suggest a hiking trail near Denver?"},
            {
                "role": "assistant",
                "content": "Biscuit would love Mount Falcon. " + REPLY,
                "has_answer": True,
            },
            {
                "role": "user",
                "content": "I prefer quiet trails early in the morning with my dog.",
                "has_answer": True,
            },
        ],
    ]
    q = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "Where could I hike with my dog?",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["s1", "s2"],
        "haystack_dates": ["2023/05/20 (Sat) 14:21", "2023/05/21 (Sun) 09:00"],
        "answer_session_ids": ["s2"],
    }
    return q, sessions


def test_turns_is_longmemeval_as_it_is() -> None:
    q, sessions = question()
    stack, plain = build_turns(q, sessions), build(q, sessions)
    assert stack.texts == plain.texts and stack.evidence_turns == plain.evidence_turns
    assert stack.categories == ["chat/user", "chat/assistant"] * 2 + ["chat/user"]


def test_user_keeps_only_the_users_turns_and_their_evidence() -> None:
    stack = build_user(*question())
    assert set(stack.roles) == {"user"} and len(stack.texts) == 3
    assert stack.evidence_turns == {("s2", 2)}


def test_cut_makes_assistant_turns_as_short_as_user_turns() -> None:
    q, sessions = question()
    stack = build_cut(q, sessions)
    longest_user = max(
        len(t["content"].split()) for s in sessions for t in s if t["role"] == "user"
    )
    for text, role in zip(stack.texts, stack.roles, strict=True):
        assert len(text.split()) <= longest_user
        if role == "user":
            assert any(text == t["content"] for s in sessions for t in s)
    assert stack.evidence_turns == {("s2", 1), ("s2", 2)}
    assert build_cut(q, sessions).texts == stack.texts  # deterministic


def test_facts_are_the_distilled_facts_and_evidence_comes_from_evidence_turns() -> None:
    q, sessions = question()
    stack = build_facts(q, sessions)
    assert stack.texts, "the sessions distil to facts"
    turns = {t["content"] for s in sessions for t in s}
    for text in stack.texts:
        assert any(text.removesuffix(" …")[:40] in turn for turn in turns)
    evidence = {
        stack.texts[i] for i, ts in enumerate(stack.turns) if set(ts) & stack.evidence_turns
    }
    assert any("quiet trails" in text for text in evidence)
    assert not any("Biscuit today" in text for text in evidence)
    assert all(c != "chat/user" or True for c in stack.categories)


def test_sessions_are_one_memory_each_with_the_answer_sessions_as_evidence() -> None:
    stack = build_sessions(*question())
    assert len(stack.texts) == 2 and stack.texts[1].startswith("Can you suggest")
    assert stack.evidence_turns == {("s2", 0)}


def test_every_variant_keeps_the_question_and_dates_its_memories() -> None:
    q, sessions = question()
    for name, builder in BUILDERS.items():
        stack = builder(q, sessions)
        assert stack.question is q, name
        assert len(stack.texts) == len(stack.dates) == len(stack.categories) == len(stack.turns)


def test_questions_split_by_id_into_two_stable_halves() -> None:
    ids = [f"question-{i}" for i in range(200)]
    halves = [split_half(i) for i in ids]
    assert halves == [split_half(i) for i in ids]
    assert 60 < halves.count("dev") < 140
