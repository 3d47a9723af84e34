"""Dreaming: once an agent has `[dreaming] min_episodes` unpromoted episodes (and none was
dreamt within the debounce), consolidation synthesises them into long-term warm facts —
preferences, project facts, recurring patterns, decisions — each carrying the ids of the
episodes it came from, and marks those episodes promoted.

Offline synthesis reconciles, it does not copy: a preference, decision or project fact said in
at least two of the episodes (a fact said once is already a memory of its own), never one that
a newer fact superseded; the topics that recur in at least two episodes; and what changed in
the episodes' time ("Changed on 2026-10-13: … → …"). With `[dreaming] synthesis = "llm"` the model writes the facts; any failure falls back
to the offline synthesis, and the report says so.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.core import episodes, supersession
from tiermem.core import llm as llmmod
from tiermem.core.episodes import Episode
from tiermem.core.summarise import clip, sentences
from tiermem.core.warm import NewFact

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

log = logging.getLogger(__name__)
CATEGORY = "dreams"
KINDS = ("preferences", "projects", "patterns", "decisions", "changes")
LABELS = {"preferences": "Preference", "projects": "Project fact", "decisions": "Decision"}
MIN_REPEATS = 2
"""Episodes that must state a fact before dreaming restates it."""
MAX_FACT_CHARS = 300
_CUES: dict[str, re.Pattern[str]] = {
    "preferences": re.compile(
        r"\b(prefers?|preferred|likes?|loves?|hates?|dislikes?|favou?rite|always|never|rather)\b",
        re.I,
    ),
    "decisions": re.compile(
        r"\b(decided|decision|chose|chosen|agreed|settled on|going with|will use|switched to)\b",
        re.I,
    ),
    "projects": re.compile(
        r"\b(project|works? on|working on|deadline|launch|release|milestone|roadmap|deploy)\w*",
        re.I,
    ),
}
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": list(KINDS)},
                    "text": {"type": "string"},
                },
                "required": ["kind", "text"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["facts"],
    "additionalProperties": False,
}


@dataclass
class DreamReport:
    ran: bool = False
    reason: str = ""
    episodes: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    """Ids of the warm facts written (or reinforced)."""
    mode: str = "rule"
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ran": self.ran,
            "reason": self.reason,
            "episodes": self.episodes,
            "facts": self.facts,
            "mode": self.mode,
            "notes": self.notes,
        }


def dream(
    mem: Memory, *, force: bool = False, transport: llmmod.Transport | None = None
) -> DreamReport:
    """Synthesise the oldest unpromoted episodes when enough wait and the debounce allows it
    (`force` skips the debounce, not the threshold). The caller holds the transaction."""
    cfg, db, agent = mem.cfg.dreaming, mem.db, mem.agent_id
    report = DreamReport()
    waiting = episodes.count_unpromoted(db, agent)
    if waiting < cfg.min_episodes:
        report.reason = f"{waiting} unpromoted episodes (dreaming needs {cfg.min_episodes})"
        return report
    now = mem.now()
    last = float(
        db.scalar("SELECT dreamed_at FROM graph_progress WHERE agent_id = ?", (agent,)) or 0
    )
    if not force and now - last < cfg.debounce_minutes * 60:
        report.reason = (
            f"dreamt {int((now - last) // 60)} min ago (debounce {cfg.debounce_minutes:g} min)"
        )
        return report
    batch = episodes.unpromoted(db, agent, cfg.max_episodes)
    found = _offline(mem, batch)
    if cfg.synthesis == "llm":
        found = _llm(mem, batch, found, report, transport)
    provenance = "dreaming: " + ",".join(e.id for e in batch)
    facts = [
        NewFact(
            text=clip(text, MAX_FACT_CHARS),
            category=f"{CATEGORY}/{kind}",
            importance=0.6,
            source=provenance[:1000],
        )
        for kind, text in found
    ]
    outcomes = mem.store_many(facts) if facts else []
    report.facts = [o.id for o in outcomes]
    episodes.mark_promoted(db, agent, [e.id for e in batch], now)
    db.execute(
        "INSERT INTO graph_progress (agent_id, dreamed_at) VALUES (?, ?) "
        "ON CONFLICT (agent_id) DO UPDATE SET dreamed_at = excluded.dreamed_at",
        (agent, now),
    )
    report.ran, report.episodes = True, [e.id for e in batch]
    report.reason = f"{waiting} unpromoted episodes: the oldest {len(batch)} synthesised"
    log.info("dreaming of agent %s: %d episodes → %d facts", agent, len(batch), len(facts))
    return report


def _offline(mem: Memory, batch: list[Episode]) -> list[tuple[str, str]]:
    """(kind, text): the current facts the episodes repeat, most repeated first, the topics
    that recur across episodes, and the facts that changed in their time."""
    texts: Counter[str] = Counter()
    kinds: dict[str, str] = {}
    now = mem.now()
    for e in batch:
        facts = mem.memories.get_many(list(e.fact_ids)) if e.fact_ids else []
        current = [m.text for m in facts if m.current_at(now)]
        for sentence in dict.fromkeys(sentences(current)):
            kind = next((k for k, cue in _CUES.items() if cue.search(sentence)), None)
            if kind:
                texts[sentence] += 1
                kinds[sentence] = kind
    days = f"{episodes.iso(batch[0].started_at)[:10]} – {episodes.iso(batch[-1].ended_at)[:10]}"
    out = [
        (kinds[t], f"{LABELS[kinds[t]]} (conversations of {days}, {n}×): {t}")
        for t, n in texts.most_common(20)
        if n >= MIN_REPEATS
    ]
    topics = Counter(t for e in batch for t in dict.fromkeys(e.topics))
    for topic, n in topics.most_common(10):
        if n >= 2:
            out.append(
                ("patterns", f"Recurring topic: {topic} (in {n} of {len(batch)} conversations)")
            )
    return out + _changes(mem, batch)


def _changes(mem: Memory, batch: list[Episode]) -> list[tuple[str, str]]:
    """What changed while the episodes ran, said once: old → new, with the day."""
    start, end = batch[0].started_at - 86400, batch[-1].ended_at + 86400
    out = []
    for change in supersession.changes(mem, start, end):
        old = clip(change.old.text, MAX_FACT_CHARS // 2)
        new = clip(change.new.text, MAX_FACT_CHARS // 2) if change.new else "no longer true"
        out.append(("changes", f"Changed on {supersession.iso(change.at)}: {old} → {new}"))
    return out


def _llm(
    mem: Memory,
    batch: list[Episode],
    fallback: list[tuple[str, str]],
    report: DreamReport,
    transport: llmmod.Transport | None,
) -> list[tuple[str, str]]:
    settings = llmmod.settings_from(mem.cfg.llm)
    if not settings.configured:
        report.notes.append("dreaming: no LLM endpoint configured, offline synthesis used")
        return fallback
    text = "\n\n".join(f"{episodes.iso(e.started_at)}: {e.summary}" for e in batch)
    messages = [
        {
            "role": "system",
            "content": "From these conversation summaries, write the long-term facts worth "
            "keeping: user preferences, project facts, recurring patterns, key decisions. "
            "One short sentence each.",
        },
        {"role": "user", "content": text[: settings.max_input_chars]},
    ]
    try:
        reply = json.loads(llmmod.chat_json(settings, messages, _SCHEMA, transport=transport))
        found = [(str(f["kind"]), " ".join(str(f["text"]).split())) for f in reply["facts"]]
    except (llmmod.LLMError, ValueError, KeyError, TypeError) as exc:
        report.notes.append(f"dreaming: LLM failed ({exc}), offline synthesis used")
        return fallback
    report.mode = "llm"
    return [(k if k in KINDS else "patterns", t) for k, t in found if t]
