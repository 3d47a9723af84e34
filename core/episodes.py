"""Episodic memory: one episode per conversation, in its own table with an expiry.

An episode keeps what a conversation was about: a summary (extractive, or written by the `[llm]`
endpoint when `[episodes] summary = "llm"`, falling back to the extractive one), key topics,
participants, its time span, a one-sentence abstract of at most 200 characters for context
injection (always extractive), and the ids of the facts distilled from it. Its source (the
conversation's id) is unique per agent, so a replayed transcript adds nothing. Consolidation
deletes expired episodes; dreaming (core/dreaming.py) turns unpromoted ones into facts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.core import summarise
from tiermem.core.db import Database, Row
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.scoring import DAY
from tiermem.core.terms import fts_match, query_terms

if TYPE_CHECKING:
    from tiermem.core import llm as llmmod
    from tiermem.core.engine import Memory

COLUMNS = (
    "id, source, summary, abstract, topics, participants, fact_ids, started_at, ended_at, "
    "created_at, expires_at, promoted_at"
)
_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "topics": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["summary", "topics"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Episode:
    """One conversation as the agent remembers it: summary, abstract, topics and its facts."""

    id: str
    source: str
    summary: str
    abstract: str
    topics: tuple[str, ...]
    participants: tuple[str, ...]
    fact_ids: tuple[str, ...]
    started_at: float
    ended_at: float
    created_at: float
    expires_at: float
    promoted_at: float | None = None

    @classmethod
    def from_row(cls, row: Row) -> Episode:
        return cls(
            id=str(row[0]),
            source=str(row[1]),
            summary=str(row[2]),
            abstract=str(row[3]),
            topics=_split(row[4]),
            participants=_split(row[5]),
            fact_ids=_split(row[6]),
            started_at=float(row[7]),
            ended_at=float(row[8]),
            created_at=float(row[9]),
            expires_at=float(row[10]),
            promoted_at=None if row[11] is None else float(row[11]),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "source": self.source,
            "summary": self.summary,
            "abstract": self.abstract,
            "topics": list(self.topics),
            "participants": list(self.participants),
            "fact_ids": list(self.fact_ids),
            "started_at": iso(self.started_at),
            "ended_at": iso(self.ended_at),
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at),
            "promoted_at": iso(self.promoted_at) if self.promoted_at else None,
        }


@dataclass
class Draft:
    """An episode before it is stored: what a conversation gives."""

    source: str
    texts: list[str]
    participants: list[str]
    fact_ids: list[str]
    started_at: float
    ended_at: float
    notes: list[str] = field(default_factory=list)


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _split(value: object) -> tuple[str, ...]:
    return tuple(v for v in str(value or "").split("\n") if v)


def episode_id(agent_id: str, source: str) -> str:
    import hashlib  # only naming new items hashes: reads skip loading OpenSSL

    return "ep-" + hashlib.sha256(f"{agent_id}\n{source}".encode()).hexdigest()[:12]


def write(mem: Memory, draft: Draft, *, transport: llmmod.Transport | None = None) -> Episode:
    """Store the episode of a conversation. A session that grows (the same source, more text)
    updates its episode: a new summary, the later end, the facts of both calls."""
    db, agent = mem.db, mem.agent_id
    row = db.query_one(
        f"SELECT {COLUMNS} FROM episodes WHERE agent_id = ? AND source = ?", (agent, draft.source)
    )
    old = Episode.from_row(row) if row else None
    cfg = mem.cfg.episodes
    text_summary = summarise.summary(draft.texts, cfg.summary_chars)
    topics = summarise.topics(draft.texts)
    if cfg.summary == "llm":
        text_summary, topics = _llm_summary(mem, draft, text_summary, topics, transport)
    now = mem.now()
    episode = Episode(
        id=old.id if old else episode_id(agent, draft.source),
        source=draft.source,
        summary=text_summary,
        abstract=summarise.abstract(text_summary),
        topics=tuple(topics),
        participants=tuple(
            dict.fromkeys([*(old.participants if old else ()), *draft.participants])
        ),
        fact_ids=tuple(dict.fromkeys([*(old.fact_ids if old else ()), *draft.fact_ids])),
        started_at=old.started_at if old else draft.started_at,
        ended_at=draft.ended_at,
        created_at=old.created_at if old else now,
        expires_at=now + cfg.ttl_days * DAY,
        promoted_at=old.promoted_at if old else None,
    )
    if old:
        db.execute("DELETE FROM episodes WHERE agent_id = ? AND id = ?", (agent, old.id))
    insert(db, agent, episode)
    return episode


def insert(db: Database, agent_id: str, e: Episode) -> None:
    db.execute(
        f"INSERT INTO episodes (agent_id, {COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            agent_id,
            e.id,
            e.source,
            e.summary,
            e.abstract,
            "\n".join(e.topics),
            "\n".join(e.participants),
            "\n".join(e.fact_ids),
            e.started_at,
            e.ended_at,
            e.created_at,
            e.expires_at,
            e.promoted_at,
        ),
    )


def _llm_summary(
    mem: Memory,
    draft: Draft,
    fallback: str,
    topics: list[str],
    transport: llmmod.Transport | None,
) -> tuple[str, list[str]]:
    """The model's summary and topics; the extractive ones (and a note saying why) otherwise."""
    from tiermem.core import llm as llmmod  # urllib and http.client: only an LLM summary needs them

    settings = llmmod.settings_from(mem.cfg.llm)
    text = "\n".join(draft.texts)[: settings.max_input_chars]
    if not settings.configured:
        draft.notes.append("episode summary: no LLM endpoint configured, extractive summary used")
        return fallback, topics
    messages = [
        {
            "role": "system",
            "content": "Summarise this conversation in at most "
            f"{mem.cfg.episodes.summary_chars} characters and list its key topics.",
        },
        {"role": "user", "content": text},
    ]
    try:
        reply = json.loads(
            llmmod.chat_json(settings, messages, _SUMMARY_SCHEMA, transport=transport)
        )
        written = " ".join(str(reply["summary"]).split())
        named = [" ".join(str(t).split()) for t in reply["topics"]][:8]
    except (llmmod.LLMError, ValueError, KeyError, TypeError) as exc:
        draft.notes.append(f"episode summary: LLM failed ({exc}), extractive summary used")
        import logging  # only a warning needs it: start-up stays fast

        logging.getLogger(__name__).warning(
            "episode summary fell back to the extractive one: %s", exc
        )
        return fallback, topics
    if not written:
        draft.notes.append("episode summary: the LLM gave none, extractive summary used")
        return fallback, topics
    return summarise.clip(written, mem.cfg.episodes.summary_chars), [t for t in named if t]


