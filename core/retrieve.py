"""Retrieval that can say why it found each memory.

Keyword mode (the default): query → terms (stopwords and time-only words dropped) → (1) tree:
nodes whose path or description share a term become candidate categories, each with its reason;
(2) FTS5 BM25 over text, category and metadata, scoped to the agent inside the index; (3)
relevance = BM25 × a length prior (tokens^-length_penalty: a long memory that mentions a word
once is less about it than a short one), normalised to the best candidate; raised inside
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
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from functools import lru_cache
from typing import TYPE_CHECKING, Literal, Protocol

from tiermem.core.config import RetrievalConfig, ScoringConfig
from tiermem.core.db import Row
from tiermem.core.errors import InvalidInput
from tiermem.core.scoring import DAY
from tiermem.core.temporal import TimeWindow, cue_words, find_windows
from tiermem.core.tree import TreeIndex, normalize_path
from tiermem.core.warm import COLUMNS, TIERS, MemoryRecord, MemoryStore, Tier

if TYPE_CHECKING:
    from tiermem.core.treesearch import PathChoice

Mode = Literal["keyword", "vector", "hybrid"]
MODES: tuple[Mode, ...] = ("keyword", "vector", "hybrid")

_TERM = re.compile(r"[^\W_]+")
MAX_TERM_CHARS = 64


def _words(text: str) -> list[str]:
    return text.split()


STOPWORDS = frozenset(
    _words(
        """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    """
    )
    # What the tokenizer leaves of contractions and possessives ("don't", "friend's", "I've").
    + _words(
        "s t d ll m re ve o y ain aren couldn didn doesn don hadn hasn haven isn mightn mustn "
        "needn shan shouldn wasn weren wouldn"
    )
)


def query_terms(
    query: str, max_terms: int, drop: frozenset[str] | set[str] = frozenset()
) -> list[str]:
    """Distinct lower-case terms; stopwords (and `drop`) left out unless nothing else is left."""
    words = [w.casefold()[:MAX_TERM_CHARS] for w in _TERM.findall(query)]
    content = [w for w in words if w not in STOPWORDS and w not in drop]
    return list(dict.fromkeys(content or words))[:max_terms]


def stem(word: str) -> str:
    """A light suffix stripper used to explain matches (FTS5 itself uses Porter)."""
    for suffix in ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def fts_match(terms: Sequence[str], prefixes: Sequence[str] = ()) -> str:
    """An FTS5 query matching any of the quoted terms, or any word starting with one of the
    quoted `prefixes` (never FTS5 syntax from the user)."""
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
    quoted += ['"' + p.replace('"', '""') + '"*' for p in prefixes]
    return " OR ".join(quoted)


MIN_PREFIX = 2


def prefix_variants(word: str) -> list[str]:
    """Search-as-you-type: the unfinished last word as FTS5 prefixes. The index holds Porter
    stems, so a prefix that runs past a word's stem ("deployi" of "deploying", indexed as
    "deploy") finds nothing by itself: up to two shorter prefixes (never under four letters)
    join it, and a memory matching more of them ranks higher."""
    if len(word) < MIN_PREFIX:
        return []
    shortest = min(len(word), max(4, len(word) - 2))
    return [word[:n] for n in range(len(word), shortest - 1, -1)]


def unfinished_word(query: str, terms: Sequence[str]) -> str | None:
    """The query's last term if the query ends inside it (no space typed after it yet)."""
    words = _TERM.findall(query)
    if not terms or not words or not query[-1:].strip() or not query.rstrip().endswith(words[-1]):
        return None
    last = words[-1].casefold()[:MAX_TERM_CHARS]
    return last if terms[-1] == last else None


@dataclass(frozen=True)
class CategoryMatch:
    path: str
    reason: str


