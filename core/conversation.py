"""`conversation_end`: the one call an agent makes after each conversation.

1. read back hand edits of MEMORY.md (they must not be overwritten);
2. distill the transcript (rule mode by default; llm mode falls back to rule on any failure);
3. in one transaction: store the facts (deduplicated), one conversation record carrying its
   summary and every URL/command/path it mentioned, the hot updates (events, open tasks,
   lessons, the owner-profile fields the person stated), the bookkeeping that makes a replay a no-op, and a "conversation-end" entry in the
   sync outbox (critical state changed);
4. rewrite MEMORY.md and run a quick consolidation;
5. session hygiene (core/hygiene/): act on the directive tags of the user's messages
   (`[[pin:…]]`, `[[promote:…]]`, `[[forget:…]]`, `[[forget keyword:…]]`, `[[restore:…]]`,
   `[[memory_health]]`; they are taken out of the text before distillation), then the
   session-end rules (promote what ≥ 3 sessions recalled, demote hot lessons unused for 3);
6. the session's working memory is folded into the report and cleared; the conversation's
   actions are recorded and repeated sequences proposed as skills (core/skills.py).

The conversation is dated when it was held when the transcript says (OpenClaw's timestamps):
its record, facts, hot events and tasks and its episode carry that time, never a later one than
now. A core summary cut to its byte limit ends on a whole phrase with an ellipsis.

A conversation is identified by its OpenClaw session id when it has one (a growing session adds
only its new facts), otherwise by the digest of its text. Calling twice with the same transcript
changes nothing the second time: no fact is reinforced twice, no hot item or outbox entry doubles.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.core import distill as distillmod
from tiermem.core import episodes, hygiene, outbox, skills, summarise, supersession, working
from tiermem.core import graph as graphmod
from tiermem.core import llm as llmmod
from tiermem.core import metadata as meta
from tiermem.core.consolidate import ConsolidationReport
from tiermem.core.errors import InvalidInput
from tiermem.core.hot import HotState, HotStore
from tiermem.core.ingest import item_key, record_items, record_source, source_digest, source_items
from tiermem.core.transcript import Transcript
from tiermem.core.warm import MAX_METADATA_ITEMS, NewFact

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.memory_md import MemoryMdReport

RECORD_CATEGORY = supersession.RECORD_CATEGORY
RECORD_IMPORTANCE = 0.4


@dataclass
class ConversationReport:
    source: str
    already_processed: bool = False
    distilled: distillmod.Distilled | None = None
    stored: list[str] = field(default_factory=list)
    deduplicated: list[dict[str, Any]] = field(default_factory=list)
    skipped_known: int = 0
    """Facts this session had already given in an earlier call."""
    record_id: str | None = None
    hot_added: list[str] = field(default_factory=list)
    hot_pruned: list[str] = field(default_factory=list)
    outbox: bool = False
    consolidation: ConsolidationReport | None = None
    memory_md: MemoryMdReport | None = None
    tags: list[str] = field(default_factory=list)
    """The directive tags found in the user's messages and acted on this time."""
    hygiene: hygiene.HygieneReport | None = None
    working_memory: dict[str, Any] | None = None
    """The session's working memory as the conversation left it (then cleared)."""
    skills_proposed: list[str] = field(default_factory=list)
    """Skills proposed because this conversation repeated an action sequence."""
    episode: episodes.Episode | None = None
    graph: graphmod.IndexReport | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = self.distilled
        c = self.consolidation
        return {
            "source": self.source,
            "already_processed": self.already_processed,
            "mode": d.mode if d else None,
            "fallback": d.fallback if d else None,
            "summary": d.summary if d else None,
            "facts": len(d.facts) if d else 0,
            "stored": self.stored,
            "deduplicated": self.deduplicated,
            "skipped_known": self.skipped_known,
            "conversation_record": self.record_id,
            "hot_added": self.hot_added,
            "hot_pruned": self.hot_pruned,
            "outbox_recorded": self.outbox,
            "consolidation": None
            if c is None
            else {"promoted": len(c.promoted), "evicted": len(c.evicted)},
            "memory_md": self.memory_md.as_dict() if self.memory_md else None,
            "warnings": d.warnings if d else [],
            "tags": self.tags,
            "hygiene": self.hygiene.as_dict() if self.hygiene else None,
            "working_memory": self.working_memory,
            "skills_proposed": self.skills_proposed,
            "episode": self.episode.id if self.episode else None,
            "graph": self.graph.as_dict() if self.graph else None,
            "notes": self.notes,
        }


