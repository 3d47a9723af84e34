"""Distillation: raw conversation (stage 1) → structured facts (stage 2) → core summary (stage 3).

`rule` mode (the default) is regex and heuristics: no LLM, linear in the input, deterministic.
Each sentence of a message is classified by cue words (a lesson, a decision, a preference, a fact
about a person, a task, an event, something technical); questions, greetings and other trivial
lines (fewer than `min_words` meaningful words, seed 003) are dropped, and so is assistant chatter
that carries no cue. The most important `max_facts` facts are kept, in conversation order.

`llm` mode asks an OpenAI-compatible endpoint for the same structure under a strict JSON schema
(see `tiermem.core.llm`); a missing endpoint, an HTTP error, a timeout or output that does not
fit the schema falls back to rule mode and says why (seed 003's extractive fallback). Either way
the URLs, commands and paths of the input are kept: whatever the LLM dropped is put back.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

from tiermem.core import llm as llmmod
from tiermem.core import metadata as meta
from tiermem.core.config import DistillConfig
from tiermem.core.retrieve import STOPWORDS
from tiermem.core.transcript import Message, Transcript

KINDS = ("lesson", "decision", "preference", "person", "task", "event", "technical", "note")
CATEGORY = {
    "lesson": "lessons",
    "decision": "decisions",
    "preference": "owner/preferences",
    "person": "people",
    "task": "tasks",
    "event": "events",
    "technical": "technical",
    "note": "notes",
}
IMPORTANCE = {
    "lesson": 0.85,
    "decision": 0.8,
    "preference": 0.75,
    "person": 0.7,
    "task": 0.6,
    "technical": 0.6,
    "event": 0.55,
    "note": 0.45,
}
_CUES: dict[str, str] = {
    "lesson": r"lessons? learn[et]|learn[et] that|\blesson\b|note to self|never again|mistake was|"
    r"gotcha|pitfall|(?:always|never) (?:\w+ ){0,2}(?:test|check|run|use|deploy|push|commit|"
    r"forget|trust|store|back ?up|verify|ask)|don'?t ever|make sure to|remember to",
    "decision": r"\bdecided\b|\bdecide to\b|\bdecision\b|\bwe'?ll go with\b|\bgoing with\b|"
    r"\bagreed\b|\bsettled on\b|\bchose\b|\bchoose to\b|\blet'?s (?:use|go with|stick with)\b|"
    r"\bopted\b|\bswitch(?:ed|ing)? to\b|\bwill use\b|\bwe use\b",
    "preference": r"\bi (?:really )?(?:prefer|like|love|hate|dislike|enjoy|don'?t like|"
    r"can'?t stand)\b|\bprefers?\b|\bfavou?rite\b|\bcall me\b|\bi want you to\b|"
    r"\bplease (?:always|never)\b",
    "person": r"\bmy (?:wife|husband|partner|daughter|son|kids?|mom|mother|dad|father|brother|"
    r"sister|boss|manager|friend|colleague|cofounder|co-founder)\b|\bbirthday\b|\bborn\b",
    "task": r"\btodo\b|\bto-do\b|\bneed to\b|\bneeds to\b|\bnext step|\bfollow[ -]up\b|"
    r"\bremind me\b|\baction item|\bdon'?t forget to\b|\bi'?ll\b|\bwe'?ll\b|\bplan to\b|"
    r"\btomorrow\b|\bby (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\[ \]",
    "event": r"\bdeployed\b|\bshipped\b|\breleased\b|\blaunched\b|\bfixed\b|\bfinished\b|"
    r"\bcompleted\b|\bmerged\b|\bmet (?:with )?\b|\bmeeting\b|\bdeadline\b|\bdue\b|"
    r"\bscheduled\b|\bbooked\b|\binstalled\b|\bupgraded\b|\bmigrated\b|\bhappened\b|"
    r"\byesterday\b|\btoday\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
    r"\.? \d{1,2}\b|\b\d{4}-\d{2}-\d{2}\b|\[x\]",
}
_CUE = {k: re.compile(v, re.I) for k, v in _CUES.items()}
# A cue regex runs only when the sentence has one of its kind's trigger words (speed: most
# sentences have none); "month" means a word starting with a month's first three letters.
_TRIGGERS: dict[str, frozenset[str]] = {
    "lesson": frozenset(
        [
            "lesson",
            "lessons",
            "learned",
            "learnt",
            "note",
            "never",
            "mistake",
            "gotcha",
            "pitfall",
            "pitfalls",
            "always",
            "don't",
            "dont",
            "make",
            "remember",
        ]
    ),
    "decision": frozenset(
        [
            "decided",
            "decide",
            "decision",
            "we'll",
            "going",
            "agreed",
            "settled",
            "chose",
            "choose",
            "let's",
            "lets",
            "opted",
            "switch",
            "switched",
            "switching",
            "will",
            "use",
        ]
    ),
    "preference": frozenset(["i", "prefer", "prefers", "favorite", "favourite", "call", "please"]),
    "person": frozenset(["my", "birthday", "born"]),
    "task": frozenset(
        [
            "todo",
            "to-do",
            "need",
            "needs",
            "next",
            "follow",
            "follow-up",
            "remind",
            "action",
            "don't",
            "i'll",
            "we'll",
            "plan",
            "tomorrow",
            "by",
        ]
    ),
    "event": frozenset(
        [
            "deployed",
            "shipped",
            "released",
            "launched",
            "fixed",
            "finished",
            "completed",
            "merged",
            "met",
            "meeting",
            "deadline",
            "due",
            "scheduled",
            "booked",
            "installed",
            "upgraded",
            "migrated",
            "happened",
            "yesterday",
            "today",
        ]
    ),
}
_MONTHS = frozenset(
    ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
)
_CRITICAL = re.compile(r"\b(?:critical|urgent|important|must|never|password|credential)\b", re.I)
_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.M | re.S)
_NAME = re.compile(
    r"\b(?:with|met|told|asked|call(?:ed)?|email(?:ed)?|ping(?:ed)?|thank(?:ed)?|from|and|by)"
    r"\s+([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?)\b"
    r"|\b([A-Z][a-z]{2,})(?:'s\b| (?:said|says|told|asked|wants|thinks|mentioned|suggested|"
    r"agreed|approved|prefers|likes)\b| \((?:wife|husband|partner|daughter|son|boss|friend|"
    r"colleague|mom|dad|mother|father|sister|brother)\b)"
)
_NOT_NAMES = frozenset(
    [
        "I",
        "You",
        "We",
        "They",
        "He",
        "She",
        "It",
        "The",
        "This",
        "That",
        "These",
        "Those",
        "There",
        "Then",
        "When",
        "Where",
        "What",
        "Why",
        "How",
        "Who",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
        "Today",
        "Tomorrow",
        "Yesterday",
        "User",
        "Agent",
        "Assistant",
        "Also",
        "And",
        "But",
        "Yes",
        "Sure",
        "Thanks",
        "Thank",
        "Okay",
        "Please",
        "Let",
        "Just",
        "Maybe",
        "Here",
        "Now",
        "Next",
        "Done",
        "Note",
        "Todo",
        "Our",
        "Your",
        "My",
        "His",
        "Her",
        "Their",
        "Its",
        "Git",
        "Docker",
        "Python",
        "Linux",
        "Windows",
        "Github",
        "Google",
        "Slack",
    ]
)
_FILLER = frozenset(
    [
        "lesson",
        "lessons",
        "learned",
        "learnt",
        "always",
        "decided",
        "decide",
        "decision",
        "agreed",
        "chose",
        "let",
        "lets",
        "let's",
        "we'll",
        "i'll",
        "we",
        "i",
        "you",
        "use",
        "using",
        "need",
        "needs",
        "going",
        "go",
        "will",
        "would",
        "should",
        "must",
        "also",
        "really",
        "just",
        "please",
        "todo",
        "note",
        "today",
    ]
)


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


# -- shared helpers ---------------------------------------------------------------------------


def meaningful_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS]


def is_trivial(text: str, min_words: int) -> bool:
    """Seed 003's trivial filter: fewer than `min_words` words once stopwords are removed
    ("ok", "thanks!", "hi there"). A URL, a command or a path is never trivial."""
    if len(meaningful_words(text)) >= min_words:
        return False
    return not ("/" in text or "`" in text)


def slug(name: str) -> str:
    return "-".join(_WORD.findall(name.casefold()))[:40] or "project"


def cue_kind(text: str) -> str:
    """The first kind (in `KINDS` order) whose cue words the text has, or ''."""
    words = set(_WORD.findall(text.casefold()))
    for kind in KINDS[:6]:
        triggered = not words.isdisjoint(_TRIGGERS[kind]) or (
            (kind == "task" and "[ ]" in text)
            or (
                kind == "event"
                and (
                    "[x]" in text
                    or (
                        any(c.isdigit() for c in text)
                        and any(w[:3] in _MONTHS or w[:1].isdigit() for w in words)
                    )
                )
            )
        )
        if triggered and _CUE[kind].search(text):
            return kind
    return ""


def classify(text: str, projects: Sequence[str] = ()) -> tuple[str, str, float]:
    """(kind, category, importance) of one sentence or note line, by its cue words."""
    kind = cue_kind(text)
    has_meta = "://" in text or "`" in text or bool(meta.find_paths(text))
    if not kind:
        kind = "technical" if has_meta else "note"
    importance = IMPORTANCE[kind]
    if _CRITICAL.search(text):
        importance += 0.1
    if has_meta and kind != "technical":
        importance += 0.05
    category = CATEGORY[kind]
    if kind not in ("lesson", "preference", "person"):
        lowered = text.casefold()
        for project in projects:
            if project and re.search(rf"\b{re.escape(project.casefold())}\b", lowered):
                category = f"projects/{slug(project)}"
                break
    return kind, category, round(min(1.0, importance), 2)


def sentences(text: str) -> list[tuple[str, list[str]]]:
    """Sentences of a message with the commands of a code block that follows each one."""
    out: list[tuple[str, list[str]]] = []
    position = 0
    for match in [*_FENCE.finditer(text), None]:
        prose = text[position : match.start() if match else len(text)]
        for line in prose.splitlines():
            line = _BULLET.sub("", line).strip().lstrip("#>").strip()
            if not line:
                continue
            for part in _SENTENCE_END.split(line):
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
    the fact's content words (stopwords and filler dropped) while they fit."""
    words = [
        w.strip(".,;:!?\"'()[]")
        for w in text.split()
        if w.strip(".,;:!?\"'()[]").casefold() not in STOPWORDS | _FILLER
    ]
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


