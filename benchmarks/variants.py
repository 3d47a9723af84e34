"""LongMemEval reshaped: the same public conversations as memories of other shapes.

A ranking tuned on one benchmark can fit that benchmark's shape (on LongMemEval, short user
turns that hold the answers against long assistant replies) rather than conversations in
general. Each variant keeps the questions and the evidence and changes only what a memory is:

- `turns`: LongMemEval as it is (one memory per turn).
- `user`: the user's turns only (questions whose evidence is only in assistant turns are
  scored at the session level only).
- `cut`: assistant turns cut to lengths drawn from the same question's user-turn lengths (in
  words, deterministically per turn), so both speakers' turns are short and alike.
- `facts`: what `conversation-end` keeps: each session distilled (rule mode, default settings)
  and its facts stored with their category and importance; evidence = the facts distilled from
  evidence turns (a question whose evidence left no fact is scored at the session level only).
- `sessions`: one memory per session (its turns joined); evidence = the answer sessions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.longmemeval import Haystack, build, parse_date
from tiermem.core.config import DistillConfig
from tiermem.core.distill import distill_rule
from tiermem.core.transcript import Message, Transcript
from tiermem.core.warm import MAX_TEXT_BYTES, memory_id

VARIANTS = ("turns", "user", "cut", "facts", "sessions")


@dataclass
class Shaped(Haystack):
    """A haystack whose memories also carry the category and importance they are stored with."""

    categories: list[str] = field(default_factory=list)
    importance: list[float] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)


def split_half(question_id: str) -> str:
    """'dev' or 'test', from a hash of the question's id (stable, independent of file order)."""
    return "dev" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "test"


def _clean(text: str) -> str:
    text = " ".join(str(text).split())
    if len(text.encode()) > MAX_TEXT_BYTES:
        text = text.encode()[: MAX_TEXT_BYTES - 4].decode(errors="ignore")
    return text


def _add(
    stack: Shaped,
    text: str,
    date: str,
    role: str,
    turn: tuple[str, int],
    evidence: bool,
    category: str | None = None,
    importance: float = 0.5,
) -> None:
    """One memory (texts that repeat stand for all their turns, as in `build`)."""
    key = memory_id("bench", text)
    if key not in stack.index:
        stack.index[key] = len(stack.texts)
        stack.texts.append(text)
        stack.dates.append(parse_date(date))
        stack.roles.append(role)
        stack.categories.append(category or f"chat/{role}")
        stack.importance.append(importance)
        stack.turns.append([])
    stack.turns[stack.index[key]].append(turn)
    if evidence:
        stack.evidence_turns.add(turn)


def _sessions(question: dict[str, Any], sessions: list[Any]) -> list[tuple[str, str, list[Any]]]:
    return list(
        zip(question["haystack_session_ids"], question["haystack_dates"], sessions, strict=True)
    )


def build_turns(question: dict[str, Any], sessions: list[Any]) -> Shaped:
    plain = build(question, sessions)
    return Shaped(
        **{k: getattr(plain, k) for k in vars(plain)},
        categories=[f"chat/{r}" for r in plain.roles],
        importance=[0.5] * len(plain.texts),
    )


def build_user(question: dict[str, Any], sessions: list[Any]) -> Shaped:
    stack = Shaped(question)
    for sid, date, turns in _sessions(question, sessions):
        for i, turn in enumerate(turns):
            text = _clean(turn["content"])
            if text and turn["role"] == "user":
                _add(stack, text, date, "user", (sid, i), bool(turn.get("has_answer")))
    return stack


def cut_length(lengths: list[int], sid: str, turn: int) -> int:
    """A length (in words) drawn from `lengths`, deterministically for this turn."""
    pick = hashlib.sha256(f"{sid}/{turn}".encode()).digest()
    return lengths[int.from_bytes(pick[:4], "big") % len(lengths)]


def build_cut(question: dict[str, Any], sessions: list[Any]) -> Shaped:
    user_lengths = sorted(
        len(str(t["content"]).split())
        for turns in sessions
        for t in turns
        if t["role"] == "user" and str(t["content"]).strip()
    ) or [30]
    stack = Shaped(question)
    for sid, date, turns in _sessions(question, sessions):
        for i, turn in enumerate(turns):
            words = str(turn["content"]).split()
            if turn["role"] != "user":
                words = words[: cut_length(user_lengths, sid, i)]
            text = _clean(" ".join(words))
            if text:
                _add(stack, text, date, turn["role"], (sid, i), bool(turn.get("has_answer")))
    return stack


def source_turn(fact: str, texts: list[str]) -> int:
    """The turn a distilled fact came from: the first whose text contains its opening words."""
    head = " ".join(fact.split()[:12]).removesuffix(" …")
    for i, text in enumerate(texts):
        if head in text:
            return i
    return -1


def build_facts(question: dict[str, Any], sessions: list[Any]) -> Shaped:
    cfg = DistillConfig()
    stack = Shaped(question)
    for sid, date, turns in _sessions(question, sessions):
        texts = [" ".join(str(t["content"]).split()) for t in turns]
        transcript = Transcript(
            messages=[Message(t["role"], text) for t, text in zip(turns, texts, strict=True)]
        )
        for n, fact in enumerate(distill_rule(transcript, cfg).facts):
            i = source_turn(fact.text, texts)
            evidence = i >= 0 and bool(turns[i].get("has_answer"))
            role = turns[i]["role"] if i >= 0 else "user"
            _add(
                stack,
                _clean(fact.text),
                date,
                role,
                (sid, n),
                evidence,
                fact.category,
                fact.importance,
            )
    return stack


def build_sessions(question: dict[str, Any], sessions: list[Any]) -> Shaped:
    answers = set(question["answer_session_ids"])
    stack = Shaped(question)
    for sid, date, turns in _sessions(question, sessions):
        text = _clean(" ".join(str(t["content"]) for t in turns))
        if text:
            _add(stack, text, date, "session", (sid, 0), sid in answers, "chat/session")
    return stack


BUILDERS: dict[str, Callable[[dict[str, Any], list[Any]], Shaped]] = {
    "turns": build_turns,
    "user": build_user,
    "cut": build_cut,
    "facts": build_facts,
    "sessions": build_sessions,
}
