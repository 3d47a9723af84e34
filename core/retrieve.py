"""Keyword retrieval that can say why it found each memory.

query → terms → (1) tree: nodes whose path or description share a term become candidate
categories, each with its reason; (2) FTS5 BM25 over text, category and metadata, scoped to the
agent inside the index; (3) final score = BM25 relevance (normalised to the best candidate),
raised inside candidate categories, plus the tier score as a weak tie-break only — decay decides
where a memory lives, not whether a relevant one is found; (4) every hit carries its explanation;
(5) an optional token budget keeps the best set that fits.

Query text is never passed to FTS5 as syntax: terms are extracted and quoted, so quotes,
operators, unicode and 10 KB of text are all just words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from tiermem.core.config import RetrievalConfig, ScoringConfig
from tiermem.core.errors import InvalidInput
from tiermem.core.scoring import score
from tiermem.core.tree import TreeIndex, normalize_path
from tiermem.core.warm import TIERS, MemoryRecord, MemoryStore, Tier

_TERM = re.compile(r"[^\W_]+")
MAX_TERM_CHARS = 64
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
    ]
)


def query_terms(query: str, max_terms: int) -> list[str]:
    """Distinct lower-case terms; stopwords dropped unless nothing else is left."""
    words = [w.casefold()[:MAX_TERM_CHARS] for w in _TERM.findall(query)]
    content = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(content or words))[:max_terms]


def stem(word: str) -> str:
    """A light suffix stripper used to explain matches (FTS5 itself uses Porter)."""
    for suffix in ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def fts_match(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of the quoted terms (never FTS5 syntax from the user)."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


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
    relevance: float
    """BM25 relevance normalised to the best candidate of this query (0..1]."""
    category_boost: float
    tier_score: float
    score: float
    tier: str


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
) -> RetrievalResult:
    """Rank this agent's memories for `query`. Pure read: reinforcement is the caller's."""
    if not query.strip():
        raise InvalidInput("query is empty")
    if limit is not None and limit < 1:
        raise InvalidInput(f"limit must be at least 1 (got {limit})")
    if budget is not None and budget < 1:
        raise InvalidInput(f"budget must be at least 1 token (got {budget})")
    terms = query_terms(query, retrieval.max_query_terms)
    result = RetrievalResult(
        query=query, terms=terms, categories=[], hits=[], candidates=0, budget=budget
    )
    if not terms:
        result.notes.append("the query has no searchable words")
        return result
    result.categories = match_tree(tree, terms)
    found = _candidates(store, terms, tiers, category, retrieval.candidate_pool)
    result.candidates = len(found)
    ranked = _rank(found, result.categories, now, retrieval, scoring)
    wanted = limit or (retrieval.candidate_pool if budget else retrieval.default_limit)
    chosen = _fit(ranked, wanted, budget)
    result.hits = _explain(store, tree, chosen, terms, result.categories)
    result.tokens = sum(c.tokens for c in chosen)
    return result


@dataclass(frozen=True)
class _Candidate:
    seq: int
    bm25: float
    category: str
    tokens: int
    relevance: float
    boost: float
    tier_score: float
    score: float
    matched_category: str | None


def _candidates(
    store: MemoryStore,
    terms: Sequence[str],
    tiers: Sequence[Tier],
    category: str | None,
    pool: int,
) -> list[tuple[int, float, str, float, float, int, int]]:
    """The best `pool` matches: (row, bm25, category, importance, created_at, access_count,
    tokens). The agent's rowid range scopes the FTS5 walk; a tier or category filter needs
    the join inside the search, otherwise only the pool's rows are looked up."""
    in_range = "memories_fts.rowid BETWEEN ? << 32 AND (? << 32) + 4294967295"
    bm25 = "bm25(memories_fts, 1.0, 0.5, 0.25, 0.25, 0.25)"
    fields = "m.category, m.importance, m.created_at, m.access_count, m.tokens"
    params: list[object] = [fts_match(terms), store.slot, store.slot]
    if set(tiers) == set(TIERS) and not category:
        sql = (
            f"SELECT f.rowid, f.r, {fields} FROM (SELECT rowid, {bm25} AS r FROM memories_fts "
            f"WHERE memories_fts MATCH ? AND {in_range} ORDER BY r LIMIT ?) AS f "
            "JOIN memories m ON m.seq = f.rowid ORDER BY f.r"
        )
        params.append(pool)
    else:
        sql = (
            f"SELECT m.seq, {bm25} AS r, {fields} FROM memories_fts "
            "JOIN memories m ON m.seq = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {in_range} AND m.agent_id = ? "
            f"AND m.tier IN ({','.join('?' * len(tiers))})"
        )
        params += [store.agent_id, *tiers]
        if category:
            path = normalize_path(category)
            sql += " AND (m.category = ? OR substr(m.category, 1, ?) = ?)"
            params += [path, len(path) + 1, path + "/"]
        sql += " ORDER BY r LIMIT ?"
        params.append(pool)
    rows = store.db.query(sql, params)
    return [
        (int(r[0]), float(r[1]), r[2], float(r[3]), float(r[4]), int(r[5]), int(r[6])) for r in rows
    ]


