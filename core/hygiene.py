"""Session hygiene (seed 002): what agents use rises into hot memory, what they stop using leaves.

- **Sessions.** An agent names its session (OpenClaw's session id, `--session`, or
  `TIERMEM_SESSION`); sessions are numbered in the order first seen. Recalls and context
  injections made with a session record which memories they returned (one row per memory and
  session: a session recalling a memory 50 times counts once) and which hot lessons they used.
- **Promotion.** A memory recalled in ≥ 3 distinct sessions becomes a hot lesson (an archived
  one comes back to warm first). Promotion is terminal for its access record: a later demotion
  starts the count again from zero.
- **Demotion.** A hot lesson not used in the last 3 sessions leaves hot memory, unless it is
  pinned or critical (importance ≥ 0.9). Demotion is not deletion: the lesson's memory stays
  in warm (a lesson without one becomes a warm memory).
- **Tags** (`[[pin:…]]`, `[[promote:…]]`, `[[forget:…]]`, `[[forget keyword:…]]`,
  `[[restore:…]]`, `[[memory_health]]`) name an entry by id (a memory's or a hot lesson's) or
  by `category:slug` / `slug`, where the slug is a piece of the entry's text in lower-case words
  joined by `-` (`decisions:two-tier` finds "Two-tier architecture adopted" in decisions/…).
- **Forgetting archives, never deletes**: a hot lesson is demoted to warm; a memory moves to the
  forgotten archive (out of retrieval and the index, kept whole) and `restore` brings it back.
- **Expiry**: a memory stored with an expiry date moves to the cold archive once it has passed.

Everything here runs in the caller's `Memory`, on that agent's rows only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tiermem.core import curate, outbox
from tiermem.core.errors import InvalidInput, LimitExceeded, NotFound
from tiermem.core.hot import HotState, HotStore, Lesson
from tiermem.core.retrieve import RetrievalResult
from tiermem.core.scoring import DAY
from tiermem.core.terms import matched_terms, stem
from tiermem.core.tree import normalize_path
from tiermem.core.warm import NewFact

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

PROMOTE_SESSIONS = 3
"""A memory recalled in this many distinct sessions is promoted to hot."""
DEMOTE_SESSIONS = 3
"""A hot lesson unused for this many sessions is demoted (unless pinned or critical)."""
CRITICAL_IMPORTANCE = 0.9
COLD_CANDIDATE_DAYS = 30
LOG_RETENTION_DAYS = 180
MAX_KEYWORD_FORGET = 1000
MAX_SESSION_CHARS = 200
_WORD = re.compile(r"[^\W_]+")

Action = Literal["pin", "unpin", "promote", "demote", "forget", "forget keyword", "restore"]


def check_session(session: str) -> str:
    value = " ".join(str(session).split())
    if not value:
        raise InvalidInput("session id is empty")
    if len(value) > MAX_SESSION_CHARS:
        raise InvalidInput(f"session id is longer than {MAX_SESSION_CHARS} characters")
    return value


def slugify(text: str) -> str:
    """Lower-case words joined by '-': "Two-tier architecture!" → "two-tier-architecture"."""
    return "-".join(_WORD.findall(text.casefold()))


# -- sessions and accesses ---------------------------------------------------------------------


def session_number(mem: Memory, session: str, now: float) -> int:
    """The session's number (1, 2, … in the order the agent's sessions were first seen),
    registering it if new. Inside the caller's transaction."""
    found = mem.db.scalar(
        "SELECT n FROM sessions WHERE agent_id = ? AND session_id = ?", (mem.agent_id, session)
    )
    if found is not None:
        return int(found)
    n = _last_session(mem) + 1
    mem.db.execute(
        "INSERT INTO sessions (agent_id, session_id, n, first_seen) VALUES (?, ?, ?, ?)",
        (mem.agent_id, session, n, now),
    )
    return n


def _last_session(mem: Memory) -> int:
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
            "ON CONFLICT (agent_id, id, session_id) DO UPDATE SET at = excluded.at",
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


# -- promotion and demotion ---------------------------------------------------------------------


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


