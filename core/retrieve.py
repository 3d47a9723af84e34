"""Retrieval that can say why it found each memory.

Keyword mode (the default): query → terms (stopwords and time-only words dropped) → (1) tree:
nodes whose path or description share a term become candidate categories, each with its reason;
(2) FTS5 BM25 over text, category and metadata, scoped to the agent inside the index; (3)
relevance = BM25 × a length prior (tokens^-α: a long memory that mentions a word once is less
about it than a short one; α shrinks to 0 when the candidates are alike in length), normalised to the best candidate; raised inside
candidate categories and for memories dated inside a time window the query names ("last week",
"in May"); plus the tier score as a weak tie-break only — decay decides where a memory lives,
not whether a relevant one is found; (4) every hit carries its explanation; (5) an optional
token budget keeps the best set that fits.

Vector and hybrid modes (core/vectors.py, an optional extra) add embedding similarity: `vector`
ranks by it alone, `hybrid` keeps a confident keyword ranking (vector-only results after it) and
fuses both rankings otherwise, and keyword mode can fall back to it when the keyword results are
too few. Each explanation shows the parts it was ranked by.

Query text is never passed to FTS5 as syntax: terms are extracted and quoted, so quotes,
operators, unicode and 10 KB of text are all just words.

This module is the pipeline; the terms come from `core.terms`, the ranking, explanations and
budget fit from `core.ranking`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import tzinfo
from typing import TYPE_CHECKING, Literal, Protocol

from tiermem.core import current, scoped
from tiermem.core import tags as tagmod
from tiermem.core.config import RetrievalConfig, ScoringConfig
from tiermem.core.errors import InvalidInput
from tiermem.core.ranking import (
    ROW_CATEGORY,
    ROW_FIELDS,
    ROW_TOKENS,
    Candidate,
    CategoryMatch,
    Hit,
    RankContext,
    coverage,
    deepest_match,
    explain,
    fit_budget,
    fuse,
    length_factors,
    match_tree,
    row_tier_score,
    with_count,
)
from tiermem.core.ranking import Explanation as Explanation  # part of a result's public shape
from tiermem.core.scoped import Filters
from tiermem.core.temporal import TimeWindow, cue_words, find_windows
from tiermem.core.terms import (
    adjacent_pairs,
    fts_match,
    prefix_variants,
    query_terms,
    unfinished_word,
)
from tiermem.core.tokens import UNCOUNTED
from tiermem.core.tree import TreeIndex
from tiermem.core.warm import TIERS, MemoryStore, Tier

if TYPE_CHECKING:
    from tiermem.core.treesearch import PathChoice

Mode = Literal["keyword", "vector", "hybrid"]
MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")


@dataclass
class RetrievalResult:
    """The hits of a search with what the query was read as and notes on how it ran."""

    query: str
    terms: list[str]
    categories: list[CategoryMatch]
    hits: list[Hit]
    candidates: int
    budget: int | None = None
    tokens: int = 0
    notes: list[str] = field(default_factory=list)
    mode: str = "keyword"
    time_windows: list[str] = field(default_factory=list)
    """The query's time cues and the date windows they name."""


class Signals(Protocol):
    """Extra evidence for ranking (core/graph/signal.py: the knowledge graph and episodes)."""

    def apply(
        self, query: str, found: list[Candidate], where: tuple[str, list[object]]
    ) -> list[Candidate]:
        """`found` with boosts and reasons set, plus candidates reached only through it."""
        ...


class VectorSearch(Protocol):
    """Nearest memories of one agent by embedding (core/vectors.py)."""

    def similar(self, query: str, pool: int) -> list[tuple[int, float]]:
        """(row, cosine similarity) of up to `pool` memories, most similar first."""
        ...