@dataclass(frozen=True)
class Explanation:
    path: str
    """Tree node the memory lives under ('' is the root)."""
    tree_match: str | None
    """Why the tree pointed at this category, if it did."""
    matched_terms: tuple[str, ...]
    bm25: float
    """FTS5 BM25 (lower is better; 0 when the keyword search did not find it)."""
    relevance: float
    """What the ranking starts from, normalised to the best candidate (0..1]: length-weighted
    BM25 in keyword mode, similarity in vector mode, the fused value in hybrid mode."""
    category_boost: float
    tier_score: float
    score: float
    """relevance × (1 + category_boost) × (1 + time_boost) + tier_tiebreak × tier_score."""
    tier: str
    length_factor: float = 1.0
    """tokens^-length_penalty, relative to the shortest candidate (1 for it)."""
    time_match: str | None = None
    """The query's time cue whose window contains this memory's date, with the window."""
    time_boost: float = 0.0
    found_by: str = "keyword"
    """keyword, vector, both (hybrid), vector fallback, or llm (tree search)."""
    keyword_rank: int | None = None
    vector_rank: int | None = None
    similarity: float | None = None
    """Cosine similarity of the query's and the memory's embeddings (vector and hybrid)."""
    llm_reason: str | None = None
    """Why the model chose this memory's category (LLM tree search)."""


@dataclass(frozen=True)
class Hit:
    memory: MemoryRecord
    explanation: Explanation


@dataclass
class RetrievalResult:
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


class VectorSearch(Protocol):
    """Nearest memories of one agent by embedding (core/vectors.py)."""

    def similar(self, query: str, pool: int) -> list[tuple[int, float]]:
        """(row, cosine similarity) of up to `pool` memories, most similar first."""
        ...


def match_tree(tree: TreeIndex, terms: Sequence[str]) -> list[CategoryMatch]:
    """Tree nodes whose path segments or description share a (stemmed) term with the query."""
    stems = {stem(t): t for t in terms}
    matches = []
    for path in sorted(tree.nodes):
        segment_words, desc_words = _node_words(path, tree.nodes[path].description)
        in_path = [stems[s] for s in stems if s in segment_words]
        in_desc = [stems[s] for s in stems if s in desc_words and stems[s] not in in_path]
        reasons = []
        if in_path:
            reasons.append("path matches " + ", ".join(repr(t) for t in in_path))
        if in_desc:
            reasons.append("description mentions " + ", ".join(repr(t) for t in in_desc))
        if reasons:
            matches.append(CategoryMatch(path, "; ".join(reasons)))
    return matches


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
) -> RetrievalResult:
    """Rank this agent's memories for `query`. Pure read: reinforcement is the caller's.

    `vectors` is needed for the vector and hybrid modes, and for keyword mode's fallback
    (`vector_fallback`); without it keyword mode simply does not fall back. `llm_paths` (LLM
    tree search) restricts the search to the chosen categories, ranked by the model's score
    and then by keyword relevance. `prefix` (search-as-you-type, keyword mode; off by default
    so the tuned ranking is unchanged): the last word, unless a space follows it, also matches
    as the start of a word ("kube" finds "kubernetes")."""
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
    windows = find_windows(query, now, tz) if retrieval.temporal_boost > 0 else []
    terms = query_terms(query, retrieval.max_query_terms, cue_words(windows))
    result = RetrievalResult(
        query=query, terms=terms, categories=[], hits=[], candidates=0, budget=budget, mode=mode
    )
    result.time_windows = [w.describe() for w in windows]
    wanted = limit or (retrieval.candidate_pool if budget else retrieval.default_limit)
    filters = _Filters(store, tiers, category)
    if not terms and mode == "keyword" and not llm_paths:
        result.notes.append("the query has no searchable words")
        return result
    result.categories = match_tree(tree, terms)
    if llm_paths:
        result.mode = "llm"
        return _llm_search(
            result, tree, llm_paths, filters, wanted, windows, now, retrieval, scoring
        )
    keyword: list[_Candidate] = []
    last = unfinished_word(query, terms) if prefix and mode == "keyword" else None
    prefixes = prefix_variants(last) if last else []
    if terms and mode != "vector":
        exact = [t for t in terms if t != last] if prefixes else terms
        keyword = _keyword_candidates(store, exact, filters, retrieval, prefixes)
    similar: list[_Candidate] = []
    if mode != "keyword" and vectors is not None:  # (vector and hybrid modes require it)
        similar = _vector_candidates(vectors, query, filters, retrieval)
    elif vectors is not None and retrieval.vector_fallback:
        why = _fallback_reason(keyword, terms, retrieval, wanted)
        if why:
            similar = _vector_candidates(vectors, query, filters, retrieval)
            result.notes.append(f"{why}: vector fallback used")
    result.candidates = len({c.seq for c in (*keyword, *similar)})
    context = _Context(result.categories, windows, now, retrieval, scoring)
    if mode == "keyword":
        ranked = context.rank(keyword)
        if similar:
            known = {c.seq for c in keyword}
            extra = [c for c in similar if c.seq not in known]
            for c in extra:
                c.found_by = "vector fallback"
            ranked += context.rank(extra)  # primary first: keyword results keep their places
    elif mode == "vector":
        ranked = context.rank(similar)
    else:
        ranked = _hybrid(result, keyword, similar, context)
    _finish(result, tree, ranked, wanted, prefixes)
    return result


