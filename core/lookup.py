"""What `Memory.retrieve` does around the search pipeline (`core.retrieve.search`): the tiers
asked for, the retrieval mode and its vector index, the LLM tree walk, the knowledge graph's
signal, and the reads to reinforce afterwards (`Memory.reinforce_later`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tiermem.core.errors import InvalidInput, TreeSearchError
from tiermem.core.vectors import VectorIndex, VectorUnavailable
from tiermem.core.warm import TIERS, MemoryStore, Tier

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.retrieve import RetrievalResult, Signals
    from tiermem.core.tree import TreeIndex
    from tiermem.core.treesearch import PathChoice

TIER_CHOICES = ("warm", "cold", "frozen", "all")


def tiers_for(tier: str | None) -> tuple[Tier, ...]:
    """Retrieval searches every tier unless asked. `cold` is the whole archive (cold and
    frozen: frozen facts are cold ones waiting for their retention to end)."""
    if tier is None or tier == "all":
        return TIERS
    if tier == "cold":
        return ("cold", "frozen")
    if tier not in TIERS:
        raise InvalidInput(f"unknown tier {tier!r}: use {', '.join(TIER_CHOICES)}")
    return (tier,)


def retrieve(
    mem: Memory,
    query: str,
    *,
    limit: int | None,
    tier: str | None,
    category: str | None,
    budget: int | None,
    reinforce: bool,
    mode: str | None,
    llm: bool,
    tags: Sequence[str],
    as_of: float | None,
) -> RetrievalResult:
    """`Memory.retrieve` (its docstring says what each option does)."""
    from tiermem.core import retrieve as pipeline  # loaded by a search: `store` and `hot` skip it

    cfg = mem.cfg.retrieval
    chosen = mode or cfg.mode
    if chosen not in pipeline.MODES:
        raise InvalidInput(f"unknown retrieval mode {chosen!r}: use {', '.join(pipeline.MODES)}")
    if llm and mode not in (None, "keyword"):
        raise InvalidInput("LLM tree search ranks inside the chosen categories by keyword")
    notes: list[str] = []
    vectors = None
    if chosen != "keyword" or (cfg.vector_fallback and not llm):
        try:
            vectors = VectorIndex(mem.memories)
        except VectorUnavailable as exc:
            if chosen != "keyword":
                raise
            notes.append(f"vector fallback unavailable: {exc}")
    tree, tagged, (entities, episodes) = mem.reads.view()
    scopes = _space_scopes(mem)
    paths = None
    if llm:
        tree = mem.trees.load(with_counts=True)
        paths = _llm_paths(mem, tree, query, notes)
    result = pipeline.search(
        mem.memories,
        tree,
        query,
        now=mem.now(),
        retrieval=cfg,
        scoring=mem.cfg.scoring,
        limit=limit,
        tiers=tiers_for(tier),
        category=category,
        budget=budget,
        mode=chosen,
        vectors=vectors,
        llm_paths=paths,
        signals=_graph_signals(mem, entities, episodes, scopes),
        tags=tags,
        tagged=tagged,
        as_of=as_of,
        scopes=scopes,
    )
    result.notes[:0] = notes
    if reinforce and not mem.read_only:
        found = [h.memory.id for h in result.hits]
        mem.reinforce_later(found, {h.explanation.path for h in result.hits}, result.tokens)
    return result


def _llm_paths(
    mem: Memory, tree: TreeIndex, query: str, notes: list[str]
) -> list[PathChoice] | None:
    """The categories the `[llm]` endpoint chooses for `query`; None (and a note) if it fails."""
    from tiermem.core import llm, treesearch  # the LLM client: only `--llm` searches need it

    try:
        complete = treesearch.endpoint(llm.settings_from(mem.cfg.llm))
        return treesearch.choose_paths(tree, query, complete)
    except TreeSearchError as exc:
        notes.append(f"LLM tree search failed ({exc}): keyword mode")
        return None


def _graph_signals(
    mem: Memory, entities: bool, episodes: bool, others: list[MemoryStore]
) -> Signals | None:
    """The knowledge graph's signal for a search, if the agent or a space it includes has a
    graph or an episode (with the lookups earlier searches kept while nothing was written)."""
    if not (entities or episodes or others) or not mem.cfg.graph.retrieval_signal:
        return None
    from tiermem.core import scoped  # loaded with the search pipeline, like `retrieve`

    return scoped.graph_signals(mem, (entities, episodes), others)


def _space_scopes(mem: Memory) -> list[MemoryStore]:
    """The spaces the agent includes, kept in the read cache while nothing is written (one
    query less per search)."""
    from tiermem.core import scoped  # loaded with the search pipeline, like `retrieve`

    memo = mem.reads.memo()
    key = ("space scopes", mem.agent_id)
    found = memo.get(key)
    if found is None:
        found = memo[key] = scoped.spaces_of(mem.memories)
    return found  # type: ignore[return-value]