def _log(mem: Memory, action: str, item: str, text: str, reason: str) -> None:
    mem.db.execute(
        "INSERT INTO hygiene_log (agent_id, at, action, item, text, reason) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (mem.agent_id, mem.now(), action, item, text[:500], reason),
    )


def _sync_tracking(mem: Memory, state: HotState) -> None:
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
    last = _last_session(mem)
    mem.db.executemany(
        "INSERT INTO hot_tracking (agent_id, lesson_id, last_n) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, lesson_id) DO NOTHING",
        [(mem.agent_id, i, last) for i in current - known],
    )


def _tracking(mem: Memory) -> dict[str, tuple[int, float | None, bool]]:
    rows = mem.db.query(
        "SELECT lesson_id, last_n, last_access, pinned FROM hot_tracking WHERE agent_id = ?",
        (mem.agent_id,),
    )
    return {str(r[0]): (int(r[1]), None if r[2] is None else float(r[2]), bool(r[3])) for r in rows}


def _mark_promoted(mem: Memory, memory_id_: str) -> None:
    """Consolidation promotes a memory once: a demoted lesson is not brought straight back."""
    mem.db.execute(
        "INSERT INTO promoted (agent_id, id, promoted_at) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO NOTHING",
        (mem.agent_id, memory_id_, mem.now()),
    )


def _clear_access(mem: Memory, memory_id_: str) -> None:
    mem.db.execute(
        "DELETE FROM session_access WHERE agent_id = ? AND id = ?", (mem.agent_id, memory_id_)
    )


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
        _mark_promoted(mem, record.id)
        _clear_access(mem, record.id)
        outbox.enqueue(mem.db, mem.agent_id, "hot", now)  # critical state changed: sync it
        _sync_tracking(mem, state)
        mem.db.execute(
            "UPDATE hot_tracking SET last_n = ? WHERE agent_id = ? AND lesson_id = ?",
            (_last_session(mem), mem.agent_id, lesson.id),
        )
        _log(mem, "promote", record.id, record.text, reason)
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
        _mark_promoted(mem, memory_id_)
        _clear_access(mem, memory_id_)
        _sync_tracking(mem, state)
        _log(mem, "demote", lesson.id, lesson.text, reason)
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
        _sync_tracking(mem, mem.hot_store.load())
    report.expired = archive_expired(mem)
    rows = mem.db.query(
        "SELECT id, COUNT(*) FROM session_access WHERE agent_id = ? GROUP BY id "
        "HAVING COUNT(*) >= ? ORDER BY COUNT(*) DESC, id",
        (mem.agent_id, PROMOTE_SESSIONS),
    )
    for memory_id_, count in rows:
        try:
            report.promoted.append(promote_memory(mem, str(memory_id_), f"{count} sessions"))
        except NotFound:
            with mem.db.transaction():
                _clear_access(mem, str(memory_id_))
        except (InvalidInput, LimitExceeded) as exc:
            report.skipped.append(f"promote {memory_id_}: {exc}")
            with mem.db.transaction():
                _clear_access(mem, str(memory_id_))
    last = _last_session(mem)
    state = mem.hot()
    pinned_memories = curate.pinned_ids(mem.db, mem.agent_id)
    for lesson_id, (last_n, _, pinned) in _tracking(mem).items():
        lesson = next((x for x in state.critical_lessons if x.id == lesson_id), None)
        if lesson is None or last - last_n < DEMOTE_SESSIONS:
            continue
        if pinned or lesson.source_id in pinned_memories or _critical(lesson):
            continue
        report.demoted.append(demote_lesson(mem, lesson_id, f"unused for {last - last_n} sessions"))
    return report


def _critical(lesson: Lesson) -> bool:
    return lesson.importance >= CRITICAL_IMPORTANCE


# -- naming entries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    kind: Literal["memory", "lesson", "forgotten"]
    id: str
    text: str
    category: str