def _hybrid(
    result: RetrievalResult,
    keyword: list[_Candidate],
    similar: list[_Candidate],
    context: _Context,
) -> list[_Candidate]:
    """Keyword first: when the best keyword result contains more than `hybrid_keyword_coverage`
    of the query's terms, keyword search is confident and its ranking stands (vector-only
    results follow it, as in the fallback); otherwise the query says what it wants in other
    words than the memories, and both rankings are fused. On LongMemEval this keeps what keyword
    search gets right on fact-gathering questions ("how many … in total": similarity pulls in
    turns about the topic rather than the counted facts) and what similarity adds to
    paraphrased ones ("any tips for my phone's battery?")."""
    cfg = context.retrieval
    share = _coverage(keyword[0], result.terms) if keyword else 0.0
    if share <= cfg.hybrid_keyword_coverage:
        result.notes.append(
            f"the best keyword result has {share:.0%} of the query's terms "
            f"(at most {cfg.hybrid_keyword_coverage:.0%}): keyword and vector rankings fused"
        )
        return context.rank(_fuse(keyword, similar, cfg.hybrid_vector_weight))
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


def _coverage(candidate: _Candidate, terms: Sequence[str]) -> float:
    """The share of the query's terms a candidate's searchable fields contain."""
    if not terms:
        return 0.0
    text = " ".join(str(candidate.row[i]) for i in _SEARCHABLE)
    return len(matched_terms(text, {stem(t): t for t in terms})) / len(terms)


def _fallback_reason(
    keyword: list[_Candidate], terms: Sequence[str], retrieval: RetrievalConfig, wanted: int
) -> str | None:
    """Why keyword results are too few or too weak for seed 004's fallback, if they are."""
    needed = min(retrieval.fallback_min_results, wanted)
    if len(keyword) < needed:
        return f"keyword search found {len(keyword)} < {needed}"
    if retrieval.fallback_min_coverage > 0 and terms:
        share = _coverage(keyword[0], terms)
        if share < retrieval.fallback_min_coverage:
            return (
                f"the best keyword result has {share:.0%} of the query's terms "
                f"< {retrieval.fallback_min_coverage:.0%}"
            )
    return None


def _finish(
    result: RetrievalResult,
    tree: TreeIndex,
    ranked: list[_Candidate],
    wanted: int,
    prefixes: Sequence[str] = (),
) -> None:
    chosen = _fit(ranked, wanted, result.budget)
    result.hits = _explain(tree, chosen, result.terms, result.categories, prefixes)
    result.tokens = sum(h.memory.tokens for h in result.hits)


def _llm_search(
    result: RetrievalResult,
    tree: TreeIndex,
    choices: Sequence[PathChoice],
    filters: _Filters,
    wanted: int,
    windows: list[TimeWindow],
    now: float,
    retrieval: RetrievalConfig,
    scoring: ScoringConfig,
) -> RetrievalResult:
    """Memories of the categories the model chose: keyword matches inside them first, then
    (if too few) their most important and newest memories. relevance = the model's score for
    the category × (1 + keyword relevance) / 2."""
    within = _Filters(
        filters.store, filters.tiers, filters.category, tuple(c.path for c in choices)
    )
    found = (
        _keyword_candidates(filters.store, result.terms, within, retrieval) if result.terms else []
    )
    if len(found) < wanted:
        found += _category_fill(within, {c.seq for c in found}, wanted - len(found))
    for c in found:
        choice = max(
            (ch for ch in choices if _matched_category(c.row[_CATEGORY], {ch.path})),
            key=lambda ch: len(ch.path),
        )
        c.relevance = choice.score * (1.0 + c.relevance) / 2.0
        c.found_by, c.llm_reason = "llm", choice.describe()
    result.candidates = len(found)
    context = _Context(result.categories, windows, now, retrieval, scoring)
    _finish(result, tree, context.rank(found), wanted)
    return result


