"""Rule-mode distillation: regex and heuristics, no LLM, linear in the input, deterministic."""

from __future__ import annotations

import heapq
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence

from tiermem.core import metadata as meta
from tiermem.core.config import DistillConfig
from tiermem.core.distill import signals
from tiermem.core.distill.cues import (
    CATEGORY,
    CONFIRMING,
    ECHO_OVERLAP,
    IMPORTANCE,
    NAME,
    NOT_NAMES,
    QUESTION_START,
    REMIND,
    TOOLS,
    UNSURE,
    USER_ONLY,
)
from tiermem.core.distill.facts import (
    Distilled,
    Fact,
    classify,
    content_words,
    core_summary,
    cue_kind,
    has_content,
    has_metadata,
    is_trivial,
    meaningful_words,
    sentences,
    strip_filler,
)
from tiermem.core.distill.profile import ProfileFact, profile_facts
from tiermem.core.frame_words import RELATIVES, SPEAKER
from tiermem.core.transcript import Message, Transcript


def distill_rule(
    transcript: Transcript, cfg: DistillConfig, projects: Sequence[str] = ()
) -> Distilled:
    """Regex/heuristic distillation: linear in the input, deterministic, no network."""
    out = Distilled(
        mode="rule",
        requested_mode="rule",
        messages=len(transcript.messages),
        raw_bytes=transcript.raw_bytes,
        warnings=list(transcript.warnings),
    )
    limit = cfg.max_facts
    best: list[tuple[float, int, Fact]] = []  # a min-heap of the most important facts
    lists: dict[str, deque[str]] = {k: deque(maxlen=limit) for k in ("decision", "lesson")}
    lists["task"] = deque(maxlen=limit)
    lists["event"] = deque(maxlen=limit)
    people: Counter[str] = Counter()
    urls: dict[str, None] = {}
    commands: dict[str, None] = dict.fromkeys(transcript.tool_commands)
    paths: dict[str, None] = {}
    seen: set[str] = set()
    said: deque[tuple[set[str], Fact]] = deque(maxlen=8)  # the user's recent facts
    position = 0
    for message in transcript.messages:
        found = meta.extract(message.text)
        urls.update(dict.fromkeys(found.urls))
        commands.update(dict.fromkeys(found.commands))
        paths.update(dict.fromkeys(found.paths))
        for name in _names(message.text):
            people[name] += 1
        for text, block_commands in _with_antecedents(sentences(message.text)):
            position += 1
            if message.role != "assistant" and not text.endswith("?"):
                out.profile += profile_facts(text)
            fact = _fact_from_sentence(text, message, block_commands, cfg, projects)
            if fact is None:
                out.skipped_trivial += 1
                continue
            key = " ".join(meaningful_words(fact.text))
            if key in seen or _echo(fact, said):
                continue
            seen.add(key)
            if fact.kind in lists:
                lists[fact.kind].append(fact.text)
            entry = (fact.importance, position, fact)
            if len(best) < limit:
                heapq.heappush(best, entry)
            elif entry[:2] > best[0][:2]:
                heapq.heapreplace(best, entry)
    out.facts = [_with_metadata(f) for _, _, f in sorted(best, key=lambda e: e[1])]
    out.decisions = list(lists["decision"])
    out.lessons = list(lists["lesson"])
    out.tasks = list(lists["task"])
    out.events = list(lists["event"])
    out.people = [n for n, _ in people.most_common(20) if n not in set(projects)]
    out.urls, out.commands, out.paths = list(urls), list(commands), list(paths)
    out.summary = core_summary(out.facts, cfg.summary_bytes)
    return out


def profile_of(transcript: Transcript) -> list[ProfileFact]:
    """The profile fields the person states in a conversation (never the assistant's words,
    never a question)."""
    out: list[ProfileFact] = []
    for message in transcript.messages:
        if message.role == "assistant":
            continue
        for text, _ in sentences(message.text):
            if not text.endswith("?"):
                out += profile_facts(text)
    return out


def _echo(fact: Fact, said: deque[tuple[set[str], Fact]]) -> bool:
    """Whether `fact` is the assistant echoing what the user just said (its commands join the
    user's fact); a user's fact is remembered for the echoes that follow."""
    words = content_words(fact.text)
    if fact.role != "assistant":
        said.append((words, fact))
        return False
    for theirs, original in said:
        shared = len(words & theirs)
        if shared >= 2 and shared >= ECHO_OVERLAP * len(words):
            original.commands = [*original.commands, *fact.commands]
            return True
    return False