def conversation_source(transcript: Transcript, text: str) -> str:
    if transcript.session_id:
        return f"session:{transcript.session_id[:200]}"
    return "conversation:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def conversation_end(
    mem: Memory,
    transcript: Transcript,
    text: str,
    *,
    mode: str | None = None,
    transport: llmmod.Transport | None = None,
    session: str | None = None,
) -> ConversationReport:
    """Distill, store, update hot, consolidate, record the outbox entry, then the tags and
    session hygiene (module doc). `session` names the agent's session for hygiene (default:
    the transcript's session id, else the conversation itself is the session)."""
    mem.require_memory()
    if not transcript.messages and not transcript.tool_commands:
        raise InvalidInput("the transcript has no conversation messages")
    if session is not None:
        session = hygiene.check_session(session)
    tags, transcript = _take_tags(transcript)
    source = conversation_source(transcript, text)
    digest = hashlib.sha256(text.encode()).hexdigest()
    report = ConversationReport(source=source)
    report.memory_md = mem.read_back_memory_md()
    if source_digest(mem, source) == digest:
        report.already_processed = True
        return report
    projects = [p.name for p in mem.hot().active_context.projects]
    distilled = distillmod.distill(
        transcript,
        mem.cfg.distill,
        mode=mode,
        settings=llmmod.settings_from(mem.cfg.llm),
        projects=projects,
        transport=transport,
    )
    distilled.summary = _summary(distilled, mem.cfg.distill.summary_bytes)
    report.distilled = distilled
    now = mem.now()
    held = held_at(transcript, now)
    with mem.db.transaction():
        known = source_items(mem, source)
        _store_facts(mem, report, distilled, known, held[0])
        state = mem.hot_store.load()
        later = (
            distillmod.stated_after(mem.db, mem.agent_id, held[0], source)
            if distilled.profile
            else []
        )
        report.hot_added, hot_keys = _update_hot(state, distilled, known, held[1], later)
        report.hot_pruned = mem.hot_store.save(state, now)
        record_items(mem, source, [(key, "", False) for key in hot_keys])
        record_source(mem, source, digest)
        _episode(mem, report, transcript, distilled, held, transport)
        outbox.enqueue(mem.db, mem.agent_id, "conversation-end", now)
        report.outbox = True
    mem.write_memory_md()
    report.consolidation = mem.consolidate("quick")
    _hygiene(mem, report, tags, known, session or transcript.session_id or source)
    _task_state(mem, report, transcript, session or transcript.session_id)
    return report


def _store_facts(
    mem: Memory,
    report: ConversationReport,
    distilled: distillmod.Distilled,
    known: Container[str],
    held: float,
) -> None:
    """Store the facts this conversation has not given before, and its record; note in the
    report what was stored, merged into a known memory or already known."""
    source = report.source
    fresh = [f for f in distilled.facts if item_key(f.text) not in known]
    report.skipped_known = len(distilled.facts) - len(fresh)
    facts = [_new_fact(f, source, held) for f in fresh]
    record = _record_fact(distilled, source, held)
    if record is not None and item_key(record.text) not in known:
        facts.append(record)
    outcomes = mem.store_many(facts)
    for fact, outcome in zip(facts, outcomes, strict=True):
        if fact is record:
            report.record_id = outcome.id
        elif outcome.created:
            report.stored.append(outcome.id)
        else:
            report.deduplicated.append(
                {
                    "text": fact.text,
                    "merged_into": outcome.merged_into,
                    "similarity": outcome.similarity,
                }
            )
    record_items(
        mem,
        source,
        [(item_key(f.text), o.id, o.created) for f, o in zip(facts, outcomes, strict=True)],
    )


def held_at(transcript: Transcript, now: float) -> tuple[float, float]:
    """When the conversation began and ended: the transcript's own timestamps, else now (a
    moment after now is taken as now)."""
    span = transcript.span
    if span is None:
        return now, now
    return min(span[0], now), min(span[1], now)


def _summary(distilled: distillmod.Distilled, max_bytes: int) -> str:
    """The core summary, ending on a whole phrase with an ellipsis when its most important
    fact did not fit in `max_bytes`."""
    if not distilled.facts or not distilled.summary:
        return distilled.summary
    head = max(distilled.facts, key=lambda f: f.importance)
    whole = distillmod.summarize(head.text, len(head.text.encode()) + 2)
    return summarise.end_on_phrase(distilled.summary, whole, max_bytes)


def _episode(
    mem: Memory,
    report: ConversationReport,
    transcript: Transcript,
    distilled: distillmod.Distilled,
    held: tuple[float, float],
    transport: llmmod.Transport | None,
) -> None:
    """The conversation's episode, then the graph of its facts and of the episode."""
    fact_ids = [*report.stored, *(d["merged_into"] for d in report.deduplicated)]
    if report.record_id:
        fact_ids.append(report.record_id)
    roles = [m.role for m in transcript.messages if m.role]
    draft = episodes.Draft(
        source=report.source,
        texts=[m.text for m in transcript.messages],
        participants=[*dict.fromkeys(roles), *distilled.people],
        fact_ids=[str(i) for i in fact_ids if i],
        started_at=held[0],
        ended_at=held[1],
    )
    report.episode = episodes.write(mem, draft, transport=transport)
    found = supersession.catch_up(mem)
    linked = graphmod.index_episode(mem, report.episode.id, report.episode.summary, transport)
    found.entities |= linked.entities
    found.relations += linked.relations
    report.graph = found
    report.notes += draft.notes + linked.notes