def search(
    store: MemoryStore,
    tree: TreeIndex,
    query: str,
    *,
    now: float,
    retrieval: RetrievalConfig,
    scoring: ScoringConfig,
    limit: int | None = None,
    tiers: Sequence[Tier] = TIERS,
    category: str | None = None,
    budget: int | None = None,
    mode: Mode = "keyword",
    vectors: VectorSearch | None = None,
    llm_paths: Sequence[PathChoice] | None = None,
    tz: tzinfo | None = None,
    prefix: bool = False,
    signals: Signals | None = None,
    tags: Sequence[str] = (),
    tagged: bool = True,
    as_of: float | None = None,
    scopes: Sequence[MemoryStore] | None = None,
) -> RetrievalResult:
    """Rank this agent's memories for `query`. Pure read: reinforcement is the caller's.

    `vectors` is needed for the vector and hybrid modes, and for keyword mode's fallback
    (`vector_fallback`); without it keyword mode simply does not fall back. `llm_paths` (LLM
    tree search) restricts the search to the chosen categories, ranked by the model's score
    and then by keyword relevance. `prefix` (search-as-you-type, keyword mode; off by default
    so the tuned ranking is unchanged): the last word, unless a space follows it, also matches
    as the start of a word ("kube" finds "kubernetes"). `tags` (and `tag:T` in the query):
    only memories carrying every one of them; a query word that names a tag finds its
    memories too. `tagged=False` (no memory of the agent has a tag) skips the tag lookups.
    `signals` (keyword mode) raises and adds memories the knowledge graph or an episode links
    to the query; what is true now (or at `as_of`) ranks first (`core.current`). `scopes`:
    ranked with the agent's own (None: the spaces it includes; `core.scoped`)."""
    query, cued = tagmod.split_query(query)
    wanted_tags = [*tags, *cued]
    _check_arguments(query or ("tag" if wanted_tags else ""), limit, budget, mode, vectors)
    windows = find_windows(query, now, tz) if retrieval.temporal_boost > 0 else []
    terms = query_terms(query, retrieval.max_query_terms, cue_words(windows))
    result = RetrievalResult(
        query=query, terms=terms, categories=[], hits=[], candidates=0, budget=budget, mode=mode
    )
    result.time_windows = [w.describe() for w in windows]
    wanted = limit or (retrieval.candidate_pool if budget else retrieval.default_limit)
    filters = scoped.filters_for(store, tiers, category, scopes, wanted_tags)
    tagged = tagged or bool(filters.others)
    if wanted_tags and not terms and not llm_paths:
        return _tagged_only(result, tree, filters, wanted, wanted_tags, now, scoring)
    if not terms and mode == "keyword" and not llm_paths:
        result.notes.append("the query has no searchable words")
        return result
    result.categories = match_tree(tree, terms)
    if llm_paths:
        result.mode = "llm"
        return _llm_search(
            result, tree, llm_paths, filters, wanted, windows, now, retrieval, scoring
        )
    keyword: list[Candidate] = []
    last = unfinished_word(query, terms) if prefix and mode == "keyword" else None
    prefixes = prefix_variants(last) if last else []
    if terms and mode != "vector":
        keyword = _keyword_pool(store, query, terms, last, prefixes, filters, retrieval, tagged)
    if signals is not None and mode == "keyword":
        keyword = signals.apply(query, keyword, filters.sql(picked_by="id"))
    similar = _similar(result, vectors, filters, retrieval, keyword, wanted)
    result.candidates = len({c.seq for c in (*keyword, *similar)})
    context = RankContext(result.categories, windows, now, retrieval, scoring)
    scoped.mark_sources(filters, (*keyword, *similar), retrieval.own_boost)
    ranked = scoped.arrange(filters, _rank(result, keyword, similar, context), now, as_of)
    if mode == "keyword" and (as_of is not None or not current.PAST.search(query)):
        ranked = _answer_first(filters, query, ranked, now if as_of is None else as_of)
    if tagged:
        _label(filters, ranked, wanted_tags)
    _finish(result, tree, ranked, wanted, prefixes, filters)
    return result


def _similar(
    result: RetrievalResult,
    vectors: VectorSearch | None,
    filters: Filters,
    retrieval: RetrievalConfig,
    keyword: list[Candidate],
    wanted: int,
) -> list[Candidate]:
    """The vector candidates: the vector and hybrid modes' own (they require the index), or
    keyword mode's fallback when its results are too few or too weak."""
    if vectors is None:
        return []
    if result.mode != "keyword":
        return _vector_candidates(vectors, result.query, filters, retrieval)
    why = retrieval.vector_fallback and _fallback_reason(keyword, result.terms, retrieval, wanted)
    if not why:
        return []
    result.notes.append(f"{why}: vector fallback used")
    return _vector_candidates(vectors, result.query, filters, retrieval)


def _answer_first(
    filters: Filters, query: str, ranked: list[Candidate], when: float
) -> list[Candidate]:
    """The newest statement of what a question asks first, from the agent's own memory."""
    store, where = filters.store, replace(filters, others=()).sql(picked_by="id")
    ranked = current.answer_first(store.db, store.slot, query, ranked, when, where)
    return scoped.answers_from_spaces(filters, query, ranked, when)


