"""Tags as a search key: `tag:T` in a query, a tag filter, and query words that name a tag.

Tags live in `memory_extras` (one newline-joined list per memory, written by `store --tag` and
`memory_store`), a table only tagged memories have a row in. Retrieval reads that small table
at query time instead of indexing tags in FTS5: adding a column to the FTS5 table means
rebuilding the whole index (every memory's text tokenized again, in one transaction, on every
home, and again whenever a tag changes through a trigger on a second table), while the tags of a
personal memory home are a few thousand short strings that one indexed scan reads in
milliseconds (`benchmarks` / the report has the numbers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from tiermem.core.db import Database
from tiermem.core.terms import TERM, stem

_TAG_CUE = re.compile(r'(?<!\S)tag:(?:"([^"]+)"|(\S+))', re.I)


def key(tag: str) -> str:
    """How tags compare: spacing collapsed, case folded."""
    return " ".join(tag.split()).casefold()


def split_query(query: str) -> tuple[str, list[str]]:
    """The query without its `tag:T` (or `tag:"two words"`) cues, and those tags."""
    tags = [m.group(1) or m.group(2) for m in _TAG_CUE.finditer(query)]
    rest = " ".join(_TAG_CUE.sub(" ", query).split())
    return rest, [t for t in (" ".join(t.split()) for t in tags) if t]


def all_tags(db: Database, agent_id: str) -> dict[str, tuple[str, ...]]:
    """memory id → its tags, for every tagged memory of the agent."""
    rows = db.query(
        "SELECT id, tags FROM memory_extras WHERE agent_id = ? AND tags != ''", (agent_id,)
    )
    return {str(i): tuple(t for t in str(tags).split("\n") if t) for i, tags in rows}


def tags_of(db: Database, agent_id: str, ids: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """memory id → its tags, for these memories."""
    if not ids:
        return {}
    rows = db.query(
        "SELECT id, tags FROM memory_extras WHERE agent_id = ? AND tags != '' "
        "AND id IN (SELECT value FROM json_each(?))",
        (agent_id, json.dumps(list(ids))),
    )
    return {str(i): tuple(t for t in str(tags).split("\n") if t) for i, tags in rows}


def ids_with(tagged: dict[str, tuple[str, ...]], wanted: Iterable[str]) -> list[str]:
    """Memories carrying every one of the `wanted` tags."""
    need = {key(t) for t in wanted}
    return sorted(i for i, tags in tagged.items() if need <= {key(t) for t in tags})


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
            words = {stem(w) for w in TERM.findall(tag.casefold())}
            found = [stems[s] for s in stems if s in words]
            if found:
                hit_tags.append(tag)
                hit_terms += [t for t in found if t not in hit_terms]
        if hit_terms:
            out[memory_id] = (tuple(hit_terms), tuple(hit_tags))
    return out
