"""Distillation: raw conversation (stage 1) → structured facts (stage 2) → core summary (stage 3).

`rule` mode (the default) is regex and heuristics: no LLM, linear in the input, deterministic.
Each sentence of a message is classified by cue words (a lesson, a decision, a preference, a fact
about a person, a task, an event, something technical) or, without one, by word classes (the
person speaking of themselves, a change verb, a name, a date: "I moved to Porto" is kept however
short). Questions, greetings and other trivial lines are dropped. Only the person's own words give
lessons, tasks, preferences and facts about people or the owner; an assistant's acknowledgement,
promise or echo of the person ("Got it, I'll remind you", "Noted!") gives nothing, and its other
lines give a fact only with a cue. A lesson is an explicit rule ("always …", "lesson learned:
…"); a lesson, decision or task without content ("We decided this last week.") is dropped. The
most important `max_facts` facts are kept, in conversation order, with the owner-profile fields
the person stated (where they live, work, their role, manager, diet, tools) for hot memory.

`llm` mode asks an OpenAI-compatible endpoint for the same structure under a strict JSON schema
(see `tiermem.core.llm`) and a prompt that states the same rules; items made of the assistant's
acknowledgements are dropped from its answer too, and the profile fields are read from the
person's words as in rule mode. A missing endpoint, an HTTP error, a timeout or output that does
not fit the schema falls back to rule mode and says why. Either way the URLs, commands and paths
of the input are kept: whatever the LLM dropped is put back.

The package: `cues` (the cue data), `signals` (word classes), `facts` (results and shared text
helpers), `profile` (owner-profile fields and hot memory's profile), `rule`, `llm`, and
`distill` here, which picks the mode.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiermem.core import llm as llmmod
from tiermem.core.config import DistillConfig
from tiermem.core.distill.cues import CATEGORY, IMPORTANCE, KINDS
from tiermem.core.distill.facts import (
    Distilled,
    Fact,
    classify,
    cue_kind,
    is_trivial,
    meaningful_words,
    sentences,
    slug,
    summarize,
)
from tiermem.core.distill.llm import SCHEMA, SYSTEM_PROMPT, conversation_text, distill_llm
from tiermem.core.distill.profile import (
    ProfileFact,
    follow_profile,
    profile_facts,
    stated_after,
)
from tiermem.core.distill.rule import distill_rule
from tiermem.core.errors import InvalidInput
from tiermem.core.transcript import Transcript

__all__ = [
    "CATEGORY",
    "IMPORTANCE",
    "KINDS",
    "SCHEMA",
    "SYSTEM_PROMPT",
    "Distilled",
    "Fact",
    "ProfileFact",
    "classify",
    "conversation_text",
    "cue_kind",
    "distill",
    "distill_llm",
    "distill_rule",
    "follow_profile",
    "is_trivial",
    "meaningful_words",
    "profile_facts",
    "sentences",
    "slug",
    "stated_after",
    "summarize",
]


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
        raise InvalidInput(f"unknown distillation mode {chosen!r}: use rule or llm")
    return distill_rule(transcript, cfg, projects)