def _label(filters: Filters, ranked: list[Candidate], wanted: list[str]) -> None:
    """Each candidate's tags, and those a `tag:` filter named, for its explanation."""
    keys = {tagmod.key(t) for t in wanted}
    ids = [str(c.row[0]) for c in ranked]
    tagged: dict[str, tuple[str, ...]] = {}
    for agent in filters.agents:
        tagged |= tagmod.tags_of(filters.store.db, agent, ids)
    for c in ranked:
        c.tags = tagged.get(str(c.row[0]), ())
        named = [t for t in c.tags if tagmod.key(t) in keys]
        c.matched_tags = tuple(dict.fromkeys((*c.matched_tags, *named)))


def _tagged_only(
    result: RetrievalResult,
    tree: TreeIndex,
    filters: Filters,
    wanted: int,
    wanted_tags: list[str],
    now: float,
    scoring: ScoringConfig,
) -> RetrievalResult:
    """A query of tags alone: the memories carrying them, most important and newest first;
    each with its tier score, since no word ranks them."""
    found = _category_fill(filters, set(), wanted if result.budget is None else 10_000)
    for c in found:
        c.relevance, c.score, c.found_by = 1.0, 1.0, "tag"
        c.tier_score = row_tier_score(c.row, now, scoring.tau_days, scoring.reinforcement)
    result.candidates = len(found)
    if filters.others:
        scoped.mark_sources(filters, found, 1.0)
    _label(filters, found, wanted_tags)
    _finish(result, tree, found, wanted, (), filters)
    return result


def _tag_candidates(
    filters: Filters,
    terms: Sequence[str],
    keyword: list[Candidate],
    pool: int,
) -> list[Candidate]:
    """Memories a query word names by one of their tags. A keyword candidate gains the tag
    match (its relevance at least the share of terms its tags name); of the others, the `pool`
    whose tags name the most terms are added with that share as their relevance."""
    named: dict[str, tuple[str, ...]] = {}
    for agent in filters.agents:
        named |= tagmod.naming(filters.store.db, agent, terms)
    matches = tagmod.term_matches(named, terms)
    if not matches or not terms:
        return []
    by_id = {str(c.row[0]): c for c in keyword}
    for memory_id, (hit_terms, hit_tags) in matches.items():
        c = by_id.get(memory_id)
        if c is not None:
            c.relevance = max(c.relevance, len(hit_terms) / len(terms))
            c.tag_terms, c.matched_tags = hit_terms, hit_tags
    missing = sorted((i for i in matches if i not in by_id), key=lambda i: -len(matches[i][0]))
    if not missing:
        return []
    narrowed = replace(
        filters,
        ids=tuple(i for i in missing if filters.ids is None or i in filters.ids)[: pool * 4],
    )
    out = _category_fill(narrowed, set(), pool)
    for c in out:
        hit_terms, hit_tags = matches[str(c.row[0])]
        c.relevance, c.found_by = len(hit_terms) / len(terms), "tag"
        c.tag_terms, c.matched_tags = hit_terms, hit_tags
    return out


def _check_arguments(
    query: str, limit: int | None, budget: int | None, mode: Mode, vectors: VectorSearch | None
) -> None:
    if not query.strip():
        raise InvalidInput("query is empty")
    if limit is not None and limit < 1:
        raise InvalidInput(f"limit must be at least 1 (got {limit})")
    if budget is not None and budget < 1:
        raise InvalidInput(f"budget must be at least 1 token (got {budget})")
    if mode not in MODES:
        raise InvalidInput(f"unknown retrieval mode {mode!r}: use {', '.join(MODES)}")
    if mode != "keyword" and vectors is None:
        raise InvalidInput(f"{mode} mode needs the vector index (tiermem.core.vectors)")


def _rank(
    result: RetrievalResult,
    keyword: list[Candidate],
    similar: list[Candidate],
    context: RankContext,
) -> list[Candidate]:
    """The candidates in the order of the result's mode (keyword: fallback results after)."""
    if result.mode == "vector":
        return context.rank(similar)
    if result.mode == "hybrid":
        return _hybrid(result, keyword, similar, context)
    ranked = context.rank(keyword)
    if similar:
        known = {c.seq for c in keyword}
        extra = [c for c in similar if c.seq not in known]
        for c in extra:
            c.found_by = "vector fallback"
        ranked += context.rank(extra)  # primary first: keyword results keep their places
    return ranked


