"""What distillation produces (`Fact`, `Distilled`) and the text helpers both modes share:
sentence splitting, the trivial filter, classification by cue words, the one-line summary."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from tiermem.core import metadata as meta
from tiermem.core.distill import signals
from tiermem.core.distill.cues import (
    BULLET,
    CATEGORY,
    CRITICAL,
    CUE_KINDS,
    CUES,
    DATE,
    FENCE,
    FILLER,
    FILLER_LEAD,
    IMPORTANCE,
    MONTHS,
    NOT_NAMES,
    PERSON_NAME,
    PROJECT_NAME,
    SENTENCE_END,
    TASK_LEAD,
    TOOLS,
    TRIGGERS,
    WORD,
)
from tiermem.core.distill.profile import ProfileFact, profile_facts
from tiermem.core.terms import NEGATION, STOPWORDS


@dataclass
class Fact:
    text: str
    category: str
    importance: float
    kind: str = "note"
    role: str = ""
    urls: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "category": self.category,
            "importance": self.importance,
            "kind": self.kind,
            "urls": self.urls,
            "commands": self.commands,
            "paths": self.paths,
        }


@dataclass
class Distilled:
    """Stage 2: the structured content of one conversation, and its stage-3 summary."""

    facts: list[Fact] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    lessons: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    people: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    profile: list[ProfileFact] = field(default_factory=list)
    """The owner-profile fields the person stated, in conversation order."""
    summary: str = ""
    mode: str = "rule"
    requested_mode: str = "rule"
    fallback: str | None = None
    """Why llm mode fell back to rule mode (None when it did not)."""
    restored: dict[str, list[str]] = field(default_factory=dict)
    """URLs/commands/paths of the input the LLM left out and that were put back."""
    messages: int = 0
    skipped_trivial: int = 0
    raw_bytes: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def distilled_bytes(self) -> int:
        """Stage-2 size: the UTF-8 bytes of the distilled fact texts."""
        return sum(len(f.text.encode()) for f in self.facts)

    @property
    def summary_bytes(self) -> int:
        return len(self.summary.encode())

    def as_dict(self) -> dict[str, Any]:
        raw, distilled = self.raw_bytes, self.distilled_bytes
        return {
            "mode": self.mode,
            "requested_mode": self.requested_mode,
            "fallback": self.fallback,
            "summary": self.summary,
            "facts": [f.as_dict() for f in self.facts],
            "decisions": self.decisions,
            "lessons": self.lessons,
            "tasks": self.tasks,
            "events": self.events,
            "people": self.people,
            "urls": self.urls,
            "commands": self.commands,
            "paths": self.paths,
            "profile": [p.as_dict() for p in self.profile],
            "restored": self.restored,
            "warnings": self.warnings,
            "stats": {
                "messages": self.messages,
                "skipped_trivial": self.skipped_trivial,
                "raw_bytes": raw,
                "distilled_bytes": distilled,
                "summary_bytes": self.summary_bytes,
                "raw_to_distilled": round(raw / distilled, 1) if distilled else None,
                "distilled_to_summary": round(distilled / self.summary_bytes, 1)
                if self.summary_bytes
                else None,
            },
        }


def meaningful_words(text: str) -> list[str]:
    return signals.meaningful_words(text)


def is_trivial(text: str, min_words: int) -> bool:
    """The trivial filter: fewer than `min_words` words once stopwords are removed
    ("ok", "thanks!", "hi there"), greetings and farewells. A URL, a command, a path, a
    stated profile field or a short statement ("I moved to Porto") is never trivial."""
    if "/" in text or "`" in text:
        return False
    rest = signals.strip_ack(text)
    if not rest or signals.is_farewell(rest):
        return True
    if len(meaningful_words(text)) >= min_words:
        return False
    return not (signals.is_statement(rest) or states_profile(rest))


def states_profile(text: str) -> bool:
    """Whether the sentence states an owner-profile field ("I'm vegan now")."""
    return bool(profile_facts(text))


def strip_filler(text: str) -> tuple[str, bool]:
    """The sentence without a knowledge-free lead-in ("Also remember that …", "TODO: …"), and
    whether the lead-in marked it as a task."""
    task = TASK_LEAD.match(text)
    rest = text[task.end() :] if task else text
    lead = FILLER_LEAD.match(rest)
    if lead and len(rest) > lead.end():
        rest = rest[lead.end() :]
    if rest is text:
        return text, False
    return rest[:1].upper() + rest[1:], task is not None


def content_words(text: str) -> set[str]:
    """The words that say what a sentence is about (stopwords and cue filler dropped)."""
    return {w for w in meaningful_words(text) if w not in FILLER}


def has_content(text: str) -> bool:
    """Whether a sentence says something beyond cue words, filler and dates: "We decided to
    use Rust" does, "We decided this last week" does not."""
    return bool(signals.content_words(text))


def slug(name: str) -> str:
    return "-".join(WORD.findall(name.casefold()))[:40] or "project"


def cue_kind(text: str) -> str:
    """The first kind (in `CUE_KINDS` order) whose cue words the text has, or ''."""
    text = text.replace("’", "'")
    words = set(WORD.findall(text.casefold()))
    for kind in CUE_KINDS:
        triggered = not words.isdisjoint(TRIGGERS[kind]) or (
            (kind == "task" and "[ ]" in text)
            or (
                kind == "event"
                and (
                    "[x]" in text
                    or (
                        any(c.isdigit() for c in text)
                        and any(w[:3] in MONTHS or w[:1].isdigit() for w in words)
                    )
                )
            )
        )
        if triggered and CUES[kind].search(text):
            return kind
    return ""


