"""Sessions and what they used: session numbers, the per-session access record of memories and
hot lessons, the tracking rows of hot lessons, and the hygiene log."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from tiermem.core.errors import InvalidInput
from tiermem.core.hot import HotState
from tiermem.core.retrieve import RetrievalResult
from tiermem.core.terms import matched_terms, stem

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

MAX_SESSION_CHARS = 200


def check_session(session: str) -> str:
    value = " ".join(str(session).split())
    if not value:
        raise InvalidInput("session id is empty")
    if len(value) > MAX_SESSION_CHARS:
        raise InvalidInput(f"session id is longer than {MAX_SESSION_CHARS} characters")
    return value


def session_number(mem: Memory, session: str, now: float) -> int:
    """The session's number (1, 2, … in the order the agent's sessions were first seen),
    registering it if new. Inside the caller's transaction."""
    found = mem.db.scalar(
        "SELECT n FROM sessions WHERE agent_id = ? AND session_id = ?", (mem.agent_id, session)
    )
    if found is not None:
        return int(found)
    n = last_session(mem) + 1
    mem.db.execute(
        "INSERT INTO sessions (agent_id, session_id, n, first_seen) VALUES (?, ?, ?, ?)",
        (mem.agent_id, session, n, now),
    )
    return n


def last_session(mem: Memory) -> int:
    """The number of the agent's latest session (0 before the first)."""
    return int(
        mem.db.scalar(
            "SELECT COALESCE(MAX(n), 0) FROM sessions WHERE agent_id = ?", (mem.agent_id,)
        )
    )


def lessons_used(state: HotState, terms: Sequence[str], memory_ids: Iterable[str]) -> list[str]:
    """Hot lessons a recall used: those made from a returned memory, and those sharing at least
    two of the query's terms with it (one for a one-term query)."""
    ids = set(memory_ids)
    stems = {stem(t): t for t in terms}
    need = min(2, len(stems))
    used = []
    for lesson in state.critical_lessons:
        if (lesson.source_id and lesson.source_id in ids) or (
            need and len(matched_terms(lesson.text, stems)) >= need
        ):
            used.append(lesson.id)
    return used


def track(
    mem: Memory, session: str, memory_ids: Sequence[str], lesson_ids: Sequence[str] = ()
) -> int:
    """Record that `session` used these memories and hot lessons; returns the session number."""
    session = check_session(session)
    now = mem.now()
    with mem.db.relaxed_transaction():
        n = session_number(mem, session, now)
        mem.db.executemany(
            "INSERT INTO session_access (agent_id, id, session_id, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent_id, id, session_id) DO UPDATE SET at = excluded.at, "
            "hits = hits + 1",
            [(mem.agent_id, i, session, now) for i in dict.fromkeys(memory_ids)],
        )
        mem.db.executemany(
            "INSERT INTO hot_tracking (agent_id, lesson_id, last_n, last_access) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (agent_id, lesson_id) DO UPDATE SET "
            "last_n = MAX(last_n, excluded.last_n), last_access = excluded.last_access",
            [(mem.agent_id, i, n, now) for i in dict.fromkeys(lesson_ids)],
        )
    return n


def track_result(mem: Memory, session: str | None, result: RetrievalResult) -> None:
    """`track` for a retrieval's hits and the hot lessons its terms touch (no-op without a
    session)."""
    if not session:
        return
    ids = [h.memory.id for h in result.hits]
    track(mem, session, ids, lessons_used(mem.hot(), result.terms, ids))


def sessions_of(mem: Memory, memory_id_: str) -> list[str]:
    rows = mem.db.query(
        "SELECT session_id FROM session_access WHERE agent_id = ? AND id = ? ORDER BY at",
        (mem.agent_id, memory_id_),
    )
    return [str(r[0]) for r in rows]


def log_action(mem: Memory, action: str, item: str, text: str, reason: str) -> None:
    """One line of the hygiene log (the Health report counts and prunes them; `hygiene.log`
    in the home's logs shows it)."""
    mem.db.execute(
        "INSERT INTO hygiene_log (agent_id, at, action, item, text, reason) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (mem.agent_id, mem.now(), action, item, text[:500], reason),
    )


def sync_tracking(mem: Memory, state: HotState) -> None:
    """Every hot lesson has a tracking row (a new one starts as used in the latest session);
    rows of lessons no longer in hot are dropped."""
    current = {lesson.id for lesson in state.critical_lessons}
    rows = mem.db.query("SELECT lesson_id FROM hot_tracking WHERE agent_id = ?", (mem.agent_id,))
    known = {str(r[0]) for r in rows}
    gone = known - current
    for lesson_id in gone:
        mem.db.execute(
            "DELETE FROM hot_tracking WHERE agent_id = ? AND lesson_id = ?",
            (mem.agent_id, lesson_id),
        )
    last = last_session(mem)
    mem.db.executemany(
        "INSERT INTO hot_tracking (agent_id, lesson_id, last_n) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, lesson_id) DO NOTHING",
        [(mem.agent_id, i, last) for i in current - known],
    )


def tracking_rows(mem: Memory) -> dict[str, tuple[int, float | None, bool]]:
    """lesson id → (last session used, last access, pinned)."""
    rows = mem.db.query(
        "SELECT lesson_id, last_n, last_access, pinned FROM hot_tracking WHERE agent_id = ?",
        (mem.agent_id,),
    )
    return {str(r[0]): (int(r[1]), None if r[2] is None else float(r[2]), bool(r[3])) for r in rows}


def mark_promoted(mem: Memory, memory_id_: str) -> None:
    """Consolidation promotes a memory once: a demoted lesson is not brought straight back."""
    mem.db.execute(
        "INSERT INTO promoted (agent_id, id, promoted_at) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO NOTHING",
        (mem.agent_id, memory_id_, mem.now()),
    )


def clear_access(mem: Memory, memory_id_: str) -> None:
    """Start a memory's count of recalling sessions again from zero."""
    mem.db.execute(
        "DELETE FROM session_access WHERE agent_id = ? AND id = ?", (mem.agent_id, memory_id_)
    )