def _hybrid(
    result: RetrievalResult,
    keyword: list[Candidate],
    similar: list[Candidate],
    context: RankContext,
) -> list[Candidate]:
    """Keyword first: when the best keyword result contains more than `hybrid_keyword_coverage`
    of the query's terms, keyword search is confident and its ranking stands (vector-only
    results follow it, as in the fallback); otherwise the query says what it wants in other
    words than the memories, and both rankings are fused. On LongMemEval this keeps what keyword
    search gets right on fact-gathering questions ("how many … in total": similarity pulls in
    turns about the topic rather than the counted facts) and what similarity adds to
    paraphrased ones ("any tips for my phone's battery?")."""
    cfg = context.retrieval
    share = coverage(keyword[0], result.terms) if keyword else 0.0
    if share <= cfg.hybrid_keyword_coverage:
        result.notes.append(
            f"the best keyword result has {share:.0%} of the query's terms "
            f"(at most {cfg.hybrid_keyword_coverage:.0%}): keyword and vector rankings fused"
        )
        return context.rank(fuse(keyword, similar, cfg.hybrid_vector_weight))
    result.notes.append(
        f"the best keyword result has {share:.0%} of the query's terms "
        f"(more than {cfg.hybrid_keyword_coverage:.0%}): keyword ranking kept, vector results "
        "after it"
    )
    by_seq = {c.seq: c for c in keyword}
    extra = []
    for c in similar:
        k = by_seq.get(c.seq)
        if k is None:
            extra.append(c)
        else:
            k.found_by, k.vector_rank, k.similarity = "both", c.vector_rank, c.similarity
    return context.rank(keyword) + context.rank(extra)


def _fallback_reason(
    keyword: list[Candidate], terms: Sequence[str], retrieval: RetrievalConfig, wanted: int
) -> str | None:
    """Why keyword results are too few or too weak, so that vector search fills in, if they are."""
    needed = min(retrieval.fallback_min_results, wanted)
    if len(keyword) < needed:
        return f"keyword search found {len(keyword)} < {needed}"
    if retrieval.fallback_min_coverage > 0 and terms:
        share = coverage(keyword[0], terms)
        if share < retrieval.fallback_min_coverage:
            return (
                f"the best keyword result has {share:.0%} of the query's terms "
                f"< {retrieval.fallback_min_coverage:.0%}"
            )
    return None


def _finish(
    result: RetrievalResult,
    tree: TreeIndex,
    ranked: list[Candidate],
    wanted: int,
    prefixes: Sequence[str] = (),
    filters: Filters | None = None,
) -> None:
    chosen = fit_budget(ranked, wanted, result.budget)
    if chosen and ranked and chosen[0] is not ranked[0] and chosen[0].seq == ranked[0].seq:
        result.notes.append(f"the best result was shortened to fit {result.budget} tokens")
    if filters is not None and filters.others:
        scoped.writers(filters, chosen)
    result.hits = explain(tree, chosen, result.terms, result.categories, prefixes)
    result.tokens = sum(h.memory.tokens for h in result.hits)


def _llm_search(
    result: RetrievalResult,
    tree: TreeIndex,
    choices: Sequence[PathChoice],
    filters: Filters,
    wanted: int,
    windows: list[TimeWindow],
    now: float,
    retrieval: RetrievalConfig,
    scoring: ScoringConfig,
) -> RetrievalResult:
    """Memories of the categories the model chose: keyword matches inside them first, then
    (if too few) their most important and newest memories. relevance = the model's score for
    the category × (1 + keyword relevance) / 2."""
    within = replace(filters, within=tuple(c.path for c in choices))
    found = (
        _keyword_candidates(filters.store, result.terms, within, retrieval) if result.terms else []
    )
    if len(found) < wanted:
        found += _category_fill(within, {c.seq for c in found}, wanted - len(found))
    for c in found:
        choice = max(
            (ch for ch in choices if deepest_match(c.row[ROW_CATEGORY], {ch.path})),
            key=lambda ch: len(ch.path),
        )
        c.relevance = choice.score * (1.0 + c.relevance) / 2.0
        c.found_by, c.llm_reason = "llm", choice.describe()
    result.candidates = len(found)
    context = RankContext(result.categories, windows, now, retrieval, scoring)
    if filters.others:
        scoped.mark_sources(filters, found, retrieval.own_boost)
    _finish(result, tree, context.rank(found), wanted, (), filters)
    return result


def _category_fill(filters: Filters, exclude: set[int], n: int) -> list[Candidate]:
    where, params = filters.sql()
    rows = filters.store.db.query(
        f"SELECT m.seq, {ROW_FIELDS} FROM memories m WHERE 1{where} "
        "ORDER BY m.importance DESC, m.created_at DESC, m.seq LIMIT ?",
        [*params, n + len(exclude)],
    )
    out = [
        Candidate(seq=int(r[0]), row=with_count(r[1:])) for r in rows if int(r[0]) not in exclude
    ]
    return out[:n]