def _truncate_bytes(text: str, limit: int) -> str:
    return text.encode()[:limit].decode("utf-8", errors="ignore")


# -- rule mode ----------------------------------------------------------------------------------


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
    position = 0
    for message in transcript.messages:
        found = meta.extract(message.text)
        urls.update(dict.fromkeys(found.urls))
        commands.update(dict.fromkeys(found.commands))
        paths.update(dict.fromkeys(found.paths))
        for name in _names(message.text):
            people[name] += 1
        for text, block_commands in sentences(message.text):
            position += 1
            fact = _fact_from_sentence(text, message, block_commands, cfg, projects)
            if fact is None:
                out.skipped_trivial += 1
                continue
            key = " ".join(meaningful_words(fact.text))
            if key in seen:
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
    out.summary = _summary(out.facts, cfg.summary_bytes)
    return out


def _fact_from_sentence(
    text: str,
    message: Message,
    block_commands: list[str],
    cfg: DistillConfig,
    projects: Sequence[str],
) -> Fact | None:
    if len(text) > 2000:
        text = text[:2000].rsplit(" ", 1)[0] + " …"
    if text.endswith("?") or is_trivial(text, cfg.min_words):
        return None
    kind, category, importance = classify(text, projects)
    if message.role == "assistant" and kind == "note":
        return None  # assistant chatter without a cue is not knowledge
    if kind == "note" and len(meaningful_words(text)) < cfg.min_words + 2:
        return None
    return Fact(
        text=text,
        category=category,
        importance=importance,
        kind=kind,
        role=message.role,
        commands=block_commands,  # its own metadata is added once it is chosen
    )


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
    for match in _NAME.finditer(text):
        name = match.group(1) or match.group(2)
        if name and name.split()[0] not in _NOT_NAMES:
            out.append(name)
    return out


