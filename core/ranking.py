"""Ranking and explaining retrieval candidates: a memory row being ranked, the boosts and tie-break
on top of its relevance, the fusion of keyword and vector rankings, the token-budget fit, and the
explanation each returned memory carries."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from tiermem.core.budget import fit, shorten
from tiermem.core.config import RetrievalConfig, ScoringConfig
from tiermem.core.db import Row
from tiermem.core.rows import MemoryRow
from tiermem.core.scoring import DAY
from tiermem.core.temporal import TimeWindow
from tiermem.core.terms import TERM, matched_terms, stem
from tiermem.core.tokens import UNCOUNTED, count_tokens, counted
from tiermem.core.tree import TreeIndex
from tiermem.core.warm import COLUMNS


@dataclass(frozen=True)
class CategoryMatch:
    """A tree node the query points at, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class Explanation:
    """Why a memory was returned and how its score was made."""

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
    """relevance × (1 + category_boost) × (1 + time_boost) × (1 + graph or episode boost)
    × scope_boost + tier_tiebreak × tier_score."""
    tier: str
    length_factor: float = 1.0
    """The length prior, tokens^-α relative to the shortest candidate (1 for it); α is
    `length_penalty` scaled by the spread of the candidates' lengths (1 when they are alike)."""
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
    via: str | None = None
    """How the knowledge graph or an episode reached it ("Maya → works_on → Ledgerly")."""
    tags: tuple[str, ...] = ()
    """The memory's tags."""
    matched_tags: tuple[str, ...] = ()
    """Its tags that a query word or a `tag:` filter named."""
    graph_boost: float = 0.0
    """What the knowledge graph or an episode added (`via` says how it reached the memory)."""
    supersession: str | None = None
    """Whether a newer memory replaced it ("superseded on … by …") or it replaced the one the
    search found ("the current version of …")."""
    space: str | None = None
    """The shared space it came from (None: the agent's own memory)."""
    written_by: str | None = None
    """The member who wrote it into its space."""
    scope_boost: float = 1.0
    """What its score was multiplied by for its source: `[spaces] own_boost` for the agent's
    own memory when the search also covered spaces, else 1."""


@dataclass(frozen=True)
class Hit:
    """A returned memory with its explanation."""

    memory: MemoryRow
    explanation: Explanation


@dataclass(slots=True)
class Candidate:
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
    signal_boost: float = 0.0
    via: str | None = None
    tags: tuple[str, ...] = ()
    matched_tags: tuple[str, ...] = ()
    tag_terms: tuple[str, ...] = ()
    supersession: str | None = None
    stands_for: str = ""
    """The text of the superseded memory whose place it took: the words the search found."""
    space: str | None = None
    written_by: str | None = None
    scope_boost: float = 1.0


_NAMES = [c.strip() for c in COLUMNS.split(",")]

ROW_TEXT, ROW_CATEGORY, _IMPORTANCE, ROW_CREATED, _ACCESS, ROW_TOKENS = (
    _NAMES.index(n)
    for n in ("text", "category", "importance", "created_at", "access_count", "tokens")
)
ROW_ID, ROW_VALID_FROM, ROW_SUPERSEDED_BY, ROW_SUPERSEDED_AT = (
    _NAMES.index(n) for n in ("id", "valid_from", "superseded_by", "superseded_at")
)

_SEARCHABLE = [_NAMES.index(n) for n in ("text", "category", "urls", "commands", "paths")]

ROW_FIELDS = ", ".join("m." + n for n in _NAMES)


def with_count(row: Row) -> Row:
    """The row, its token count counted now if it was stored uncounted (`core.tokens`)."""
    if row[ROW_TOKENS] != UNCOUNTED:
        return row
    tokens = counted(str(row[ROW_TEXT]), UNCOUNTED)
    return (*row[:ROW_TOKENS], tokens, *row[ROW_TOKENS + 1 :])