_IN_RANGE = "memories_fts.rowid BETWEEN ? << 32 AND (? << 32) + 4294967295"

_BM25 = "bm25(memories_fts, 1.0, 0.5, 0.25, 0.25, 0.25)"

_POOL = (
    f"SELECT f.rowid, f.r, {ROW_FIELDS} FROM (SELECT rowid, {_BM25} AS r FROM memories_fts "
    f"WHERE memories_fts MATCH ? AND {_IN_RANGE} ORDER BY r LIMIT ?) AS f "
    "JOIN memories m ON m.seq = f.rowid ORDER BY f.r"
)
"""The best BM25 matches of the agent's range, then their rows (no tier or category filter)."""


def _keyword_pool(
    store: MemoryStore,
    query: str,
    terms: Sequence[str],
    last: str | None,
    prefixes: Sequence[str],
    filters: Filters,
    retrieval: RetrievalConfig,
    tagged: bool,
) -> list[Candidate]:
    """BM25 matches of the query words (an unfinished last word as its prefixes; side-by-side
    words also as phrases when configured), plus the memories a query word names by tag."""
    exact = [t for t in terms if t != last] if prefixes else terms
    pairs = adjacent_pairs(query, exact) if retrieval.adjacent_pairs else []
    keyword = _keyword_candidates(store, exact, filters, retrieval, prefixes, pairs)
    if tagged:
        keyword += _tag_candidates(filters, exact, keyword, retrieval.candidate_pool)
    return keyword


def _keyword_candidates(
    store: MemoryStore,
    terms: Sequence[str],
    filters: Filters,
    retrieval: RetrievalConfig,
    prefixes: Sequence[str] = (),
    pairs: Sequence[tuple[str, str]] = (),
) -> list[Candidate]:
    """The best `candidate_pool` BM25 matches (of the terms, prefixes and phrase pairs),
    relevance-weighted by length. The agent's rowid
    range scopes the FTS5 walk; a tier or category filter needs the join inside the search,
    otherwise only the pool's rows are looked up."""
    match = fts_match(terms, prefixes, pairs)
    extra: list[object] = []
    if not filters.any:
        sql = _POOL
    else:
        where, extra = filters.sql()
        sql = (
            f"SELECT m.seq, {_BM25} AS r, {ROW_FIELDS} FROM memories_fts "
            "JOIN memories m ON m.seq = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {_IN_RANGE}{where} ORDER BY r LIMIT ?"
        )
    pool = retrieval.candidate_pool
    rows = []
    for slot in filters.slots:  # one scope's range per walk; BM25 is the whole index's
        rows += store.db.query(sql, [match, slot, slot, *extra, pool])
    if not rows:
        return []
    if filters.others:
        rows = sorted(rows, key=lambda r: float(r[1]))[:pool]
    found = [r[2:] for r in rows]
    for i, row in enumerate(found):
        if row[ROW_TOKENS] == UNCOUNTED:
            found[i] = with_count(row)
    factors = length_factors([int(row[ROW_TOKENS]) for row in found], retrieval)
    weighted = [-float(r[1]) * f for r, f in zip(rows, factors, strict=True)]
    best = max(weighted) or 1.0
    out = [
        Candidate(int(r[0]), row, float(r[1]), w / best, f)
        for r, row, w, f in zip(rows, found, weighted, factors, strict=True)
    ]
    out.sort(key=lambda c: (-c.relevance, c.seq))
    for i, c in enumerate(out, 1):
        c.keyword_rank = i
    return out


def _vector_candidates(
    vectors: VectorSearch, query: str, filters: Filters, retrieval: RetrievalConfig
) -> list[Candidate]:
    """The memories most similar to the query, with the metadata ranking needs."""
    similar = vectors.similar(query, retrieval.candidate_pool)
    if not similar:
        return []
    marks = ",".join(["CAST(? AS INTEGER)"] * len(similar))
    where, params = filters.sql(picked_by="seq")
    rows = filters.store.db.query(
        f"SELECT m.seq, {ROW_FIELDS} FROM memories m WHERE m.seq IN ({marks}){where}",
        [*(str(seq) for seq, _ in similar), *params],
    )
    meta = {int(r[0]): r[1:] for r in rows}
    out: list[Candidate] = []
    for seq, sim in similar:
        r = meta.get(seq)
        if r is None:
            continue
        out.append(
            Candidate(
                seq=seq,
                row=with_count(r),
                relevance=max(sim, 0.0),
                found_by="vector",
                vector_rank=len(out) + 1,
                similarity=sim,
            )
        )
    return out
