"""Where a hot lesson came from, and the hygiene log as a file an owner can read.

A lesson promoted from warm memory carries its source memory's id (`Lesson.source_id`); this
module keeps when and why it was promoted (score, sessions, the owner), and renders the hygiene
log of the home to `<home>/logs/hygiene.log`, one line per promotion, demotion, archival or
expiry, newest last.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.core.files import replace_private
from tiermem.core.hot import HotState

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

LOG_NAME = "hygiene.log"


def note(mem: Memory, source_id: str, why: str) -> None:
    """Record that `source_id` was promoted into hot now, and why (caller's transaction)."""
    mem.db.execute(
        "INSERT INTO hot_provenance (agent_id, source_id, promoted_at, why) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (agent_id, source_id) DO UPDATE SET promoted_at = excluded.promoted_at, "
        "why = excluded.why",
        (mem.agent_id, source_id, mem.now(), why[:200]),
    )


def of_lessons(mem: Memory, state: HotState) -> dict[str, dict[str, Any]]:
    """lesson id → {source_id, promoted_at, why} for every lesson promoted from a memory."""
    rows = mem.db.query(
        "SELECT source_id, promoted_at, why FROM hot_provenance WHERE agent_id = ?",
        (mem.agent_id,),
    )
    known = {str(r[0]): (float(r[1]), str(r[2])) for r in rows}
    out: dict[str, dict[str, Any]] = {}
    for lesson in state.critical_lessons:
        if not lesson.source_id:
            continue
        at, why = known.get(lesson.source_id, (lesson.timestamp, "promoted from warm memory"))
        out[lesson.id] = {"source_id": lesson.source_id, "promoted_at": _iso(at), "why": why}
    return out


def log_lines(mem: Memory, limit: int | None = None) -> list[str]:
    """The agent's hygiene log, oldest first (the last `limit` lines)."""
    rows = mem.db.query(
        "SELECT at, action, item, text, reason FROM hygiene_log WHERE agent_id = ? "
        "ORDER BY at DESC, rowid DESC LIMIT ?",
        (mem.agent_id, -1 if limit is None else limit),
    )
    return [
        f"{_iso(float(at))} {action} {item}: {' '.join(str(text).split())[:160]} ({reason})"
        for at, action, item, text, reason in reversed(rows)
    ]


def log_file(mem: Memory) -> Path:
    """Where the agent's hygiene log is written (the default agent's in `hygiene.log`)."""
    name = LOG_NAME if mem.agent_id == "default" else f"hygiene-{mem.agent_id}.log"
    return mem.home.root / "logs" / name


def write_log(mem: Memory) -> Path:
    """Rewrite the hygiene log file from the log table (atomically, 0600)."""
    path = log_file(mem)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = "\n".join(log_lines(mem)) + "\n"
    replace_private(path, text)
    return path


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