def match_tree(tree: TreeIndex, terms: Sequence[str]) -> list[CategoryMatch]:
    """Tree nodes whose path segments or description share a (stemmed) term with the query."""
    stems = {stem(t): t for t in terms}
    by_word = _tree_words(tuple((p, n.description) for p, n in tree.nodes.items()))
    matches = []
    for path in sorted({p for s in stems for p in by_word.get(s, ())}):
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


def coverage(candidate: Candidate, terms: Sequence[str]) -> float:
    """The share of the query's terms a candidate's searchable fields contain."""
    if not terms:
        return 0.0
    text = " ".join(str(candidate.row[i]) for i in _SEARCHABLE)
    return len(matched_terms(text, {stem(t): t for t in terms})) / len(terms)


def length_factors(tokens: Sequence[int], cfg: RetrievalConfig) -> list[float]:
    """The length prior of each candidate: tokens^-α relative to the shortest (1 for it). α is
    `length_penalty` scaled by how spread the candidates' lengths are (the standard deviation
    of ln tokens): 0 up to `length_spread_min`, the full penalty from `length_spread_full`,
    linear between. Where memories are alike in length (turns of a chat between people, facts)
    a longer one is not less about a word, and the prior only adds noise."""
    sizes = [t if t > 1 else 1 for t in tokens]
    if not sizes or cfg.length_penalty == 0:
        return [1.0] * len(sizes)
    alpha = cfg.length_penalty
    if cfg.length_spread_full > 0:
        logs = list(map(math.log, sizes))
        mean = sum(logs) / len(logs)
        spread = math.sqrt(sum([(x - mean) ** 2 for x in logs]) / len(logs))
        low, full = cfg.length_spread_min, max(cfg.length_spread_full, cfg.length_spread_min)
        share = 1.0 if spread >= full else (0.0 if spread <= low else (spread - low) / (full - low))
        alpha *= share
    if alpha == 0:
        return [1.0] * len(sizes)
    shortest = min(sizes)
    return [(shortest / t) ** alpha for t in sizes]


def fuse(keyword: list[Candidate], similar: list[Candidate], weight: float) -> list[Candidate]:
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
class RankContext:
    """What ranking needs besides the candidates: tree matches, time windows, settings."""

    categories: list[CategoryMatch]
    windows: list[TimeWindow]
    now: float
    retrieval: RetrievalConfig
    scoring: ScoringConfig

    def rank(self, found: list[Candidate]) -> list[Candidate]:
        """Boosts and the tie-break on top of each candidate's relevance, best first."""
        reasons = {c.path for c in self.categories}
        labelled = [(w, w.describe()) for w in self.windows]
        cfg, s = self.retrieval, self.scoring
        now, tau, per_read, tiebreak = self.now, s.tau_days, s.reinforcement, cfg.tier_tiebreak
        for c in found:
            row = c.row
            created = float(row[ROW_CREATED])
            if reasons or labelled:
                self._boost(c, created, reasons, labelled)
            else:
                c.boost = c.time_boost = 0.0
                c.matched_category = c.time_match = None
            c.tier_score = tier_score = row_tier_score(row, now, tau, per_read)
            c.score = (
                c.relevance
                * (1.0 + c.boost)
                * (1.0 + c.time_boost)
                * (1.0 + c.signal_boost)
                * c.scope_boost
                + tiebreak * tier_score
            )
        return sorted(found, key=lambda c: (-c.score, c.seq))

    def _boost(
        self,
        c: Candidate,
        created: float,
        reasons: set[str],
        labelled: list[tuple[TimeWindow, str]],
    ) -> None:
        """The category boost (inside a tree match) and the time boost (dated inside a window
        the query names) of one candidate."""
        matched = deepest_match(c.row[ROW_CATEGORY], reasons) if reasons else None
        window = next((label for w, label in labelled if w.contains(created)), None)
        c.boost = self.retrieval.category_boost if matched else 0.0
        c.matched_category = matched
        c.time_boost = self.retrieval.temporal_boost if window else 0.0
        c.time_match = window


