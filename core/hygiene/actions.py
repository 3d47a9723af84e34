"""The actions behind the transcript tags and their CLI/MCP twins: pin, promote to hot, demote
from hot, forget (a hot entry is demoted, any other memory archived), forget by keyword, restore."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiermem.core import curate
from tiermem.core.errors import InvalidInput, LimitExceeded
from tiermem.core.hygiene.moves import HygieneReport, demote_lesson, promote_memory
from tiermem.core.hygiene.refs import MAX_KEYWORD_FORGET, memories_matching, resolve, slugify
from tiermem.core.hygiene.sessions import clear_access, log_action, sync_tracking, track

if TYPE_CHECKING:
    from tiermem.core.engine import Memory


def pin(mem: Memory, ref: str, pinned: bool = True) -> dict[str, Any]:
    """Pin (or unpin) a hot lesson or a memory: a pinned lesson is never demoted, a pinned
    memory never evicted (and its lesson, if it has one, never demoted)."""
    target = resolve(mem, ref)
    action = "pin" if pinned else "unpin"
    with mem.db.transaction():
        sync_tracking(mem, mem.hot_store.load())
        lesson_ids = [target.id] if target.kind == "lesson" else []
        memory_ids = [target.id] if target.kind == "memory" else []
        for lesson in mem.hot_store.load().critical_lessons:
            if (
                target.kind == "lesson"
                and lesson.id == target.id
                and lesson.source_id
                and mem.memories.get_many([lesson.source_id])
            ):
                memory_ids.append(lesson.source_id)
            if target.kind == "memory" and lesson.source_id == target.id:
                lesson_ids.append(lesson.id)
        for lesson_id in lesson_ids:
            mem.db.execute(
                "UPDATE hot_tracking SET pinned = ? WHERE agent_id = ? AND lesson_id = ?",
                (int(pinned), mem.agent_id, lesson_id),
            )
        tier = None
        for memory_id_ in memory_ids:
            tier = curate.set_pinned(mem, memory_id_, pinned)
        log_action(mem, action, target.id, target.text, "request")
    return {
        "action": action,
        "kind": target.kind,
        "id": target.id,
        "text": target.text,
        "lessons": lesson_ids,
        "memories": memory_ids,
        "tier": tier,
    }


def promote_to_hot(mem: Memory, ref: str) -> dict[str, Any]:
    """Promote now, bypassing the 3-session rule: a memory becomes a hot lesson."""
    target = resolve(mem, ref)
    lesson_id = target.id if target.kind == "lesson" else _lesson_of(mem, target.id)
    if lesson_id is not None:  # already hot: nothing to do (idempotent)
        return {
            "action": "already hot",
            "id": target.id,
            "lesson_id": lesson_id,
            "text": target.text,
            "reason": "user request",
        }
    return {"action": "promoted"} | promote_memory(mem, target.id, "user request")


def demote_from_hot(mem: Memory, ref: str) -> dict[str, Any]:
    """A hot lesson (named, or made from the named memory) leaves hot memory."""
    target = resolve(mem, ref)
    lesson_id = target.id if target.kind == "lesson" else _lesson_of(mem, target.id)
    if lesson_id is None:
        raise InvalidInput(f"{target.id} is not in hot memory: forget it to archive it")
    return demote_lesson(mem, lesson_id, "user request")


def _lesson_of(mem: Memory, memory_id_: str) -> str | None:
    return curate.hot_lesson_for(mem, memory_id_)


def forget_entry(mem: Memory, ref: str) -> dict[str, Any]:
    """A hot entry is demoted to warm (forget takes it out of L1); any other memory is
    archived (restorable with `restore`). Nothing is deleted."""
    target = resolve(mem, ref)
    lesson_id = target.id if target.kind == "lesson" else _lesson_of(mem, target.id)
    if lesson_id is not None:
        return {"action": "demoted"} | demote_lesson(mem, lesson_id, "forget")
    return {"action": "archived"} | archive(mem, target.id, "forget")


def archive(mem: Memory, memory_id_: str, reason: str) -> dict[str, Any]:
    with mem.db.transaction():
        record = curate.move_to_forgotten(mem, memory_id_)
        clear_access(mem, memory_id_)
        log_action(mem, "archive", record.id, record.text, reason)
    return {"id": record.id, "text": record.text, "reason": reason}


def forget_keyword(mem: Memory, keyword: str) -> HygieneReport:
    """Every hot lesson whose text contains `keyword` (case-insensitive; '-', '_', '.' and
    spaces alike) is demoted, and every memory containing it is archived."""
    slug = slugify(keyword)
    if not slug:
        raise InvalidInput("forget keyword: the keyword has no letters or digits")
    report = HygieneReport()
    for lesson in mem.hot().critical_lessons:
        if slug in slugify(lesson.text):
            report.demoted.append(demote_lesson(mem, lesson.id, f"forget keyword {keyword!r}"))
    found = memories_matching(mem, slug)
    if len(found) > MAX_KEYWORD_FORGET:
        raise LimitExceeded(
            f"{keyword!r} is in more than {MAX_KEYWORD_FORGET} memories: use a narrower keyword"
        )
    with mem.db.transaction():
        for memory_id_, _, _ in found:
            report.archived.append(archive(mem, memory_id_, f"forget keyword {keyword!r}"))
    return report


def restore(mem: Memory, ref: str, session: str | None = None) -> dict[str, Any]:
    """Bring a forgotten (archived) memory back to where it was."""
    target = resolve(mem, ref, forgotten=True)
    record = curate.undo_forget(mem, target.id)
    with mem.db.transaction():
        log_action(mem, "restore", record.id, record.text, "request")
    if session:
        track(mem, session, [record.id])
    return {"id": record.id, "text": record.text, "tier": record.tier}
