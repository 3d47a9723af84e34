"""The Health report (`[[memory_health]]`): hot lessons, their staleness, the archive queue, and the
pruning of old hygiene log items."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.core import curate
from tiermem.core.hot import HotState
from tiermem.core.hygiene.moves import DEMOTE_SESSIONS, is_critical
from tiermem.core.hygiene.refs import slugify
from tiermem.core.hygiene.sessions import last_session, sync_tracking, tracking_rows
from tiermem.core.scoring import DAY

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

COLD_CANDIDATE_DAYS = 30
LOG_RETENTION_DAYS = 180


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
    """The status snapshot of `[[memory_health]]`. L1 = hot lessons, L2 = warm/cold memories (a
    "file" is a category), the archive queue = the forgotten archive. Prunes log items over 180
    days."""
    now = mem.now()
    state, pruned = _prune_log(mem, now)
    tracking = tracking_rows(mem)
    last = last_session(mem)
    pinned_memories = curate.pinned_ids(mem.db, mem.agent_id)
    counts, stale_list, out_of_sync = _lesson_counts(mem, state, tracking, last, pinned_memories)

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


def _prune_log(mem: Memory, now: float) -> tuple[HotState, int]:
    """Sync the lessons' tracking rows and drop log items and accesses over the retention; returns
    the hot state and how many log items went."""
    with mem.db.transaction():
        state = mem.hot_store.load()
        sync_tracking(mem, state)
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
    return state, pruned


def _lesson_counts(
    mem: Memory,
    state: HotState,
    tracking: dict[str, tuple[int, float | None, bool]],
    last: int,
    pinned_memories: set[str],
) -> tuple[dict[str, int], list[tuple[str, int]], int]:
    """Hot lessons by priority band, each lesson's sessions since use, and how many lessons
    differ from (or lost) the memory they were made from."""
    counts = {"critical": 0, "pinned": 0, "recent": 0, "stale": 0, "cold": 0}
    stale_list = []
    out_of_sync = 0
    for lesson in state.critical_lessons:
        last_n, _, pinned = tracking.get(lesson.id, (last, None, False))
        since = max(0, last - last_n)
        stale_list.append((f"{lesson.category}:{slugify(lesson.text)[:40]}", since))
        if is_critical(lesson):
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
    return counts, stale_list, out_of_sync