def _rank(
    found: list[tuple[int, float, str, float, float, int, int]],
    categories: list[CategoryMatch],
    now: float,
    retrieval: RetrievalConfig,
    scoring: ScoringConfig,
) -> list[_Candidate]:
    if not found:
        return []
    best = max(-row[1] for row in found) or 1.0
    reasons = {c.path for c in categories}
    ranked = []
    for seq, bm25, category, importance, created_at, access_count, tokens in found:
        matched = _matched_category(category, reasons)
        relevance = -bm25 / best
        boost = retrieval.category_boost if matched else 0.0
        tier_score = score(importance, created_at, access_count, now, scoring)
        final = relevance * (1.0 + boost) + retrieval.tier_tiebreak * tier_score
        ranked.append(
            _Candidate(seq, bm25, category, tokens, relevance, boost, tier_score, final, matched)
        )
    ranked.sort(key=lambda c: (-c.score, c.seq))
    return ranked


def _explain(
    store: MemoryStore,
    tree: TreeIndex,
    chosen: list[_Candidate],
    terms: Sequence[str],
    categories: list[CategoryMatch],
) -> list[Hit]:
    """Full records and explanations, only for the memories actually returned."""
    records = store.by_seqs([c.seq for c in chosen])
    reasons = {c.path: c.reason for c in categories}
    finder = _term_finder(terms)
    hits = []
    for c in chosen:
        memory = records[c.seq]
        searchable = " ".join(
            (memory.text, memory.category, *memory.urls, *memory.commands, *memory.paths)
        )
        explanation = Explanation(
            path=tree.node_for(memory.category),
            tree_match=f"{c.matched_category}: {reasons[c.matched_category]}"
            if c.matched_category
            else None,
            matched_terms=finder(searchable),
            bm25=c.bm25,
            relevance=c.relevance,
            category_boost=c.boost,
            tier_score=c.tier_score,
            score=c.score,
            tier=memory.tier,
        )
        hits.append(Hit(memory, explanation))
    return hits


def _term_finder(terms: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """Which query terms a text contains: a term's stem at a word start, followed by at most
    four more letters ("deadline" finds "deadlines", "game" finds "gaming"). One regex scan in
    C per returned memory; an approximation of Porter stemming made only to explain."""
    by_stem = {stem(t): t for t in terms}
    alternatives = "|".join(sorted(map(re.escape, by_stem), key=len, reverse=True))
    pattern = re.compile(rf"(?<![^\W_])({alternatives})[^\W_]{{0,4}}(?![^\W_])", re.IGNORECASE)

    def find(text: str) -> tuple[str, ...]:
        found = {m.casefold() for m in pattern.findall(text)}
        return tuple(t for s, t in by_stem.items() if s in found)

    return find


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
        if used + candidate.tokens <= budget:
            chosen.append(candidate)
            used += candidate.tokens
    return chosen