def _category_fill(filters: _Filters, exclude: set[int], n: int) -> list[_Candidate]:
    where, params = filters.sql()
    rows = filters.store.db.query(
        f"SELECT m.seq, {_FIELDS} FROM memories m WHERE 1{where} "
        "ORDER BY m.importance DESC, m.created_at DESC, m.seq LIMIT ?",
        [*params, n + len(exclude)],
    )
    out = [_Candidate(seq=int(r[0]), row=r[1:]) for r in rows if int(r[0]) not in exclude]
    return out[:n]


@dataclass(slots=True)
class _Candidate:
    """One memory being ranked (mutable: filled in stage by stage, no copies per query)."""

    seq: int
    row: Row
    """The memory's columns (warm.COLUMNS): one query fetches what ranking and results need."""
    bm25: float = 0.0
    relevance: float = 0.0
    length_factor: float = 1.0
    found_by: str = "keyword"
    keyword_rank: int | None = None
    vector_rank: int | None = None
    similarity: float | None = None
    boost: float = 0.0
    matched_category: str | None = None
    time_boost: float = 0.0
    time_match: str | None = None
    tier_score: float = 0.0
    score: float = 0.0
    llm_reason: str | None = None


_NAMES = [c.strip() for c in COLUMNS.split(",")]
_CATEGORY, _IMPORTANCE, _CREATED, _ACCESS, _TOKENS = (
    _NAMES.index(n) for n in ("category", "importance", "created_at", "access_count", "tokens")
)
_SEARCHABLE = [_NAMES.index(n) for n in ("text", "category", "urls", "commands", "paths")]
_FIELDS = ", ".join("m." + n for n in _NAMES)
_IN_RANGE = "memories_fts.rowid BETWEEN ? << 32 AND (? << 32) + 4294967295"
_BM25 = "bm25(memories_fts, 1.0, 0.5, 0.25, 0.25, 0.25)"


@dataclass(frozen=True)
class _Filters:
    store: MemoryStore
    tiers: Sequence[Tier]
    category: str | None
    within: tuple[str, ...] = ()
    """Categories chosen by LLM tree search (each with its subcategories)."""

    @property
    def any(self) -> bool:
        return set(self.tiers) != set(TIERS) or bool(self.category) or bool(self.within)

    def sql(self) -> tuple[str, list[object]]:
        """Conditions on `m` (memories) for the agent, tier and category filters."""
        sql = f" AND m.agent_id = ? AND m.tier IN ({','.join('?' * len(self.tiers))})"
        params: list[object] = [self.store.agent_id, *self.tiers]
        for group in ([self.category] if self.category else [], self.within):
            paths = [normalize_path(p) for p in group]
            if paths:
                either = " OR ".join(
                    ["m.category = ? OR substr(m.category, 1, ?) = ?"] * len(paths)
                )
                sql += f" AND ({either})"
                for path in paths:
                    params += [path, len(path) + 1, path + "/"]
        return sql, params


def _keyword_candidates(
    store: MemoryStore,
    terms: Sequence[str],
    filters: _Filters,
    retrieval: RetrievalConfig,
    prefixes: Sequence[str] = (),
) -> list[_Candidate]:
    """The best `candidate_pool` BM25 matches, relevance-weighted by length. The agent's rowid
    range scopes the FTS5 walk; a tier or category filter needs the join inside the search,
    otherwise only the pool's rows are looked up."""
    params: list[object] = [fts_match(terms, prefixes), store.slot, store.slot]
    if not filters.any:
        sql = (
            f"SELECT f.rowid, f.r, {_FIELDS} FROM (SELECT rowid, {_BM25} AS r FROM memories_fts "
            f"WHERE memories_fts MATCH ? AND {_IN_RANGE} ORDER BY r LIMIT ?) AS f "
            "JOIN memories m ON m.seq = f.rowid ORDER BY f.r"
        )
    else:
        where, extra = filters.sql()
        sql = (
            f"SELECT m.seq, {_BM25} AS r, {_FIELDS} FROM memories_fts "
            "JOIN memories m ON m.seq = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {_IN_RANGE}{where} ORDER BY r LIMIT ?"
        )
        params += extra
    params.append(retrieval.candidate_pool)
    rows = store.db.query(sql, params)
    if not rows:
        return []
    alpha = retrieval.length_penalty
    shortest = max(1, min(int(r[2 + _TOKENS]) for r in rows))
    weighted = []
    for r in rows:
        factor = (shortest / max(1, int(r[2 + _TOKENS]))) ** alpha if alpha else 1.0
        weighted.append((-float(r[1]) * factor, factor, r))
    best = max(w for w, _, _ in weighted) or 1.0
    out = [
        _Candidate(
            seq=int(r[0]), row=r[2:], bm25=float(r[1]), relevance=w / best, length_factor=factor
        )
        for w, factor, r in weighted
    ]
    out.sort(key=lambda c: (-c.relevance, c.seq))
    for i, c in enumerate(out, 1):
        c.keyword_rank = i
    return out