def resolve(mem: Memory, ref: str, *, forgotten: bool = False) -> Target:
    """The one entry `ref` names: a hot lesson id, a memory id, (with `forgotten`) a forgotten
    memory's id, or `category:slug` / `slug` (see the module doc). A slug matching several
    entries is an error listing them."""
    ref = " ".join(ref.split())
    if not ref:
        raise InvalidInput("no entry named: give an id or category:slug")
    state = mem.hot()
    if forgotten:
        row = mem.db.query_one(
            "SELECT data FROM forgotten WHERE agent_id = ? AND id = ?", (mem.agent_id, ref)
        )
        if row is not None:
            data = json.loads(row[0])
            return Target("forgotten", ref, data["text"], data["category"])
    else:
        for lesson in state.critical_lessons:
            if lesson.id == ref:
                return Target("lesson", lesson.id, lesson.text, lesson.category)
        found = mem.memories.get_many([ref])
        if found:
            return Target("memory", found[0].id, found[0].text, found[0].category)
    layer, _, slug_part = ref.rpartition(":")
    layer = normalize_path(layer) if layer.strip() else ""
    slug = slugify(slug_part)
    if not slug:
        raise InvalidInput(f"{ref!r} names no entry: give an id or category:slug")
    matches: list[Target] = []
    if forgotten:
        matches = _forgotten_matching(mem, slug, layer)
    else:
        lessons = [
            x
            for x in state.critical_lessons
            if _in_layer(x.category, layer) and slug in slugify(x.text)
        ]
        sources = {x.source_id for x in lessons}
        matches = [Target("lesson", x.id, x.text, x.category) for x in lessons]
        matches += [
            Target("memory", m_id, text, category)
            for m_id, text, category in memories_matching(mem, slug, layer, limit=50)
            if m_id not in sources
        ]
    what = "forgotten memory" if forgotten else "entry"
    if not matches:
        raise NotFound(f"no {what} matches {ref!r}")
    if len(matches) > 1:
        shown = "; ".join(f"{t.id} {t.text[:40]!r}" for t in matches[:3])
        raise InvalidInput(
            f"{ref!r} matches {len(matches)} entries ({shown}…): name one by its id"
            if len(matches) > 3
            else f"{ref!r} matches {len(matches)} entries ({shown}): name one by its id"
        )
    return matches[0]


def _in_layer(category: str, layer: str) -> bool:
    return not layer or category == layer or category.startswith(layer + "/")


def memories_matching(
    mem: Memory, slug: str, layer: str = "", limit: int = MAX_KEYWORD_FORGET + 1
) -> list[tuple[str, str, str]]:
    """(id, text, category) of memories whose slugified text or category contains `slug`:
    full-text candidates holding all its words, checked as a continuous piece."""
    words = slug.split("-")
    match = " AND ".join('"' + w.replace('"', '""') + '"' for w in words)
    rows = mem.db.query(
        "SELECT m.id, m.text, m.category FROM memories_fts JOIN memories m "
        "ON m.seq = memories_fts.rowid WHERE memories_fts MATCH ? AND memories_fts.rowid "
        "BETWEEN ? << 32 AND (? << 32) + 4294967295 AND m.agent_id = ? LIMIT ?",
        (match, mem.memories.slot, mem.memories.slot, mem.agent_id, 20 * limit),
    )
    out = []
    for memory_id_, text, category in rows:
        if not _in_layer(str(category), layer):
            continue
        if slug in slugify(str(text)) or slug in slugify(str(category)):
            out.append((str(memory_id_), str(text), str(category)))
            if len(out) >= limit:
                break
    return out


def _forgotten_matching(mem: Memory, slug: str, layer: str) -> list[Target]:
    first = slug.split("-")[0]
    rows = mem.db.query(
        "SELECT id, data FROM forgotten WHERE agent_id = ? AND instr(lower(data), ?) > 0",
        (mem.agent_id, first),
    )
    out = []
    for memory_id_, raw in rows:
        data = json.loads(raw)
        if _in_layer(data["category"], layer) and slug in slugify(data["text"]):
            out.append(Target("forgotten", str(memory_id_), data["text"], data["category"]))
    return out


# -- the actions behind the tags (and their CLI/MCP twins) --------------------------------------