def _task_state(
    mem: Memory, report: ConversationReport, transcript: Transcript, session: str | None
) -> None:
    """Fold the session's working memory into the report (and clear it); record the
    conversation's actions and the skills they complete."""
    if session:
        report.working_memory = working.clear(mem, session[: hygiene.MAX_SESSION_CHARS]) or None
    report.skills_proposed = [s.name for s in skills.observe(mem, report.source, transcript)]


def _take_tags(transcript: Transcript) -> tuple[list[hygiene.Tag], Transcript]:
    """The directive tags of the user's messages (and speakerless notes), and the transcript
    with every tag taken out of its text (so no tag is distilled into a fact)."""
    tags: list[hygiene.Tag] = []
    messages = []
    for message in transcript.messages:
        if message.role in ("user", ""):
            tags += hygiene.find_tags(message.text)
        cleaned = hygiene.strip_tags(message.text)
        if cleaned:
            messages.append(dataclasses.replace(message, text=cleaned))
    return tags, dataclasses.replace(transcript, messages=messages)


def _hygiene(
    mem: Memory,
    report: ConversationReport,
    tags: list[hygiene.Tag],
    known: dict[str, tuple[str, bool]],
    session: str,
) -> None:
    """Tags not acted on before (a growing session repeats its earlier ones), then the
    session-end rules."""
    result = hygiene.HygieneReport()
    done = []
    for i, tag in enumerate(tags):
        key = "tag:" + item_key(f"{i}:{tag.text}")
        if key in known:
            continue
        result.merge(hygiene.apply_tag(mem, tag, session))
        report.tags.append(tag.text)
        done.append((key, "", False))
    if done:
        with mem.db.transaction():
            record_items(mem, report.source, done)
    ended = hygiene.end_session(mem, session[: hygiene.MAX_SESSION_CHARS])
    ended.merge(result)
    ended.health = result.health
    report.hygiene = ended


def _new_fact(fact: distillmod.Fact, source: str, said_at: float) -> NewFact:
    return NewFact(
        text=fact.text,
        category=fact.category,
        importance=fact.importance,
        urls=tuple(fact.urls[:MAX_METADATA_ITEMS]),
        commands=tuple(fact.commands[:MAX_METADATA_ITEMS]),
        paths=tuple(fact.paths[:MAX_METADATA_ITEMS]),
        source=source,
        created_at=said_at,
    )


def _record_fact(distilled: distillmod.Distilled, source: str, held_at: float) -> NewFact | None:
    """One warm fact per conversation: its summary, and the URLs, commands and paths it
    mentioned (so they are kept even when no kept fact carries them; at most 50 of each)."""
    if not distilled.summary and not (distilled.urls or distilled.commands or distilled.paths):
        return None
    day = time.strftime("%Y-%m-%d", time.gmtime(held_at))
    summary = distilled.summary or "links and commands"
    return NewFact(
        text=f"Conversation {day}: {summary} [{source.split(':', 1)[1][:12]}]",
        category=RECORD_CATEGORY,
        importance=RECORD_IMPORTANCE,
        urls=tuple(meta.fit(distilled.urls, MAX_METADATA_ITEMS)),
        commands=tuple(meta.fit(distilled.commands, MAX_METADATA_ITEMS)),
        paths=tuple(meta.fit(distilled.paths, MAX_METADATA_ITEMS)),
        source=source,
        created_at=held_at,
    )


def _update_hot(
    state: HotState,
    distilled: distillmod.Distilled,
    known: dict[str, tuple[str, bool]],
    now: float,
    later: list[str],
) -> tuple[list[str], list[str]]:
    """Events, open tasks and lessons of the conversation into hot memory, and the owner-profile
    fields the person stated into its owner profile unless a `later` statement states them too;
    (what was added, their item keys). An item the same session already gave in an earlier
    call is not added again — a task completed since then stays completed."""
    stated = [(f"hot:profile:{item_key(f'{p.field}:{p.value}')}", p) for p in distilled.profile]
    fresh = [(key, p) for key, p in stated if key not in known]
    changed = distillmod.follow_profile(state, [p for _, p in fresh], later)
    added = [f"profile: {c}" for c in changed]
    keys: list[str] = list(dict.fromkeys(key for key, _ in fresh))
    importance = {f.text: f.importance for f in distilled.facts}
    for kind, texts in (
        ("event", distilled.events),
        ("task", distilled.tasks),
        ("lesson", distilled.lessons),
    ):
        for text in texts:
            key = f"hot:{kind}:{item_key(text)}"
            if key in known or key in keys:
                continue
            if kind == "event":
                HotStore.add_event(state, text, now)
            elif kind == "task":
                HotStore.add_task(state, text, now)
            else:
                value = min(1.0, max(0.7, importance.get(text, 0.8)))
                HotStore.add_lesson(state, text, value, "lessons", now)
            added.append(f"{kind}: {text}")
            keys.append(key)
    return added, keys
