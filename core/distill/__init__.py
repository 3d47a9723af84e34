"""Distillation: raw conversation (stage 1) → structured facts (stage 2) → core summary (stage 3).

`rule` mode (the default) is regex and heuristics: no LLM, linear in the input, deterministic.
Each sentence of a message is classified by cue words (a lesson, a decision, a preference, a fact
about a person, a task, an event, something technical); questions, greetings and other trivial
lines (fewer than `min_words` meaningful words) are dropped, and so is assistant chatter
that carries no cue. The most important `max_facts` facts are kept, in conversation order.

`llm` mode asks an OpenAI-compatible endpoint for the same structure under a strict JSON schema
(see `tiermem.core.llm`); a missing endpoint, an HTTP error, a timeout or output that does not
fit the schema falls back to rule mode and says why. Either way the URLs, commands and paths of
the input are kept: whatever the LLM dropped is put back.

The package: `cues` (the cue data), `facts` (results and shared text helpers), `rule`, `llm`,
and `distill` here, which picks the mode.
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
    "classify",
    "conversation_text",
    "cue_kind",
    "distill",
    "distill_llm",
    "distill_rule",
    "is_trivial",
    "meaningful_words",
    "sentences",
    "slug",
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