def _vector_candidates(
    vectors: VectorSearch, query: str, filters: _Filters, retrieval: RetrievalConfig
) -> list[_Candidate]:
    """The memories most similar to the query, with the metadata ranking needs."""
    similar = vectors.similar(query, retrieval.candidate_pool)
    if not similar:
        return []
    marks = ",".join(["CAST(? AS INTEGER)"] * len(similar))
    where, params = filters.sql()
    rows = filters.store.db.query(
        f"SELECT m.seq, {_FIELDS} FROM memories m WHERE m.seq IN ({marks}){where}",
        [*(str(seq) for seq, _ in similar), *params],
    )
    meta = {int(r[0]): r[1:] for r in rows}
    out: list[_Candidate] = []
    for seq, sim in similar:
        r = meta.get(seq)
        if r is None:
            continue
        out.append(
            _Candidate(
                seq=seq,
                row=r,
                relevance=max(sim, 0.0),
                found_by="vector",
                vector_rank=len(out) + 1,
                similarity=sim,
            )
        )
    return out


def _fuse(keyword: list[_Candidate], similar: list[_Candidate], weight: float) -> list[_Candidate]:
    """Hybrid: (1 - weight) × keyword relevance + weight × similarity, each min-max normalised
    over its own candidates (best 1, worst 0); a memory found by one side only gets 0 from the
    other. Min-max, not division by the best: similarities of one query sit in a narrow band
    (0.3–0.6, say), so only their spread says anything."""
    kw = _spread([c.relevance for c in keyword])
    vec = _spread([c.relevance for c in similar])
    by_seq = {c.seq: c for c in keyword}
    for c in keyword:
        c.relevance = (1 - weight) * kw(c.relevance)
    fused = []
    for c in similar:
        k = by_seq.pop(c.seq, None)
        if k is None:
            c.relevance = weight * vec(c.relevance)
            fused.append(c)
        else:
            k.relevance += weight * vec(c.relevance)
            k.found_by, k.vector_rank, k.similarity = "both", c.vector_rank, c.similarity
            fused.append(k)
    fused += by_seq.values()
    return fused


def _spread(values: list[float]) -> Callable[[float], float]:
    """value → (value - min) / (max - min); 1 for all when they are equal."""
    low, high = min(values, default=0.0), max(values, default=0.0)
    if high <= low:
        return lambda value: 1.0
    return lambda value: (value - low) / (high - low)


@dataclass(frozen=True)
class _Context:
    categories: list[CategoryMatch]
    windows: list[TimeWindow]
    now: float
    retrieval: RetrievalConfig
    scoring: ScoringConfig

    def rank(self, found: list[_Candidate]) -> list[_Candidate]:
        """Boosts and the tie-break on top of each candidate's relevance, best first."""
        reasons = {c.path for c in self.categories}
        cfg, s = self.retrieval, self.scoring
        labelled = [(w, w.describe()) for w in self.windows]
        for c in found:
            row = c.row
            matched = _matched_category(row[_CATEGORY], reasons) if reasons else None
            boost = cfg.category_boost if matched else 0.0
            created = float(row[_CREATED])
            window = next((label for w, label in labelled if w.contains(created)), None)
            time_boost = cfg.temporal_boost if window else 0.0
            age_days = max(0.0, (self.now - created) / DAY)
            tier_score = (
                float(row[_IMPORTANCE])
                * math.exp(-age_days / s.tau_days)
                * (1.0 + s.reinforcement * int(row[_ACCESS]))
            )
            c.boost, c.matched_category = boost, matched
            c.time_boost, c.time_match = time_boost, window
            c.tier_score = tier_score
            c.score = (
                c.relevance * (1.0 + boost) * (1.0 + time_boost) + cfg.tier_tiebreak * tier_score
            )
        ranked = sorted(found, key=lambda c: (-c.score, c.seq))
        return ranked