def _summary(facts: Sequence[Fact], max_bytes: int) -> str:
    if not facts:
        return ""
    head = max(facts, key=lambda f: f.importance)  # first of the most important
    return summarize(head.text, max_bytes)


# -- llm mode -----------------------------------------------------------------------------------


class _LLMFact(msgspec.Struct, forbid_unknown_fields=False):
    text: Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
    category: Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
    importance: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]


_StrList = Annotated[
    list[Annotated[str, msgspec.Meta(max_length=4000)]], msgspec.Meta(max_length=500)
]


class _LLMOutput(msgspec.Struct, forbid_unknown_fields=False):
    facts: Annotated[list[_LLMFact], msgspec.Meta(max_length=200)]
    decisions: _StrList
    lessons: _StrList
    tasks: _StrList
    events: _StrList
    people: _StrList
    urls: _StrList
    commands: _StrList
    paths: _StrList
    summary: Annotated[str, msgspec.Meta(max_length=400)]


_LIST = {"type": "array", "items": {"type": "string"}}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "facts",
        "decisions",
        "lessons",
        "tasks",
        "events",
        "people",
        "urls",
        "commands",
        "paths",
        "summary",
    ],
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "category", "importance"],
                "properties": {
                    "text": {"type": "string"},
                    "category": {"type": "string"},
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
        },
        "decisions": _LIST,
        "lessons": _LIST,
        "tasks": _LIST,
        "events": _LIST,
        "people": _LIST,
        "urls": _LIST,
        "commands": _LIST,
        "paths": _LIST,
        "summary": {"type": "string"},
    },
}
SYSTEM_PROMPT = """You distill a conversation between a person and their AI agent into long-term \
memory. Answer with one JSON object that follows the given schema, nothing else.
- facts: the durable knowledge worth remembering (at most {max_facts}), each one self-contained \
sentence with a category path (lowercase, '/'-separated, e.g. projects/evoclaw, lessons, \
decisions, owner/preferences, people, tasks, events, technical) and an importance: 0.9-1.0 \
critical decisions and identity, 0.7-0.8 project decisions and preferences, 0.4-0.6 general \
facts and events, below 0.4 casual.
- decisions, lessons, tasks (still open), events (what happened), people (names): short sentences.
- urls, commands, paths: copy EVERY URL, shell command and file path in the conversation exactly.
- summary: a core summary shorter than {summary_bytes} bytes.
Skip greetings, thanks and small talk."""