def pin(mem: Memory, ref: str, pinned: bool = True) -> dict[str, Any]:
    """Pin (or unpin) a hot lesson or a memory: a pinned lesson is never demoted, a pinned
    memory never evicted (and its lesson, if it has one, never demoted)."""
    target = resolve(mem, ref)
    action = "pin" if pinned else "unpin"
    with mem.db.transaction():
        _sync_tracking(mem, mem.hot_store.load())
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
        _log(mem, action, target.id, target.text, "request")
    return {
        "action": action,
        "kind": target.kind,
        "id": target.id,
        "text": target.text,
        "lessons": lesson_ids,
        "memories": memory_ids,
        "tier": tier,
    }


def promote(mem: Memory, ref: str) -> dict[str, Any]:
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


def demote(mem: Memory, ref: str) -> dict[str, Any]:
    """A hot lesson (named, or made from the named memory) leaves hot memory."""
    target = resolve(mem, ref)
    lesson_id = target.id if target.kind == "lesson" else _lesson_of(mem, target.id)
    if lesson_id is None:
        raise InvalidInput(f"{target.id} is not in hot memory: forget it to archive it")
    return demote_lesson(mem, lesson_id, "user request")


def _lesson_of(mem: Memory, memory_id_: str) -> str | None:
    return curate.hot_lesson_for(mem, memory_id_)


def forget(mem: Memory, ref: str) -> dict[str, Any]:
    """A hot entry is demoted to warm (seed 002: forget takes it out of L1); any other memory is
    archived (restorable with `restore`). Nothing is deleted."""
    target = resolve(mem, ref)
    lesson_id = target.id if target.kind == "lesson" else _lesson_of(mem, target.id)
    if lesson_id is not None:
        return {"action": "demoted"} | demote_lesson(mem, lesson_id, "forget")
    return {"action": "archived"} | archive(mem, target.id, "forget")


def archive(mem: Memory, memory_id_: str, reason: str) -> dict[str, Any]:
    with mem.db.transaction():
        record = curate.forget(mem, memory_id_)
        _clear_access(mem, memory_id_)
        _log(mem, "archive", record.id, record.text, reason)
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
        _log(mem, "restore", record.id, record.text, "request")
    if session:
        track(mem, session, [record.id])
    return {"id": record.id, "text": record.text, "tier": record.tier}


# -- expiry and extras (tags, expiry date) ------------------------------------------------------


def set_extras(
    mem: Memory, memory_id_: str, tags: Sequence[str], expires_at: float | None
) -> tuple[str, ...]:
    """Add tags (kept as a union) and set the expiry of a memory; returns its tags."""
    clean = [" ".join(t.split()) for t in tags]
    if any(not t for t in clean) or any(len(t) > 64 or "\n" in t for t in clean):
        raise InvalidInput("tags must be non-empty and at most 64 characters")
    if len(clean) > 20:
        raise InvalidInput("at most 20 tags")
    old = extras_for(mem, [memory_id_]).get(memory_id_, ((), None))
    merged = tuple(dict.fromkeys((*old[0], *clean)))[:20]
    expiry = expires_at if expires_at is not None else old[1]
    if not merged and expiry is None:
        return ()
    mem.db.execute(
        "INSERT INTO memory_extras (agent_id, id, tags, expires_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO UPDATE SET tags = excluded.tags, "
        "expires_at = excluded.expires_at",
        (mem.agent_id, memory_id_, "\n".join(merged), expiry),
    )
    return merged


def extras_for(mem: Memory, ids: Sequence[str]) -> dict[str, tuple[tuple[str, ...], float | None]]:
    out: dict[str, tuple[tuple[str, ...], float | None]] = {}
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        rows = mem.db.query(
            f"SELECT id, tags, expires_at FROM memory_extras WHERE agent_id = ? AND id IN "
            f"({','.join('?' * len(chunk))})",
            (mem.agent_id, *chunk),
        )
        for memory_id_, tags, expires in rows:
            out[str(memory_id_)] = (
                tuple(t for t in str(tags).split("\n") if t),
                None if expires is None else float(expires),
            )
    return out