SHORT_WORDS = 5
"""A sentence with fewer meaningful words is short: a change or a date in it is the point of it
("I quit my job at Acme yesterday"); in a longer one it is a detail of a note."""


def plain_kind(text: str, has_meta: bool = False) -> str:
    """The kind of a sentence without cue words: something technical, an owner-profile field, a
    short statement of a change or a date (event), a tool a project uses (technical), or a
    note. Only a stated profile field ranks as high as a preference: a plain statement must not
    crowd cue facts out of a conversation's `max_facts`."""
    if has_meta:
        return "technical"
    if states_profile(text):
        return "profile"
    if not signals.is_statement(text):
        return "note"
    if not signals.first_person(text, singular=True) and any(
        w.casefold() in TOOLS for w in signals.tokens(text)
    ):
        return "technical"
    short = len(meaningful_words(text)) < SHORT_WORDS
    changed = bool(DATE.search(text)) or signals.has_change(text)
    return "event" if short and changed else "note"


def classify(text: str, projects: Sequence[str] = ()) -> tuple[str, str, float]:
    """(kind, category, importance) of one sentence or note line, by its cue words; placed
    where a person would look: people/<name>, owner/preferences, owner/profile, tasks,
    decisions (projects/<name>/decisions), projects/<name>."""
    kind = cue_kind(text)
    has_meta = has_metadata(text)
    if not kind:
        kind = plain_kind(text, has_meta)
    importance = IMPORTANCE[kind]
    if CRITICAL.search(text):
        importance += 0.1
    if has_meta and kind != "technical":
        importance += 0.05
    return kind, placement(text, kind, projects), round(min(1.0, importance), 2)


def has_metadata(text: str) -> bool:
    """A URL, a command in backticks or a file path: technical whatever else it says."""
    return "://" in text or "`" in text or bool(meta.find_paths(text))


def placement(text: str, kind: str, projects: Sequence[str] = ()) -> str:
    """The category a fact of `kind` goes to."""
    if kind == "person":
        name = person_name(text)
        return f"people/{slug(name)}" if name else CATEGORY[kind]
    if kind in ("lesson", "preference", "profile"):
        return CATEGORY[kind]
    project = project_of(text, projects)
    if not project:
        return CATEGORY[kind]
    return f"projects/{slug(project)}" + ("/decisions" if kind == "decision" else "")


def person_name(text: str) -> str:
    """Who a fact about a person is about ("my manager is Diego Alvarez" → Diego Alvarez)."""
    match = PERSON_NAME.search(text.replace("’", "'"))
    if not match:
        return ""
    words = (match.group("a") or match.group("b")).split()
    words = [w.removesuffix("'s").strip(".,;:!?") for w in words]
    return " ".join(w for w in words if w and w not in NOT_NAMES)


def project_of(text: str, projects: Sequence[str] = ()) -> str:
    """The project a sentence is about: a known one it names, or one it calls a project."""
    lowered = text.casefold()
    for project in projects:
        if project and re.search(rf"\b{re.escape(project.casefold())}\b", lowered):
            return project
    match = PROJECT_NAME.search(text)
    if not match:
        return ""
    name = match.group("a") or match.group("b") or match.group("c")
    return "" if name in NOT_NAMES else name


def sentences(text: str) -> list[tuple[str, list[str]]]:
    """Sentences of a message with the commands of a code block that follows each one."""
    out: list[tuple[str, list[str]]] = []
    position = 0
    for match in [*FENCE.finditer(text), None]:
        prose = text[position : match.start() if match else len(text)]
        for line in prose.splitlines():
            line = BULLET.sub("", line).strip().lstrip("#>").strip()
            if not line:
                continue
            for part in SENTENCE_END.split(line):
                part = part.strip()
                if part:
                    out.append((part, []))
        if match is None:
            break
        block_commands = meta.find_commands(match.group(0))
        if out and block_commands:
            out[-1] = (out[-1][0], [*out[-1][1], *block_commands])
        position = match.end()
    return out


def summarize(text: str, max_bytes: int = 30) -> str:
    """Stage 2→3: a one-line core summary, strictly shorter than `max_bytes` UTF-8 bytes:
    the fact's content words (stopwords and filler dropped, never a negation: "i'm not vegan
    anymore" must not read "i'm vegan") while they fit."""
    stripped = (w.strip(".,;:!?\"'()[]") for w in text.split())
    words = [w for w in stripped if _kept(w.casefold())]
    words = [w for w in words if w] or text.split()
    out = ""
    for word in words:
        candidate = f"{out} {word}" if out else word
        if len(candidate.encode()) >= max_bytes:
            if not out:
                out = _truncate_bytes(word, max_bytes - 1)
            break
        out = candidate
    return out


_DROPPED: Final = STOPWORDS | FILLER
_TURNING: Final = frozenset({"anymore", "longer", "off"})
"""Words that turn a statement around with no negation in them ("no longer", "off heroku")."""


def _kept(word: str) -> bool:
    """Whether a summary keeps `word`: content, a negation (`terms.NEGATION`) or a turning word."""
    return word not in _DROPPED or word in _TURNING or NEGATION.search(word) is not None


def _truncate_bytes(text: str, limit: int) -> str:
    return text.encode()[:limit].decode("utf-8", errors="ignore")


def core_summary(facts: Sequence[Fact], max_bytes: int) -> str:
    """Stage 3 of a conversation: the summary of its first most important fact."""
    if not facts:
        return ""
    head = max(facts, key=lambda f: f.importance)  # first of the most important
    return summarize(head.text, max_bytes)