def conversation_text(transcript: Transcript) -> str:
    lines = [f"{m.role or 'note'}: {m.text}" for m in transcript.messages]
    lines += [f"tool command: {c}" for c in transcript.tool_commands]
    return "\n".join(lines)


def distill_llm(
    transcript: Transcript,
    cfg: DistillConfig,
    settings: llmmod.LLMSettings,
    projects: Sequence[str] = (),
    transport: llmmod.Transport | None = None,
) -> Distilled:
    """LLM distillation with a strict schema; on any failure, rule mode with the reason."""
    conversation = conversation_text(transcript)
    try:
        if not settings.configured:
            raise llmmod.LLMError(
                "no LLM endpoint configured (set TIERMEM_LLM_BASE_URL and TIERMEM_LLM_MODEL, "
                "or [llm] base_url and model in config.toml)"
            )
        if len(conversation) > settings.max_input_chars:
            raise llmmod.LLMError(
                f"conversation is {len(conversation):,} characters, over the "
                f"{settings.max_input_chars:,} allowed for llm mode"
            )
        prompt = SYSTEM_PROMPT.format(max_facts=cfg.max_facts, summary_bytes=cfg.summary_bytes)
        content = llmmod.chat_json(
            settings,
            [{"role": "system", "content": prompt}, {"role": "user", "content": conversation}],
            SCHEMA,
            transport=transport,
        )
        parsed = _parse_llm_output(content)
    except llmmod.LLMError as exc:
        out = distill_rule(transcript, cfg, projects)
        out.requested_mode = "llm"
        out.fallback = str(exc)
        return out
    return _from_llm(parsed, transcript, cfg, projects)