def _fact_from_sentence(
    text: str,
    message: Message,
    block_commands: list[str],
    cfg: DistillConfig,
    projects: Sequence[str],
) -> Fact | None:
    """The fact one sentence gives, or None: only the person's own words give lessons, tasks,
    preferences and facts about people or themselves; an assistant's acknowledgement, promise
    or restatement gives nothing; a lesson, decision or task needs content."""
    if len(text) > 2000:
        text = text[:2000].rsplit(" ", 1)[0] + " …"
    text, todo = strip_filler(text)
    if message.role != "assistant":
        text = _told_before_asking(text)
    if _asks(text, message) or is_trivial(text, cfg.min_words):
        return None
    assistant = message.role == "assistant"
    if assistant and CONFIRMING.match(text):
        return None  # "Understood: the launch is now on October 20" restates the person
    text = signals.strip_ack(text)
    if not text:
        return None
    if assistant and signals.is_acknowledgement(text):
        return None
    kind, category, importance = classify(text, projects)
    if todo and kind not in ("task", "lesson"):
        kind, category, importance = "task", CATEGORY["task"], IMPORTANCE["task"]
    if kind in ("task", "decision") and UNSURE.search(text):
        kind, category, importance = "note", CATEGORY["note"], IMPORTANCE["note"]
    if assistant and (kind in USER_ONLY or not (cue_kind(text) or has_metadata(text))):
        return None  # the assistant's promises, echoes and chatter are not knowledge
    if kind != "technical" and (not has_content(text) or signals.about_the_talk(text)):
        return None  # "We decided this last week." says nothing, "thanks for the tips!" neither
    if (
        kind == "note"
        and len(meaningful_words(text)) < cfg.min_words + 2
        and not signals.is_statement(text)
    ):
        return None  # a short note needs a name, a date or the person speaking of themselves
    return Fact(
        text=text,
        category=category,
        importance=importance,
        kind=kind,
        role=message.role,
        commands=block_commands,  # its own metadata is added once it is chosen
    )


_RELATIVE = re.compile(rf"\b(?:my|our)\s+(?:{'|'.join(sorted(RELATIVES))})\b", re.IGNORECASE)
_PRONOUN_START = re.compile(r"^(?:he|she)\b", re.IGNORECASE)


def _with_antecedents(
    parts: list[tuple[str, list[str]]],
) -> list[tuple[str, list[str]]]:
    """Sentences, each saying whom it is about when stored alone: one that opens with "he"
    or "she" joined to the sentence before when that names a relative ("My husband Chidi …
    He is an architect at Lindqvist"); each of someone else's ("Dana said: …") theirs."""
    out: list[tuple[str, list[str]]] = []
    speaker = SPEAKER.match(parts[0][0]) if parts else None
    for text, commands in parts:
        if speaker and out and not SPEAKER.match(text):
            text = speaker[0] + text  # each sentence of what someone else said is theirs
        if out and _PRONOUN_START.match(text) and _RELATIVE.search(out[-1][0]):
            out[-1] = (f"{out[-1][0]} {text}", [*out[-1][1], *commands])
        else:
            out.append((text, commands))
    return out


_CHAT_BREAK = re.compile(r"(?<=[.!?])\s+(?=[a-z])")
"""Where lower-case chat starts a new sentence ("first week done!! new boss is intense")."""


def _told_before_asking(text: str) -> str:
    """What a message tells before the question it ends with ("moved in w maya this weekend.
    podcast recs for a 50 min drive?"): the telling is knowledge, the question is not."""
    if not text.endswith("?"):
        return text
    parts = _CHAT_BREAK.split(text)
    while parts and (parts[-1].endswith("?") or signals.is_request(parts[-1])):
        parts.pop()
    return " ".join(parts) or text


def _asks(text: str, message: Message) -> bool:
    """A question or a request to the assistant, not knowledge; the person asking to be
    reminded of something states their task."""
    if message.role != "assistant" and REMIND.search(text):
        return False
    return text.endswith("?") or bool(QUESTION_START.match(text)) or signals.is_request(text)


def _with_metadata(fact: Fact) -> Fact:
    found = meta.extract(fact.text)
    fact.urls = meta.fit(found.urls, 50)
    fact.commands = meta.fit([*found.commands, *fact.commands], 50)
    fact.paths = meta.fit(found.paths, 50)
    return fact


def _names(text: str) -> Iterable[str]:
    if not any(c.isupper() for c in text):
        return ()
    out = []
    for match in NAME.finditer(text):
        name = match.group(1) or match.group(2)
        if name and name.split()[0] not in NOT_NAMES and name.casefold() not in TOOLS:
            out.append(name)
    return out
