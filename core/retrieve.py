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
from collections.abc import Sequence
from dataclasses import dataclass, field

from tiermem.core.config import RetrievalConfig, ScoringConfig
from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput
from tiermem.core.tree import TreeIndex, normalize_path
from tiermem.core.warm import COLUMNS, MemoryRecord, Tier, agent_token

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


def fts_match(agent_id: str, terms: Sequence[str]) -> str:
    """An FTS5 query: the agent's token AND any of the quoted terms."""
    ored = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    return f'agent_tok : "{agent_token(agent_id)}" AND ({ored})'


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
        node = tree.nodes[path]
        segment_words = {stem(w) for w in _TERM.findall(path.replace("/", " ").casefold())}
        desc_words = {stem(w.casefold()) for w in _TERM.findall(node.description)}
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
    db: Database,
    agent_id: str,
    tree: TreeIndex,
    query: str,
    *,
    now: float,
    retrieval: RetrievalConfig,
    scoring: ScoringConfig,
    limit: int | None = None,
    tiers: Sequence[Tier] = ("warm", "cold"),
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
    rows = _candidates(db, agent_id, terms, tiers, category, retrieval.candidate_pool)
    result.candidates = len(rows)
    hits = _rank(rows, tree, result.categories, terms, now, retrieval, scoring)
    wanted = limit or (retrieval.candidate_pool if budget else retrieval.default_limit)
    result.hits = _fit(hits, wanted, budget)
    result.tokens = sum(h.memory.tokens for h in result.hits)
    return result


def _candidates(
    db: Database,
    agent_id: str,
    terms: Sequence[str],
    tiers: Sequence[Tier],
    category: str | None,
    pool: int,
) -> list[tuple[float, MemoryRecord]]:
    sql = (
        f"SELECT bm25(memories_fts, 1.0, 0.5, 0.25, 0.25, 0.25, 0.0) AS r, "
        f"{', '.join('m.' + c.strip() for c in COLUMNS.split(','))} "
        "FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid "
        f"WHERE memories_fts MATCH ? AND m.agent_id = ? AND m.tier IN ({','.join('?' * len(tiers))})"
    )
    params: list[object] = [fts_match(agent_id, terms), agent_id, *tiers]
    if category:
        path = normalize_path(category)
        sql += " AND (m.category = ? OR substr(m.category, 1, ?) = ?)"
        params += [path, len(path) + 1, path + "/"]
    sql += " ORDER BY r LIMIT ?"
    params.append(pool)
    return [(float(r[0]), MemoryRecord.from_row(r[1:])) for r in db.query(sql, params)]


def _rank(
    rows: list[tuple[float, MemoryRecord]],
    tree: TreeIndex,
    categories: list[CategoryMatch],
    terms: Sequence[str],
    now: float,
    retrieval: RetrievalConfig,
    scoring: ScoringConfig,
) -> list[Hit]:
    if not rows:
        return []
    best = max(-bm25 for bm25, _ in rows) or 1.0
    reasons = {c.path: c.reason for c in categories}
    term_stems = [(t, stem(t)) for t in terms]
    hits = []
    for bm25, memory in rows:
        path = tree.node_for(memory.category)
        matched = _matched_category(memory.category, reasons)
        relevance = -bm25 / best
        boost = retrieval.category_boost if matched else 0.0
        tier_score = memory.score(now, scoring)
        final = relevance * (1.0 + boost) + retrieval.tier_tiebreak * tier_score
        words = {
            stem(w.casefold())
            for w in _TERM.findall(
                " ".join(
                    (memory.text, memory.category, *memory.urls, *memory.commands, *memory.paths)
                )
            )
        }
        explanation = Explanation(
            path=path,
            tree_match=f"{matched}: {reasons[matched]}" if matched else None,
            matched_terms=tuple(t for t, s in term_stems if s in words),
            bm25=bm25,
            relevance=relevance,
            category_boost=boost,
            tier_score=tier_score,
            score=final,
            tier=memory.tier,
        )
        hits.append(Hit(memory, explanation))
    hits.sort(key=lambda h: (-h.explanation.score, h.memory.id))
    return hits


def _matched_category(category: str, reasons: dict[str, str]) -> str | None:
    """The deepest tree match that contains `category`."""
    best = None
    for path in reasons:
        if (category == path or category.startswith(path + "/")) and (
            best is None or len(path) > len(best)
        ):
            best = path
    return best


def _fit(hits: list[Hit], limit: int, budget: int | None) -> list[Hit]:
    """The best `limit` hits, skipping any that would overflow the token budget."""
    if budget is None:
        return hits[:limit]
    chosen: list[Hit] = []
    used = 0
    for hit in hits:
        if len(chosen) == limit:
            break
        if used + hit.memory.tokens <= budget:
            chosen.append(hit)
            used += hit.memory.tokens
    return chosen