def _parse_llm_output(content: str) -> _LLMOutput:
    text = content.strip()
    if text.startswith("```"):  # some local models fence their JSON despite the schema
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    try:
        return msgspec.json.decode(text, type=_LLMOutput)
    except msgspec.ValidationError as exc:
        raise llmmod.LLMError(f"the LLM's output does not fit the schema ({exc})") from None
    except msgspec.DecodeError:
        raise llmmod.LLMError("the LLM's output is not JSON") from None


def _from_llm(
    parsed: _LLMOutput, transcript: Transcript, cfg: DistillConfig, projects: Sequence[str]
) -> Distilled:
    out = Distilled(
        mode="llm",
        requested_mode="llm",
        messages=len(transcript.messages),
        raw_bytes=transcript.raw_bytes,
        warnings=list(transcript.warnings),
    )
    for item in parsed.facts[: cfg.max_facts]:
        text = " ".join(item.text.split())
        if not text:
            continue
        found = meta.extract(text)
        out.facts.append(
            Fact(
                text=text,
                category=item.category.strip().strip("/").lower() or "general",
                importance=round(item.importance, 2),
                kind=classify(text, projects)[0],
                urls=meta.fit(found.urls, 50),
                commands=meta.fit(found.commands, 50),
                paths=meta.fit(found.paths, 50),
            )
        )

    def clean(items: list[str]) -> list[str]:
        return meta.unique(" ".join(s.split()) for s in items)

    out.decisions = clean(parsed.decisions)[: cfg.max_facts]
    out.lessons = clean(parsed.lessons)[: cfg.max_facts]
    out.tasks = clean(parsed.tasks)[: cfg.max_facts]
    out.events = clean(parsed.events)[: cfg.max_facts]
    out.people = clean(parsed.people)[:20]
    # The input's own metadata is the truth: anything the LLM dropped is put back.
    found = meta.Metadata(commands=list(transcript.tool_commands))
    for message in transcript.messages:
        found = found.merge(meta.extract(message.text))
    given = meta.Metadata(clean(parsed.urls), clean(parsed.commands), clean(parsed.paths))
    for kind in ("urls", "commands", "paths"):
        have = getattr(given, kind)
        missing = [v for v in getattr(found, kind) if v not in have]
        if missing:
            out.restored[kind] = missing
        setattr(out, kind, meta.unique([*have, *missing]))
    summary = " ".join(parsed.summary.split())
    if not summary or len(summary.encode()) >= cfg.summary_bytes:
        summary = summarize(summary, cfg.summary_bytes) if summary else ""
        summary = summary or _summary(out.facts, cfg.summary_bytes)
    out.summary = summary
    return out


def distill(
    transcript: Transcript,
    cfg: DistillConfig,
    *,
    mode: str | None = None,
    settings: llmmod.LLMSettings | None = None,
    projects: Sequence[str] = (),
    transport: llmmod.Transport | None = None,
) -> Distilled:
    chosen = mode or cfg.mode
    if chosen == "llm":
        return distill_llm(
            transcript, cfg, settings or llmmod.LLMSettings(), projects, transport=transport
        )
    if chosen != "rule":
        from tiermem.core.errors import InvalidInput

        raise InvalidInput(f"unknown distillation mode {chosen!r}: use rule or llm")
    return distill_rule(transcript, cfg, projects)
