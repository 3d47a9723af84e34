"""LLM-mode distillation: an OpenAI-compatible endpoint fills a strict JSON schema; any failure
falls back to rule mode with the reason, and the input's URLs, commands and paths are put back."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

import msgspec

from tiermem.core import llm as llmmod
from tiermem.core import metadata as meta
from tiermem.core.config import DistillConfig
from tiermem.core.distill import signals
from tiermem.core.distill.facts import Distilled, Fact, classify, core_summary, summarize
from tiermem.core.distill.rule import distill_rule, profile_of
from tiermem.core.transcript import Transcript


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
- Only what the person says (or plainly confirms) is knowledge. Never make a fact, task or \
lesson of the assistant's acknowledgements, promises, echoes or restatements ("Got it", \
"Noted!", "Sure, I'll remind you on Friday", "I'll keep that in mind", "I've updated your \
location", "So you moved to Porto"). The assistant's own lines give a fact only when they \
state new technical or project information.
- Keep the person's short life updates even when they are brief: a move, a new job, role or \
manager, joining, leaving, quitting, switching, accepting an offer, a promotion, a tool a \
project now uses, a date.
- facts: the durable knowledge worth remembering (at most {max_facts}), each one self-contained \
sentence with a category path (lowercase, '/'-separated): owner/profile for the person's own \
life (where they live, work, their role, diet, tools), people/<name> for a person, \
owner/preferences, tasks, decisions (projects/<name>/decisions for a project's), \
projects/<name> for a project's other facts, lessons, events, technical. Importance: 0.9-1.0 \
critical decisions and identity, 0.7-0.8 project decisions, preferences and life updates, \
0.4-0.6 general facts and events, below 0.4 casual.
- decisions: decisions with their content ("we decided to move Ledgerly to Postgres"); skip a \
line that names no decision ("we decided this last week").
- lessons: only explicit lessons or rules the person states ("lesson learned: …", "always …", \
"never …", "rule: …", "next time …", "note to self: don't …"); a decision is not a lesson.
- tasks (still open): the person's own to-dos and deadlines ("I need to renew my passport by \
Dec 3", "remind me to call mum on Friday"), never the assistant's promises.
- events (what happened), people (names): short sentences.
- urls, commands, paths: copy EVERY URL, shell command and file path in the conversation exactly.
- summary: a core summary shorter than {summary_bytes} bytes.
Skip greetings, thanks, small talk and questions."""

_PROMISE = re.compile(
    r"\b(?:the )?(?:assistant|agent|ai)(?:'ll| will| has| had| agreed| promised| offered| "
    r"noted| updated| acknowledged| confirmed| said it)\b",
    re.I,
)


def _assistant_words(text: str) -> bool:
    """An item the LLM made of the assistant's acknowledgement or promise: dropped, as rule
    mode drops it."""
    return signals.is_acknowledgement(text) or bool(_PROMISE.search(text))


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
    except (msgspec.DecodeError, RecursionError):
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
        if not text or _assistant_words(text):
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

    def said(items: list[str]) -> list[str]:
        return [s for s in clean(items) if not _assistant_words(s)][: cfg.max_facts]

    out.decisions = said(parsed.decisions)
    out.lessons = said(parsed.lessons)
    out.tasks = said(parsed.tasks)
    out.events = said(parsed.events)
    out.people = clean(parsed.people)[:20]
    out.profile = profile_of(transcript)
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
        summary = summary or core_summary(out.facts, cfg.summary_bytes)
    out.summary = summary
    return out