def row_tier_score(row: Row, now: float, tau: float, per_read: float) -> float:
    """importance × decay × reinforcement of a candidate's row: what keeps it in its tier."""
    age_days = max(0.0, (now - float(row[ROW_CREATED])) / DAY)
    return (
        float(row[_IMPORTANCE]) * math.exp(-age_days / tau) * (1.0 + per_read * int(row[_ACCESS]))
    )


def explain(
    tree: TreeIndex,
    chosen: list[Candidate],
    terms: Sequence[str],
    categories: list[CategoryMatch],
    prefixes: Sequence[str] = (),
) -> list[Hit]:
    """Records and explanations, only for the memories actually returned."""
    reasons = {c.path: c.reason for c in categories}
    unfinished = prefixes[0] if prefixes else None
    stems = {stem(t): t for t in terms if t != unfinished}
    stems |= {p: f"{unfinished}…" for p in prefixes}
    open_ended = frozenset(prefixes)
    hits = []
    for c in chosen:
        memory = MemoryRow.read(c.row)
        searchable = " ".join(
            (memory.text, memory.category, *memory.urls, *memory.commands, *memory.paths)
        )
        searchable += f" {c.stands_for}" if c.stands_for else ""
        found = matched_terms(searchable, stems, open_ended)
        explanation = Explanation(
            path=tree.node_for(memory.category),
            tree_match=f"{c.matched_category}: {reasons[c.matched_category]}"
            if c.matched_category
            else None,
            matched_terms=tuple(dict.fromkeys((*found, *c.tag_terms))) if c.tag_terms else found,
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
            via=c.via,
            tags=c.tags,
            matched_tags=c.matched_tags,
            graph_boost=c.signal_boost,
            supersession=c.supersession,
            space=c.space,
            written_by=c.written_by,
            scope_boost=c.scope_boost,
        )
        hits.append(Hit(memory, explanation))
    return hits


@lru_cache(maxsize=16)
def _tree_words(nodes: tuple[tuple[str, str], ...]) -> dict[str, tuple[str, ...]]:
    """Stemmed word → the nodes (path, description) whose path or description has it: a
    query looks up its few terms instead of testing every node (cached per tree)."""
    out: dict[str, list[str]] = {}
    for path, description in nodes:
        segment, desc = _node_words(path, description)
        for word in segment | desc:
            out.setdefault(word, []).append(path)
    return {word: tuple(paths) for word, paths in out.items()}


@lru_cache(maxsize=1024)
def _node_words(path: str, description: str) -> tuple[frozenset[str], frozenset[str]]:
    """Stemmed words of a node's path and description (cached: the tree changes rarely)."""
    segment = frozenset(stem(w) for w in TERM.findall(path.replace("/", " ").casefold()))
    desc = frozenset(stem(w.casefold()) for w in TERM.findall(description))
    return segment, desc


def deepest_match(category: str, matched: set[str]) -> str | None:
    """The deepest tree match that contains `category`."""
    best = None
    for path in matched:
        if (category == path or category.startswith(path + "/")) and (
            best is None or len(path) > len(best)
        ):
            best = path
    return best


def fit_budget(ranked: list[Candidate], limit: int, budget: int | None) -> list[Candidate]:
    """The best `limit` candidates within the token budget (`core.budget.fit`): the best one
    always, shortened if it alone is over the budget."""
    return fit(ranked, lambda c: int(c.row[ROW_TOKENS]), budget, limit, _shorten)


def _shorten(candidate: Candidate, budget: int) -> Candidate | None:
    """A copy of the candidate whose text is cut to `budget` tokens."""
    text = shorten(str(candidate.row[ROW_TEXT]), budget)
    if text is None:
        return None
    row = list(candidate.row)
    row[ROW_TEXT], row[ROW_TOKENS] = text, count_tokens(text)
    return replace(candidate, row=tuple(row))
