"""The knowledge graph: entities and relations with temporal validity, extracted from facts and
episodes (offline patterns; the `[llm]` endpoint for episodes when `[graph] extractor = "llm"`,
falling back to the patterns), and the mentions that tie them to memories and episodes."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.core.db import Database
from tiermem.core.errors import NotFound
from tiermem.core.graph.extract import (
    CORRECTION,
    KINDS,
    NEGATED,
    OWNER,
    PAST,
    TENTATIVE,
    Extraction,
    Relation,
    extract,
)
from tiermem.core.graph.names import keys as name_keys
from tiermem.core.graph.names import name_key
from tiermem.core.graph.store import Edge, Entity, GraphStore
from tiermem.core.graph.validity import Closed, relate, settle

if TYPE_CHECKING:
    from tiermem.core import llm as llmmod
    from tiermem.core.engine import Memory

__all__ = [
    "Closure",
    "Edge",
    "Entity",
    "GraphStore",
    "IndexReport",
    "index_episode",
    "index_memories",
    "index_one",
    "settle_pulled",
]
MAX_NGRAM = 4
_TOKEN = re.compile(r"https?://\S+|[\w.&'+-]+")
_EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "kind": {"type": "string", "enum": list(KINDS)},
                },
                "required": ["name", "kind"],
                "additionalProperties": False,
            },
        },
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "subject": {"type": "string"},
                    "predicate": {"type": "string"},
                    "object": {"type": "string"},
                    "valid_from": {"type": "string"},
                },
                "required": ["subject", "predicate", "object", "valid_from"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["entities", "relations"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Closure:
    """A memory's statement that a newer memory ended: `old_source` stated `subject predicate
    old_object`; `new_source` stated what replaced it at `at` (`new_object`), or None when it
    only said it was over ("I left Acme"). Sources are memory ids; subject and objects are
    entity names."""

    old_source: str
    new_source: str | None
    at: float
    subject: str
    predicate: str
    old_object: str
    new_object: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class IndexReport:
    """What indexing texts into the graph found and added, and which memories' statements
    newer memories ended (`closures`)."""

    texts: int = 0
    entities: set[str] = field(default_factory=set)
    relations: int = 0
    notes: list[str] = field(default_factory=list)
    closures: list[Closure] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "texts": self.texts,
            "entities": len(self.entities),
            "relations": self.relations,
            "notes": self.notes,
            "closures": [c.as_dict() for c in self.closures],
        }


def store_for(mem: Memory) -> GraphStore:
    return GraphStore(mem.db, mem.agent_id, mem.cfg.graph.near_duplicate)


_ORDER = {CORRECTION: 1, TENTATIVE: 2, PAST: 3, NEGATED: 3}


def _order(r: Relation) -> int:
    """Facts first, then corrections, plans, and what ended: "I left Acme and joined Globex"
    is Acme ended by Globex, not Acme ended with no successor."""
    return max((_ORDER[f] for f in r.flags if f in _ORDER), default=0)


def apply(
    graph: GraphStore, found: Extraction, kind: str, ref: str, now: float, report: IndexReport
) -> None:
    """Store one extraction read from `ref` (a memory or an episode) written at `now`: its
    entities (deduplicated), relations and mentions of `ref`."""
    ids = {
        name: graph.resolve(name, k, now) for name, k in found.entities.items() if name_key(name)
    }
    _aliases(graph, found, ids)
    source = f"{kind}:{ref}"
    for r in sorted(found.relations, key=_order):
        subject = ids.get(r.subject, "")
        obj = ids.get(r.object, "")
        if (r.subject and not subject) or (r.object and not obj) or (subject and subject == obj):
            continue
        if not r.object and NEGATED not in r.flags:
            continue
        outcome = relate(graph, r, subject, obj, source, now, ids.get(r.replaces))
        report.relations += outcome.added
        report.closures += _closures(graph, outcome.closed)
    mentioned = set(ids.values()) | known_mentions(graph.db, graph.agent, found.text_keys)
    graph.mention(mentioned, kind, ref)
    report.entities |= mentioned
    report.texts += 1


def _aliases(graph: GraphStore, found: Extraction, ids: dict[str, str]) -> None:
    """A tool's other names and the user's own name become aliases."""
    for canonical, surfaces in found.aliases.items():
        if canonical in ids:
            for surface in sorted(surfaces):
                graph.add_name(ids[canonical], surface)
    if found.owner_names:
        owner = ids.get(OWNER) or graph.resolve(OWNER, "person", 0.0)
        for name in found.owner_names:
            graph.add_name(owner, name)
            if " " in name:
                graph.add_name(owner, name.split()[0])


def _closures(graph: GraphStore, closed: list[Closed]) -> list[Closure]:
    """The closures between memories: a statement of one memory ended by another's."""
    out = []
    for c in closed:
        old, new = c.old.memory, c.new.memory if c.new else None
        by = c.by[7:] if c.by.startswith("memory:") else None
        if old is None or by is None or by == old:
            continue
        wanted = {c.old.subject, c.old.object} | ({c.new.object} if c.new else set())
        names = graph.names({w for w in wanted if w})
        out.append(
            Closure(
                old,
                new,
                c.at,
                names.get(c.old.subject, c.old.subject),
                c.old.predicate,
                names.get(c.old.object, c.old.object),
                names.get(c.new.object, c.new.object) if c.new else None,
            )
        )
    return out


def index_text(
    graph: GraphStore, text: str, kind: str, ref: str, now: float, report: IndexReport
) -> None:
    """Index one text written at `now` (its dates read against it)."""
    found = extract(text, "user", now)
    found.text_keys = ngram_keys(text, capitalised=True)
    apply(graph, found, kind, ref, now, report)


BATCH = 1000
"""Memories read per conversation end or consolidation: a home upgraded with 100,000
memories catches up over several runs (or at once with `tiermem graph build`)."""


def index_memories(mem: Memory, limit: int | None = BATCH) -> IndexReport:
    """Extract from the memories stored since the last call (the agent's progress mark), at
    most `limit` of them (None: all), each dated by when it was written."""
    report = IndexReport()
    graph = store_for(mem)
    with mem.db.transaction():
        last = mem.db.scalar(
            "SELECT memory_seq FROM graph_progress WHERE agent_id = ?", (mem.agent_id,)
        )
        rows_after, params = mem.memories.after(int(last or 0))
        rows = mem.db.query(
            f"SELECT seq, id, text, created_at FROM memories WHERE {rows_after} "
            "AND category != 'conversations' AND substr(category, 1, 6) != 'dreams' "
            "ORDER BY seq LIMIT ?",
            (*params, -1 if limit is None else limit),
        )
        for _, memory_id, text, created_at in rows:
            index_text(graph, str(text), "memory", str(memory_id), float(created_at), report)
        if rows:
            _mark(mem, int(rows[-1][0]))
    return report


def index_one(mem: Memory, memory_id: str) -> IndexReport:
    """Index one memory just stored (or changed), dated by its `created_at`, without reading
    the others: the store path's call. Indexing it again changes nothing; the progress mark
    moves past it when it is the next one due, so `index_memories` does not read it twice."""
    report = IndexReport()
    graph = store_for(mem)
    with mem.db.transaction():
        row = mem.db.query_one(
            "SELECT seq, text, created_at, category FROM memories WHERE agent_id = ? AND id = ?",
            (mem.agent_id, memory_id),
        )
        if row is None:
            raise NotFound(f"no memory {memory_id!r}")
        seq, text, created_at, category = row
        if str(category) == "conversations" or str(category).startswith("dreams"):
            return report
        index_text(graph, str(text), "memory", memory_id, float(created_at), report)
        last = mem.db.scalar(
            "SELECT memory_seq FROM graph_progress WHERE agent_id = ?", (mem.agent_id,)
        )
        rows_after, params = mem.memories.after(int(last or 0))
        pending = mem.db.scalar(
            f"SELECT count(*) FROM memories WHERE {rows_after} AND seq < CAST(? AS INTEGER)",
            (*params, str(seq)),
        )
        if int(last or 0) < int(seq) and not pending:
            _mark(mem, int(seq))
    return report


def _mark(mem: Memory, seq: int) -> None:
    mem.db.execute(
        "INSERT INTO graph_progress (agent_id, memory_seq) VALUES (?, ?) "
        "ON CONFLICT (agent_id) DO UPDATE SET memory_seq = excluded.memory_seq",
        (mem.agent_id, seq),
    )


def settle_pulled(db: Database, agent_id: str, relation_ids: Iterable[str]) -> int:
    """Put relations a pull wrote as they came (sync) in their place in their slots, so the
    newest value of each is the one left open; the number of relations it closed. Call it in
    the pull's transaction with the ids of the relations it inserted."""
    return len({c.old.id for c in settle(GraphStore(db, agent_id), relation_ids)})


def index_episode(
    mem: Memory, episode_id: str, text: str, transport: llmmod.Transport | None = None
) -> IndexReport:
    """Extract from an episode's text, dated by when its conversation began: with the model
    when configured, else (or when it fails, noted) by the patterns."""
    report = IndexReport()
    graph = store_for(mem)
    started = mem.db.scalar(
        "SELECT started_at FROM episodes WHERE agent_id = ? AND id = ?", (mem.agent_id, episode_id)
    )
    when = float(started) if started is not None else mem.now()
    found = None
    if mem.cfg.graph.extractor == "llm":
        found = _llm_extract(mem, text, report, transport)
    if found is None:
        found = extract(text, "user", when)
    found.text_keys = ngram_keys(text, capitalised=True)
    apply(graph, found, "episode", episode_id, when, report)
    return report


def _llm_extract(
    mem: Memory, text: str, report: IndexReport, transport: llmmod.Transport | None
) -> Extraction | None:
    # urllib and http.client: only an LLM extraction needs them
    from tiermem.core import llm as llmmod

    settings = llmmod.settings_from(mem.cfg.llm)
    if not settings.configured:
        report.notes.append("graph: no LLM endpoint configured, pattern extraction used")
        return None
    prompt = (
        "Extract the people, projects, organisations, places, tools and URLs this text names, "
        "and the relations between them (snake_case predicates such as works_on, lives_in, "
        "works_at, uses; valid_from as YYYY-MM-DD or empty). Call the user 'User'."
    )
    messages = [{"role": "system", "content": prompt}, {"role": "user", "content": text}]
    try:
        reply = json.loads(
            llmmod.chat_json(settings, messages, _EXTRACT_SCHEMA, transport=transport)
        )
        return _from_reply(reply)
    except (llmmod.LLMError, ValueError, KeyError, TypeError) as exc:
        report.notes.append(f"graph: LLM extraction failed ({exc}), pattern extraction used")
        import logging  # only a warning needs it: start-up stays fast

        logging.getLogger(__name__).warning("graph extraction fell back to the patterns: %s", exc)
        return None


def _from_reply(reply: dict[str, Any]) -> Extraction:
    out = Extraction()
    for e in reply["entities"]:
        kind = str(e["kind"])
        out.add(" ".join(str(e["name"]).split()), kind if kind in KINDS else "other")
    for r in reply["relations"]:
        subject, obj = " ".join(str(r["subject"]).split()), " ".join(str(r["object"]).split())
        out.add(subject, "other")
        out.add(obj, "other")
        predicate = re.sub(r"\W+", "_", str(r["predicate"]).casefold()).strip("_") or "related_to"
        start = _iso_day(str(r.get("valid_from", "")))
        out.relations.append(Relation(subject, predicate, obj, start))
    return out


def _iso_day(text: str) -> float | None:
    m = re.fullmatch(r"((?:19|20)\d\d)-(\d\d)(?:-(\d\d))?", text.strip())
    if not m:
        return None
    try:
        day = dt.date(int(m[1]), int(m[2]), int(m[3] or 1))
    except ValueError:
        return None
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()


def ngram_keys(text: str, *, capitalised: bool) -> set[str]:
    """The name keys of `text`'s 1–4-word runs (only runs starting with a capital letter when
    `capitalised`, so "target" the word does not mention Target the shop); with accents, also
    the keys homes written before accents folded have."""
    tokens = _TOKEN.findall(text)
    found: set[str] = set()
    accented = not text.isascii()
    for i, first in enumerate(tokens):
        if capitalised and not (first[:1].isupper() or first.startswith("http")):
            continue
        for n in range(1, MAX_NGRAM + 1):
            if i + n > len(tokens):
                break
            phrase = " ".join(tokens[i : i + n])
            for key in name_keys(phrase) if accented else (name_key(phrase),):
                if len(key) > 2:
                    found.add(key)
    return found


def known_mentions(db: Database, agent_id: str, keys: set[str]) -> set[str]:
    """Entities already in the graph whose names are among `keys`."""
    return set().union(*known_mentions_by_key(db, agent_id, keys).values())


def known_mentions_by_key(db: Database, agent_id: str, keys: set[str]) -> dict[str, frozenset[str]]:
    """`known_mentions` per key (keys naming no entity are left out)."""
    found: dict[str, set[str]] = {}
    ordered = sorted(keys)
    for start in range(0, len(ordered), 400):
        chunk = ordered[start : start + 400]
        rows = db.query(
            "SELECT key, entity_id FROM entity_names WHERE agent_id = ? "
            f"AND key IN ({','.join('?' * len(chunk))})",
            [agent_id, *chunk],
        )
        for key, entity_id in rows:
            found.setdefault(str(key), set()).add(str(entity_id))
    return {k: frozenset(v) for k, v in found.items()}