# -- reading ----------------------------------------------------------------------------------


def get(db: Database, agent_id: str, ref: str) -> Episode:
    """An episode by id (or a unique id prefix of at least 4 characters)."""
    ref = ref.strip()
    if len(ref) < 4:
        raise InvalidInput(f"episode id {ref!r} is too short (at least 4 characters)")
    rows = db.query(
        f"SELECT {COLUMNS} FROM episodes WHERE agent_id = ? AND substr(id, 1, ?) = ? LIMIT 2",
        (agent_id, len(ref), ref),
    )
    if not rows:
        raise NotFound(f"no episode {ref!r}")
    if len(rows) > 1:
        raise InvalidInput(f"episode id {ref!r} is ambiguous: give more characters")
    return Episode.from_row(rows[0])


def recent(db: Database, agent_id: str, limit: int = 50, offset: int = 0) -> list[Episode]:
    rows = db.query(
        f"SELECT {COLUMNS} FROM episodes WHERE agent_id = ? "
        "ORDER BY created_at DESC, seq DESC LIMIT ? OFFSET ?",
        (agent_id, limit, offset),
    )
    return [Episode.from_row(r) for r in rows]


def count(db: Database, agent_id: str) -> int:
    return int(db.scalar("SELECT count(*) FROM episodes WHERE agent_id = ?", (agent_id,)))


def search(db: Database, agent_id: str, query: str, limit: int = 10) -> list[tuple[Episode, float]]:
    """Episodes matching the query's words (FTS5 BM25, summary first), with a relevance in
    (0, 1]: the best match is 1."""
    if not query.strip():
        raise InvalidInput("query is empty")
    terms = query_terms(query, 32)
    if not terms:
        return []
    rows = db.query(
        f"SELECT bm25(episodes_fts, 1.0, 0.8, 0.3) AS r, e.{COLUMNS.replace(', ', ', e.')} "
        "FROM episodes_fts JOIN episodes e ON e.seq = episodes_fts.rowid "
        "WHERE episodes_fts MATCH ? AND e.agent_id = ? ORDER BY r LIMIT ?",
        (fts_match(terms), agent_id, limit),
    )
    best = -float(rows[0][0]) if rows else 1.0
    return [(Episode.from_row(r[1:]), (-float(r[0]) / best) if best else 1.0) for r in rows]


def unpromoted(db: Database, agent_id: str, limit: int) -> list[Episode]:
    rows = db.query(
        f"SELECT {COLUMNS} FROM episodes WHERE agent_id = ? AND promoted_at IS NULL "
        "ORDER BY created_at, seq LIMIT ?",
        (agent_id, limit),
    )
    return [Episode.from_row(r) for r in rows]


def count_unpromoted(db: Database, agent_id: str) -> int:
    return int(
        db.scalar(
            "SELECT count(*) FROM episodes WHERE agent_id = ? AND promoted_at IS NULL", (agent_id,)
        )
    )


def mark_promoted(db: Database, agent_id: str, ids: Sequence[str], now: float) -> None:
    db.executemany(
        "UPDATE episodes SET promoted_at = ? WHERE agent_id = ? AND id = ?",
        [(now, agent_id, i) for i in ids],
    )


def prune(db: Database, agent_id: str, now: float) -> list[str]:
    """Delete expired episodes (and their mentions); their ids."""
    ids = [
        str(r[0])
        for r in db.query(
            "SELECT id FROM episodes WHERE agent_id = ? AND expires_at <= ?", (agent_id, now)
        )
    ]
    if ids:
        db.executemany(
            "DELETE FROM episodes WHERE agent_id = ? AND id = ?", [(agent_id, i) for i in ids]
        )
        db.executemany(
            "DELETE FROM mentions WHERE agent_id = ? AND kind = 'episode' AND ref = ?",
            [(agent_id, i) for i in ids],
        )
    return ids


def markdown(e: Episode) -> str:
    """The episode as a markdown file with YAML front matter (timestamp, tags, summary,
    participants)."""
    front = {
        "id": e.id,
        "timestamp": iso(e.started_at),
        "ended": iso(e.ended_at),
        "tags": list(e.topics),
        "summary": e.summary,
        "participants": list(e.participants),
        "facts": list(e.fact_ids),
        "source": e.source,
    }
    lines = ["---"]
    for key, value in front.items():
        lines.append(f"{key}: {json.dumps(value, ensure_ascii=False)}")
    lines += ["---", "", f"# {e.abstract}", "", e.summary, ""]
    return "\n".join(lines)