def archive_expired(mem: Memory) -> list[str]:
    """Warm memories whose expiry date has passed move to the cold archive."""
    now = mem.now()
    rows = mem.db.query(
        "SELECT e.id FROM memory_extras e JOIN memories m ON m.agent_id = e.agent_id "
        "AND m.id = e.id WHERE e.agent_id = ? AND e.expires_at IS NOT NULL "
        "AND e.expires_at <= ? AND m.tier = 'warm'",
        (mem.agent_id, now),
    )
    ids = [str(r[0]) for r in rows]
    if ids:
        with mem.db.transaction():
            mem.memories.move(ids, "cold", now)
            for memory_id_ in ids:
                _log(mem, "expire", memory_id_, "", "expiry date passed")
    return ids


# -- health -------------------------------------------------------------------------------------


@dataclass
class Health:
    l1_bullets: int
    l1_limit: int
    l1_pinned: int
    l2_categories: int
    l2_entries_tracked: int
    promotions: int
    demotions: int
    archive_queue: int
    critical: int
    pinned: int
    recent: int
    stale: int
    cold: int
    cold_candidates: int
    out_of_sync: int
    log_pruned: int
    sessions: int
    top_stale: list[tuple[str, int]]

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self)) | {
            "top_stale": [{"entry": e, "sessions_since_access": n} for e, n in self.top_stale]
        }

    def text(self) -> str:
        lines = [
            "=== Memory Health ===",
            f"L1: {self.l1_bullets}/{self.l1_limit} bullets | {self.l1_pinned} tagged [pin]",
            f"L2: {self.l2_categories} files | {self.l2_entries_tracked} entries tracked",
            f"Promotions (total): {self.promotions}",
            f"Demotions (total): {self.demotions}",
            f"Archive queue: {self.archive_queue} items",
            "===",
            "Priority breakdown:",
            f"🔒 critical: {self.critical} 📌 pinned: {self.pinned} 🔥 recent: {self.recent} "
            f"⏳ stale: {self.stale} ❄️ cold: {self.cold}",
            "===",
            f"L2 cold candidates (never accessed, age>{COLD_CANDIDATE_DAYS}d): "
            f"{self.cold_candidates}",
            f"L1↔L2 sync (L1 has stale L2 source): {self.out_of_sync}",
            "===",
            "Log Cleanup:",
            f"Log items over {LOG_RETENTION_DAYS} days pruned from the hygiene log: "
            f"{self.log_pruned}",
            "===",
            "Top L1 entries by sessionsSinceAccess:",
        ]
        lines += [
            f"{i}. {entry} — {n} sessions stale" for i, (entry, n) in enumerate(self.top_stale, 1)
        ]
        if not self.top_stale:
            lines.append("(no hot lessons)")
        return "\n".join(lines)