def _explain(
    tree: TreeIndex,
    chosen: list[_Candidate],
    terms: Sequence[str],
    categories: list[CategoryMatch],
    prefixes: Sequence[str] = (),
) -> list[Hit]:
    """Records and explanations, only for the memories actually returned."""
    reasons = {c.path: c.reason for c in categories}
    unfinished = prefixes[0] if prefixes else None
    stems = {stem(t): t for t in terms if t != unfinished}
    stems |= {p: f"{unfinished}…" for p in prefixes}
    hits = []
    for c in chosen:
        memory = MemoryRecord.from_row(c.row)
        searchable = " ".join(
            (memory.text, memory.category, *memory.urls, *memory.commands, *memory.paths)
        )
        explanation = Explanation(
            path=tree.node_for(memory.category),
            tree_match=f"{c.matched_category}: {reasons[c.matched_category]}"
            if c.matched_category
            else None,
            matched_terms=matched_terms(searchable, stems, frozenset(prefixes)),
            bm25=c.bm25,
            relevance=c.relevance,
            category_boost=c.boost,
            tier_score=c.tier_score,
            score=c.score,
            tier=memory.tier,
            length_factor=c.length_factor,
            time_match=c.time_match,
            time_boost=c.time_boost,
            found_by=c.found_by,
            keyword_rank=c.keyword_rank,
            vector_rank=c.vector_rank,
            similarity=c.similarity,
            llm_reason=c.llm_reason,
        )
        hits.append(Hit(memory, explanation))
    return hits


def matched_terms(
    text: str, stems: dict[str, str], prefixes: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """Which query terms (values of `stems`, keyed by their stem) a text contains: a stem at a
    word start followed by at most four more letters ("deadline" finds "deadlines", "game"
    finds "gaming"), or by any number for the keys in `prefixes` (an unfinished word). An
    approximation of Porter stemming made only to explain; plain substring searches (no regex
    built per query)."""
    folded = text.casefold()
    found = []
    for s, term in stems.items():
        at = folded.find(s)
        while at >= 0:
            end = at + len(s)
            tail = end
            while tail < len(folded) and tail - end <= 4 and _is_word(folded[tail]):
                tail += 1
            if (at == 0 or not _is_word(folded[at - 1])) and (tail - end <= 4 or s in prefixes):
                found.append(term)
                break
            at = folded.find(s, at + 1)
    return tuple(dict.fromkeys(found))


def _is_word(char: str) -> bool:
    return char.isalnum()


@lru_cache(maxsize=1024)
def _node_words(path: str, description: str) -> tuple[frozenset[str], frozenset[str]]:
    """Stemmed words of a node's path and description (cached: the tree changes rarely)."""
    segment = frozenset(stem(w) for w in _TERM.findall(path.replace("/", " ").casefold()))
    desc = frozenset(stem(w.casefold()) for w in _TERM.findall(description))
    return segment, desc


def _matched_category(category: str, matched: set[str]) -> str | None:
    """The deepest tree match that contains `category`."""
    best = None
    for path in matched:
        if (category == path or category.startswith(path + "/")) and (
            best is None or len(path) > len(best)
        ):
            best = path
    return best


def _fit(ranked: list[_Candidate], limit: int, budget: int | None) -> list[_Candidate]:
    """The best `limit` candidates, skipping any that would overflow the token budget."""
    if budget is None:
        return ranked[:limit]
    chosen: list[_Candidate] = []
    used = 0
    for candidate in ranked:
        if len(chosen) == limit:
            break
        tokens = int(candidate.row[_TOKENS])
        if used + tokens <= budget:
            chosen.append(candidate)
            used += tokens
    return chosen
