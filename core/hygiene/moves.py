"""Promotion and demotion between warm memory and hot lessons: the session-end rules and the two
moves they make."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.core import curate, outbox, provenance
from tiermem.core.errors import InvalidInput, LimitExceeded, NotFound
from tiermem.core.hot import CRITICAL_IMPORTANCE, HotStore, Lesson
from tiermem.core.hygiene.extras import archive_expired
from tiermem.core.hygiene.sessions import (
    check_session,
    clear_access,
    last_session,
    log_action,
    mark_promoted,
    session_number,
    sync_tracking,
    tracking_rows,
)
from tiermem.core.warm import NewFact

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

PROMOTE_SESSIONS = 3
"""A memory with this many counted uses is promoted to hot: each session that recalled it
counts once, re-access within a session up to `[hygiene] reaccess_counts` times."""
DEMOTE_SESSIONS = 3
"""A hot lesson unused for this many sessions is demoted (unless pinned or critical)."""


@dataclass
class HygieneReport:
    session: str | None = None
    session_number: int | None = None
    promoted: list[dict[str, Any]] = field(default_factory=list)
    demoted: list[dict[str, Any]] = field(default_factory=list)
    archived: list[dict[str, Any]] = field(default_factory=list)
    restored: list[dict[str, Any]] = field(default_factory=list)
    pinned: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    health: str | None = None

    def merge(self, other: HygieneReport) -> None:
        for name in ("promoted", "demoted", "archived", "restored", "pinned", "skipped", "expired"):
            getattr(self, name).extend(getattr(other, name))
        self.health = other.health or self.health

    def as_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "session_number": self.session_number,
            "promoted": self.promoted,
            "demoted": self.demoted,
            "archived": self.archived,
            "restored": self.restored,
            "pinned": self.pinned,
            "skipped": self.skipped,
            "expired": self.expired,
            "health": self.health,
        }

    def lines(self) -> list[str]:
        out = [f"promoted to hot ({p['reason']}): {p['text']}" for p in self.promoted]
        out += [f"demoted from hot ({d['reason']}): {d['text']}" for d in self.demoted]
        out += [f"archived ({a['reason']}): {a['text']}" for a in self.archived]
        out += [f"restored: {r['text']}" for r in self.restored]
        out += [f"{p['action']}: {p['text']}" for p in self.pinned]
        out += [f"expired to cold: {e}" for e in self.expired]
        out += [f"skipped: {s}" for s in self.skipped]
        return out


def promote_memory(mem: Memory, memory_id_: str, reason: str) -> dict[str, Any]:
    """Make a memory a hot lesson now (an archived one comes back to warm first)."""
    now = mem.now()
    with mem.db.transaction():
        record = mem.get(memory_id_)
        state = mem.hot_store.load()
        if any(lesson.source_id == record.id for lesson in state.critical_lessons):
            raise InvalidInput("this memory is already a lesson in hot memory")
        if record.tier != "warm":
            mem.memories.move([record.id], "warm", now)
        importance = max(record.importance, mem.cfg.scoring.hot_threshold)
        lesson = HotStore.add_lesson(
            state, record.text, importance, record.category, now, source_id=record.id
        )
        pruned = mem.hot_store.save(state, now)
        if f"lesson: {lesson.text}" in pruned:
            raise LimitExceeded("hot memory is full of more important lessons: nothing changed")
        mark_promoted(mem, record.id)
        clear_access(mem, record.id)
        outbox.enqueue(mem.db, mem.agent_id, "hot", now)  # critical state changed: sync it
        sync_tracking(mem, state)
        mem.db.execute(
            "UPDATE hot_tracking SET last_n = ? WHERE agent_id = ? AND lesson_id = ?",
            (last_session(mem), mem.agent_id, lesson.id),
        )
        log_action(mem, "promote", record.id, record.text, reason)
        provenance.note(mem, record.id, reason)
        mem.metrics.bump(now, promotions=1)
    mem.write_memory_md()
    return {
        "id": record.id,
        "lesson_id": lesson.id,
        "text": record.text,
        "reason": reason,
        "pruned": pruned,
    }


def demote_lesson(mem: Memory, lesson_id: str, reason: str) -> dict[str, Any]:
    """Take a lesson out of hot memory; its memory stays in warm (a lesson made by hand becomes
    a warm memory first)."""
    now = mem.now()
    with mem.db.transaction():
        state = mem.hot_store.load()
        lesson = next((x for x in state.critical_lessons if x.id == lesson_id), None)
        if lesson is None:
            raise NotFound(f"no hot lesson {lesson_id!r}")
        source = mem.memories.get_many([lesson.source_id]) if lesson.source_id else []
        if source:
            memory_id_ = source[0].id
        else:
            memory_id_ = mem.store_many(
                [
                    NewFact(
                        text=lesson.text,
                        category=lesson.category,
                        importance=lesson.importance,
                        source="hygiene:demoted",
                    )
                ]
            )[0].id
        state.critical_lessons.remove(lesson)
        mem.hot_store.save(state, now)
        outbox.enqueue(mem.db, mem.agent_id, "hot", now)
        mark_promoted(mem, memory_id_)
        clear_access(mem, memory_id_)
        sync_tracking(mem, state)
        log_action(mem, "demote", lesson.id, lesson.text, reason)
    mem.write_memory_md()
    return {"lesson_id": lesson.id, "id": memory_id_, "text": lesson.text, "reason": reason}


def end_session(mem: Memory, session: str) -> HygieneReport:
    """The session-end rules: register the session, promote memories recalled in ≥ 3 sessions,
    demote hot lessons unused for 3 sessions (never pinned or critical ones), archive expired
    memories."""
    session = check_session(session)
    report = HygieneReport(session=session)
    now = mem.now()
    with mem.db.transaction():
        report.session_number = session_number(mem, session, now)
        mem.db.execute(
            "UPDATE sessions SET ended_at = ? WHERE agent_id = ? AND session_id = ?",
            (now, mem.agent_id, session),
        )
        sync_tracking(mem, mem.hot_store.load())
    report.expired = archive_expired(mem)
    cap = mem.cfg.hygiene.reaccess_counts
    rows = mem.db.query(
        "SELECT id, COUNT(*), SUM(MIN(hits, ?)) AS uses FROM session_access WHERE agent_id = ? "
        "GROUP BY id HAVING uses >= ? ORDER BY uses DESC, id",
        (cap, mem.agent_id, PROMOTE_SESSIONS),
    )
    for memory_id_, count, uses in rows:
        reason = f"{count} sessions" if count == uses else f"{uses} uses in {count} sessions"
        try:
            report.promoted.append(promote_memory(mem, str(memory_id_), reason))
        except NotFound:
            with mem.db.transaction():
                clear_access(mem, str(memory_id_))
        except (InvalidInput, LimitExceeded) as exc:
            report.skipped.append(f"promote {memory_id_}: {exc}")
            with mem.db.transaction():
                clear_access(mem, str(memory_id_))
    last = last_session(mem)
    state = mem.hot()
    pinned_memories = curate.pinned_ids(mem.db, mem.agent_id)
    for lesson_id, (last_n, _, pinned) in tracking_rows(mem).items():
        lesson = next((x for x in state.critical_lessons if x.id == lesson_id), None)
        if lesson is None or last - last_n < DEMOTE_SESSIONS:
            continue
        if pinned or lesson.source_id in pinned_memories or is_critical(lesson):
            continue
        report.demoted.append(demote_lesson(mem, lesson_id, f"unused for {last - last_n} sessions"))
    try:
        provenance.write_log(mem)
    except OSError as exc:
        report.skipped.append(f"hygiene log file: {exc.strerror}")
    return report


def is_critical(lesson: Lesson) -> bool:
    return lesson.importance >= CRITICAL_IMPORTANCE
