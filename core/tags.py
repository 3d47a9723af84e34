"""Tags as a search key: `tag:T` in a query, a tag filter, and query words that name a tag.

Tags live in `memory_extras` (one newline-joined list per memory, written by `store --tag` and
`memory_store`), a table only tagged memories have a row in. Retrieval reads that small table
at query time instead of indexing tags in FTS5: the index is an external-content table over
`memories`, so a tags column there means tags in the memories row itself (and in every sync
record) plus a migration that rebuilds the whole index on every home, while the tags of a
personal home are a few thousand short strings a scan of the agent's rows prefilters in SQL
(`python -m benchmarks.tags_bench` measures both).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from tiermem.core.db import Database
from tiermem.core.terms import TERM, stem

_TAG_CUE = re.compile(r'(?<!\S)tag:(?:"([^"]+)"|(\S+))', re.I)


def key(tag: str) -> str:
    """How tags compare: spacing collapsed, case folded."""
    return " ".join(tag.split()).casefold()


def split_query(query: str) -> tuple[str, list[str]]:
    """The query without its `tag:T` (or `tag:"two words"`) cues, and those tags."""
    tags = [m.group(1) or m.group(2) for m in _TAG_CUE.finditer(query)]
    if not tags:
        return query, []  # untouched: a trailing space says the last word is finished
    rest = " ".join(_TAG_CUE.sub(" ", query).split())
    return rest, [t for t in (" ".join(t.split()) for t in tags) if t]


def _rows(
    db: Database, agent_id: str, sql: str, params: Sequence[object]
) -> dict[str, tuple[str, ...]]:
    rows = db.query(
        f"SELECT id, tags FROM memory_extras WHERE agent_id = ? AND tags != ''{sql}",
        (agent_id, *params),
    )
    return {str(i): tuple(t for t in str(tags).split("\n") if t) for i, tags in rows}


def containing(
    db: Database, agent_id: str, pieces: Sequence[str], every: bool
) -> dict[str, tuple[str, ...]]:
    """memory id → tags, for the tagged memories whose tags contain every (or any) of the
    lower-case `pieces` as a substring: the index-free prefilter of the exact checks below."""
    if not pieces:
        return {}
    joiner = " AND " if every else " OR "
    sql = " AND (" + joiner.join(["instr(lower(tags), ?) > 0"] * len(pieces)) + ")"
    return _rows(db, agent_id, sql, list(pieces))


def tags_of(db: Database, agent_id: str, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """memory id → its tags, for these memories."""
    if not ids:
        return {}
    return _rows(db, agent_id, " AND id IN (SELECT value FROM json_each(?))", [json.dumps(ids)])


def ids_with(db: Database, agent_id: str, wanted: Iterable[str]) -> list[str]:
    """Memories carrying every one of the `wanted` tags."""
    need = {key(t) for t in wanted}
    tagged = containing(db, agent_id, sorted(need), every=True)
    return sorted(i for i, tags in tagged.items() if need <= {key(t) for t in tags})


def naming(db: Database, agent_id: str, terms: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The tagged memories whose tags may contain a query term (a stem is a prefix of its
    word, so a tag holding the term's stem is a candidate)."""
    return containing(db, agent_id, sorted({stem(t) for t in terms}), every=False)


@lru_cache(maxsize=8192)
def _stems(tag: str) -> frozenset[str]:
    """A tag's words, stemmed (cached: a home's tags are few and change rarely)."""
    return frozenset(stem(w) for w in TERM.findall(tag.casefold()))


def term_matches(
    tagged: dict[str, tuple[str, ...]], terms: Sequence[str]
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """memory id → (query terms its tags contain, those tags), for memories a term names by
    a tag (a tag's words compared stemmed, as the explanation compares text)."""
    stems = {stem(t): t for t in terms}
    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for memory_id, tags in tagged.items():
        hit_terms: list[str] = []
        hit_tags: list[str] = []
        for tag in tags:
            words = _stems(tag)
            found = [stems[s] for s in stems if s in words]
            if found:
                hit_tags.append(tag)
                hit_terms += [t for t in found if t not in hit_terms]
        if hit_terms:
            out[memory_id] = (tuple(hit_terms), tuple(hit_tags))
    return out
