"""Session hygiene: what agents use rises into hot memory, what they stop using leaves.

- **Sessions.** An agent names its session (OpenClaw's session id, `--session`, or
  `TIERMEM_SESSION`); sessions are numbered in the order first seen. Recalls and context
  injections made with a session record which memories they returned (one row per memory and
  session, with how often the session re-accessed it) and which hot lessons they used.
- **Promotion.** A memory with ≥ 3 counted uses becomes a hot lesson (an archived one comes
  back to warm first): each session that recalled it counts once, and rapid re-access within
  one session up to `[hygiene] reaccess_counts` times (2 by default; 1 counts sessions only).
  The lesson keeps its provenance (`provenance`: source memory, when, why), and the hygiene
  log is also written to `<home>/logs/hygiene.log`. Promotion is terminal for its access record: a later demotion
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

Everything here runs in the caller's `Memory`, on that agent's rows only. The modules: `sessions`
(session numbers, access records, tracking rows, the log), `moves` (promotion, demotion, the
session-end rules), `refs` (naming entries), `actions` (what the tags do), `extras` (tags and
expiry of a memory), `health` (the report), `tags` (the transcript's directive tags) and
`provenance` (where a hot lesson came from, the log file).
"""

from __future__ import annotations

from tiermem.core.hot import CRITICAL_IMPORTANCE
from tiermem.core.hygiene.actions import (
    archive,
    demote_from_hot,
    forget_entry,
    forget_keyword,
    pin,
    promote_to_hot,
    restore,
)
from tiermem.core.hygiene.extras import archive_expired, extras_for, set_extras
from tiermem.core.hygiene.health import COLD_CANDIDATE_DAYS, LOG_RETENTION_DAYS, Health, health
from tiermem.core.hygiene.moves import (
    DEMOTE_SESSIONS,
    PROMOTE_SESSIONS,
    HygieneReport,
    demote_lesson,
    end_session,
    promote_memory,
)
from tiermem.core.hygiene.refs import (
    MAX_KEYWORD_FORGET,
    Target,
    memories_matching,
    resolve,
    slugify,
)
from tiermem.core.hygiene.sessions import (
    MAX_SESSION_CHARS,
    check_session,
    lessons_used,
    session_number,
    sessions_of,
    track,
    track_result,
)
from tiermem.core.hygiene.tags import TAG, Tag, apply_tag, find_tags, strip_tags

__all__ = [
    "COLD_CANDIDATE_DAYS",
    "CRITICAL_IMPORTANCE",
    "DEMOTE_SESSIONS",
    "LOG_RETENTION_DAYS",
    "MAX_KEYWORD_FORGET",
    "MAX_SESSION_CHARS",
    "PROMOTE_SESSIONS",
    "TAG",
    "Health",
    "HygieneReport",
    "Tag",
    "Target",
    "apply_tag",
    "archive",
    "archive_expired",
    "check_session",
    "demote_from_hot",
    "demote_lesson",
    "end_session",
    "extras_for",
    "find_tags",
    "forget_entry",
    "forget_keyword",
    "health",
    "lessons_used",
    "memories_matching",
    "pin",
    "promote_memory",
    "promote_to_hot",
    "resolve",
    "restore",
    "session_number",
    "sessions_of",
    "set_extras",
    "slugify",
    "strip_tags",
    "track",
    "track_result",
]