def health(mem: Memory) -> Health:
    """The seed 002 status snapshot. L1 = hot lessons, L2 = warm/cold memories (a "file" is a
    category), the archive queue = the forgotten archive. Prunes log items over 180 days."""
    now = mem.now()
    with mem.db.transaction():
        state = mem.hot_store.load()
        _sync_tracking(mem, state)
        cutoff = now - LOG_RETENTION_DAYS * DAY
        pruned = int(
            mem.db.scalar(
                "SELECT COUNT(*) FROM hygiene_log WHERE agent_id = ? AND at < ?",
                (mem.agent_id, cutoff),
            )
        )
        mem.db.execute(
            "DELETE FROM hygiene_log WHERE agent_id = ? AND at < ?", (mem.agent_id, cutoff)
        )
        mem.db.execute(
            "DELETE FROM session_access WHERE agent_id = ? AND at < ?", (mem.agent_id, cutoff)
        )
    tracking = _tracking(mem)
    last = _last_session(mem)
    pinned_memories = curate.pinned_ids(mem.db, mem.agent_id)
    counts = {"critical": 0, "pinned": 0, "recent": 0, "stale": 0, "cold": 0}
    stale_list = []
    out_of_sync = 0
    for lesson in state.critical_lessons:
        last_n, _, pinned = tracking.get(lesson.id, (last, None, False))
        since = max(0, last - last_n)
        stale_list.append((f"{lesson.category}:{slugify(lesson.text)[:40]}", since))
        if _critical(lesson):
            counts["critical"] += 1
        elif pinned or lesson.source_id in pinned_memories:
            counts["pinned"] += 1
        elif since == 0:
            counts["recent"] += 1
        elif since < DEMOTE_SESSIONS:
            counts["stale"] += 1
        else:
            counts["cold"] += 1
        if lesson.source_id:
            source = mem.memories.get_many([lesson.source_id])
            if not source or source[0].text != lesson.text:
                out_of_sync += 1

    def count(sql: str, *params: object) -> int:
        return int(mem.db.scalar(sql, (mem.agent_id, *params)))

    log_counts = dict(
        (str(r[0]), int(r[1]))
        for r in mem.db.query(
            "SELECT action, COUNT(*) FROM hygiene_log WHERE agent_id = ? GROUP BY action",
            (mem.agent_id,),
        )
    )
    promotions = count("SELECT COALESCE(SUM(promotions), 0) FROM metrics_daily WHERE agent_id = ?")
    return Health(
        l1_bullets=len(state.critical_lessons),
        l1_limit=mem.cfg.hot.max_lessons,
        l1_pinned=sum(
            1
            for x in state.critical_lessons
            if tracking.get(x.id, (0, None, False))[2] or x.source_id in pinned_memories
        ),
        l2_categories=count(
            "SELECT COUNT(DISTINCT category) FROM memories WHERE agent_id = ? AND tier = 'warm'"
        ),
        l2_entries_tracked=count(
            "SELECT COUNT(DISTINCT id) FROM session_access WHERE agent_id = ?"
        ),
        promotions=promotions,
        demotions=log_counts.get("demote", 0),
        archive_queue=curate.forgotten_count(mem),
        cold_candidates=count(
            "SELECT COUNT(*) FROM memories WHERE agent_id = ? AND tier = 'warm' "
            "AND access_count = 0 AND created_at < ?",
            now - COLD_CANDIDATE_DAYS * DAY,
        ),
        out_of_sync=out_of_sync,
        log_pruned=pruned,
        sessions=last,
        top_stale=sorted(stale_list, key=lambda x: -x[1])[:5],
        **counts,
    )


# -- tags in a transcript -----------------------------------------------------------------------

TAG = re.compile(
    r"\[\[\s*(pin|unpin|promote|demote|forget keyword|forget|restore)\s*:\s*([^\]\n]+?)\s*\]\]"
    r"|\[\[\s*(memory_health)\s*\]\]",
    re.I,
)


@dataclass(frozen=True)
class Tag:
    action: str
    """pin, unpin, promote, demote, forget, forget keyword, restore or memory_health."""
    argument: str

    @property
    def text(self) -> str:
        return f"[[{self.action}:{self.argument}]]" if self.argument else f"[[{self.action}]]"


def find_tags(text: str) -> list[Tag]:
    tags = []
    for match in TAG.finditer(text):
        if match.group(3):
            tags.append(Tag("memory_health", ""))
        else:
            action = " ".join(match.group(1).casefold().split())
            tags.append(Tag(action, match.group(2).strip()))
    return tags


def strip_tags(text: str) -> str:
    return re.sub(r"[ \t]{2,}", " ", TAG.sub("", text)).strip()


def apply_tag(mem: Memory, tag: Tag, session: str | None = None) -> HygieneReport:
    """Act on one tag. A tag that cannot act (nothing matches, ambiguous) is reported as
    skipped, never fatal: the rest of the conversation is still processed."""
    report = HygieneReport()
    try:
        if tag.action == "memory_health":
            report.health = health(mem).text()
        elif tag.action in ("pin", "unpin"):
            report.pinned.append(pin(mem, tag.argument, tag.action == "pin"))
        elif tag.action == "promote":
            report.promoted.append(promote(mem, tag.argument))
        elif tag.action == "demote":
            report.demoted.append(demote(mem, tag.argument))
        elif tag.action == "forget":
            done = forget(mem, tag.argument)
            (report.demoted if done["action"] == "demoted" else report.archived).append(done)
        elif tag.action == "forget keyword":
            report.merge(forget_keyword(mem, tag.argument))
        elif tag.action == "restore":
            report.restored.append(restore(mem, tag.argument, session))
    except (InvalidInput, NotFound, LimitExceeded) as exc:
        report.skipped.append(f"{tag.text}: {exc}")
    return report
