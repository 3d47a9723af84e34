"""What an agent puts in its prompt, and recall within a real token budget.

- **Always loaded** (under 1,500 tokens): hot memory (MEMORY.md) and the tree index.
  Hot memory may hold 5 KB and the tree 2 KB, more than 1,500 tokens together, so the block is
  fitted: tree descriptions and deep nodes go first, then hot items in hot memory's own
  pruning order (oldest events, oldest tasks, least important lessons, stalest projects); a
  last line says what was left out and where to read it.
- **Context** (`tiermem context`): the memories and current facts relevant to the message,
  then the always-loaded part, the whole block within the budget. A trivial message (fewer
  than 3 meaningful words once stopwords and greetings are dropped) gets only the
  always-loaded part.
- **Recall** (`memory_recall`): the best entries that fit the budget, where an entry costs the
  tokens of its text (`core.budget`: the one unit of every budget); the best one always comes
  back, shortened if it alone is over the budget.

Every token count is `core.tokens.count_tokens` (cl100k, offline).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from tiermem.core import current, hygiene, injection, links, working
from tiermem.core import hot as hotmod
from tiermem.core.budget import fit, shorten
from tiermem.core.errors import InvalidInput
from tiermem.core.graph import history as graphhistory
from tiermem.core.hot import HotState
from tiermem.core.ranking import Hit
from tiermem.core.terms import STOPWORDS
from tiermem.core.tokens import count_tokens
from tiermem.core.tree import TreeIndex, default_description, normalize_path

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.rows import MemoryRow

ALWAYS_LOADED_MAX_TOKENS = 1500
DEFAULT_RECALL_BUDGET = 3000
DEFAULT_CONTEXT_BUDGET = 3000
MIN_MEANINGFUL_WORDS = 3
_WORD = re.compile(r"[^\W_]+")

Priority = Literal["critical", "high", "medium", "low"]
PRIORITIES: tuple[Priority, ...] = ("critical", "high", "medium", "low")
PRIORITY_IMPORTANCE: dict[str, float] = {"critical": 0.95, "high": 0.8, "medium": 0.5, "low": 0.3}
"""The importance a priority stores (the scoring guide: 0.9-1.0 critical, 0.7-0.8 decisions,
0.4-0.6 facts, below 0.4 casual)."""
PRIORITY_FLOOR: dict[str, float] = {"critical": 0.9, "high": 0.7, "medium": 0.4, "low": 0.0}
FORMATS = ("brief", "detailed")

TRIVIAL_WORDS = frozenset(
    """hi hello hey hiya yo sup morning evening night thanks thank thx ty ok okay k kk yes yeah
    yep yup no nope nah sure cool great nice good fine awesome perfect lol haha bye goodbye cheers
    please pls hmm hm ah oh wow right alright got gotcha understood agreed done np welcome""".split()  # noqa: SIM905
)


def importance_for(priority: str | None, importance: float | None) -> float | None:
    """The importance a priority name or a number gives (None when neither is given)."""
    if priority is not None and importance is not None:
        raise InvalidInput("give priority or importance, not both")
    return PRIORITY_IMPORTANCE[check_priority(priority)] if priority else importance


def priority_of(importance: float) -> Priority:
    for name in PRIORITIES:
        if importance >= PRIORITY_FLOOR[name]:
            return name
    return "low"


def check_priority(priority: str) -> Priority:
    if priority not in PRIORITIES:
        raise InvalidInput(f"unknown priority {priority!r}: use {', '.join(PRIORITIES)}")
    return priority


def meaningful_words(message: str) -> list[str]:
    words = [w.casefold() for w in _WORD.findall(message)]
    return [w for w in words if w not in STOPWORDS and w not in TRIVIAL_WORDS and len(w) > 1]


def is_trivial(message: str) -> bool:
    """The trivial filter: greetings, thanks and acknowledgements; a question (a question mark or
    a wh-word) or a name with content is never trivial, other messages need 3 meaningful words
    (`injection.is_trivial`)."""
    return injection.is_trivial(message, MIN_MEANINGFUL_WORDS)


# -- the always-loaded part ---------------------------------------------------------------------


@dataclass
class AlwaysLoaded:
    text: str
    tokens: int
    limit: int
    left_out: list[str] = field(default_factory=list)


def tree_lines(tree: TreeIndex, descriptions: bool = True, max_depth: int = 99) -> list[str]:
    lines = []
    for path in sorted(tree.nodes):
        if path.count("/") + 1 > max_depth:
            continue
        desc = tree.nodes[path].description
        show = descriptions and desc and desc != default_description(path)
        lines.append(f"- {path}: {desc}" if show else f"- {path}")
    return lines


def always_loaded(mem: Memory, limit: int = ALWAYS_LOADED_MAX_TOKENS) -> AlwaysLoaded:
    """Hot memory and the tree index, fitted under `limit` tokens (module doc)."""
    if limit < 1:
        raise InvalidInput(f"the always-loaded limit must be at least 1 token (got {limit})")
    tree = mem.trees.load()
    state: HotState = msgspec.json.decode(hotmod.encode(mem.hot()), type=HotState)
    left_out: list[str] = []
    tree_share = max(1, limit // 3)
    variants = [
        (tree_lines(tree), ""),
        (tree_lines(tree, descriptions=False), "tree descriptions"),
        (tree_lines(tree, False, 2), "tree nodes below depth 2"),
        (tree_lines(tree, False, 1), "tree nodes below depth 1"),
    ]
    lines, dropped = next(
        ((ls, d) for ls, d in variants if count_tokens(_tree_block(ls)) <= tree_share),
        variants[-1],
    )
    if dropped:
        left_out.append(dropped)
    tree_text = _tree_block(lines)
    while True:
        text = _assemble(state, tree_text, left_out)
        tokens = count_tokens(text)
        if tokens <= limit:
            return AlwaysLoaded(text, tokens, limit, left_out)
        item = _drop_one(state)
        if item is None:
            break
        left_out.append(item)
    # identity and owner profile alone are too long: cut whole lines from the end
    lines = _assemble(state, tree_text, left_out).split("\n")
    while lines and count_tokens("\n".join([*lines, "…"])) > limit:
        lines.pop()
    text = "\n".join([*lines, "…"]) if lines else ""
    return AlwaysLoaded(text, count_tokens(text), limit, [*left_out, "the end of hot memory"])


def _tree_block(lines: list[str]) -> str:
    return "## Memory tree (recall a category for details)\n\n" + "\n".join(lines or ["(empty)"])


def _assemble(state: HotState, tree_text: str, left_out: list[str]) -> str:
    body = hotmod.render_markdown(state).rstrip("\n")
    parts = [body, "", tree_text]
    if left_out:
        parts += ["", f"*Left out to stay in budget: {_summary(left_out)} (`tiermem hot`).*"]
    return "\n".join(parts) + "\n"


def _summary(left_out: list[str]) -> str:
    """ "2 events, 1 lesson, tree descriptions"."""
    counts: dict[str, int] = {}
    plain = []
    for item in left_out:
        kind, sep, _ = item.partition(": ")
        if sep:
            counts[kind] = counts.get(kind, 0) + 1
        else:
            plain.append(item)
    return ", ".join([*plain, *(f"{n} {k}{'s' if n > 1 else ''}" for k, n in counts.items())])


def _drop_one(state: HotState) -> str | None:
    """Hot memory's own pruning order: oldest event, oldest task, least important lesson,
    least recently updated project."""
    ctx = state.active_context
    if ctx.events:
        oldest = min(ctx.events, key=lambda e: (e.timestamp, e.id))
        ctx.events.remove(oldest)
        return f"event: {oldest.text}"
    if ctx.tasks:
        oldest_task = min(ctx.tasks, key=lambda t: (t.timestamp, t.id))
        ctx.tasks.remove(oldest_task)
        return f"task: {oldest_task.text}"
    if state.critical_lessons:
        least = min(state.critical_lessons, key=lambda x: (x.importance, x.timestamp, x.id))
        state.critical_lessons.remove(least)
        return f"lesson: {least.text}"
    if ctx.projects:
        stalest = min(ctx.projects, key=lambda p: (p.updated_at, p.id))
        ctx.projects.remove(stalest)
        return f"project: {stalest.name}"
    return None


# -- recall within a budget ---------------------------------------------------------------------


@dataclass
class Recall:
    query: str
    entries: list[dict[str, Any]]
    token_count: int
    budget: int
    total_entries_matched: int
    notes: list[str]
    terms: list[str]
    session: str | None = None

    @property
    def budget_remaining(self) -> int:
        return self.budget - self.token_count

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "entries": self.entries,
            "token_count": self.token_count,
            "budget": self.budget,
            "budget_remaining": self.budget_remaining,
            "total_entries_matched": self.total_entries_matched,
            "notes": self.notes,
            "session": self.session,
        }


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def why(hit: Hit) -> str:
    """One line: where the memory lives and why it was found."""
    e = hit.explanation
    parts = [f"in {e.path or 'root'}"]
    if e.space is not None:
        parts.insert(0, f"from space {e.space}" + (f" by {e.written_by}" if e.written_by else ""))
    elif e.scope_boost != 1.0:
        parts.insert(0, f"own memory (x{e.scope_boost:g})")
    if e.matched_terms:
        parts.append("matched " + ", ".join(e.matched_terms))
    if e.matched_tags:
        parts.append("tags " + ", ".join(e.matched_tags))
    if e.tree_match:
        parts.append("tree: " + e.tree_match)
    if e.time_match:
        parts.append("time: " + e.time_match)
    if e.similarity is not None:
        parts.append(f"similarity {e.similarity:.2f}")
    if e.via:
        parts.append("via " + e.via)
    if e.supersession:
        parts.append(e.supersession)
    parts.append(f"{e.tier}, score {e.score:.2f}")
    return "; ".join(parts)


def entry(hit: Hit, tags: tuple[str, ...], fmt: str) -> dict[str, Any]:
    m, e = hit.memory, hit.explanation
    out: dict[str, Any] = {
        "id": m.id,
        "category": m.category,
        "content": m.text,
        "priority": priority_of(m.importance),
        "score": round(e.score, 4),
        "stored_at": iso(m.created_at),
        "tags": list(tags),
        "why": why(hit),
    }
    out |= source_fields(hit)
    if fmt == "detailed":
        out |= {
            "importance": m.importance,
            "tier": m.tier,
            "access_count": m.access_count,
            "metadata": {"urls": m.urls, "commands": m.commands, "paths": m.paths},
            "source": m.source,
            "explanation": {
                "path": e.path,
                "tree_match": e.tree_match,
                "matched_terms": list(e.matched_terms),
                "relevance": round(e.relevance, 4),
                "category_boost": e.category_boost,
                "time_match": e.time_match,
                "tier_score": round(e.tier_score, 4),
                "found_by": e.found_by,
                "via": e.via,
                "supersession": e.supersession,
            },
        }
    return out


def source_fields(hit: Hit) -> dict[str, Any]:
    """Where a hit came from, when the search covered shared spaces: `space` (None: the
    agent's own memory), who wrote it there and the boost its source gave it."""
    e = hit.explanation
    if e.space is None and e.scope_boost == 1.0:
        return {}
    return {"space": e.space, "written_by": e.written_by, "scope_boost": e.scope_boost}


def _shorten_hit(hit: Hit, budget: int) -> Hit | None:
    text = shorten(hit.memory.text, budget)
    if text is None:
        return None
    memory = dataclasses.replace(hit.memory, text=text, tokens=count_tokens(text))
    return dataclasses.replace(hit, memory=memory)


def _linked_entry(mem: Memory, record: MemoryRow, source: str) -> dict[str, Any]:
    """A memory recalled because an entry links to it."""
    return {
        "id": record.id,
        "category": record.category,
        "content": record.text,
        "priority": priority_of(record.importance),
        "stored_at": iso(record.created_at),
        "tags": list(hygiene.extras_for(mem, [record.id]).get(record.id, ((), None))[0]),
        "why": f"linked to {source}",
        "linked_from": source,
    }


def recall(
    mem: Memory,
    query: str,
    *,
    categories: list[str] | tuple[str, ...] = (),
    priority_min: str | None = None,
    budget: int = DEFAULT_RECALL_BUDGET,
    fmt: str = "brief",
    session: str | None = None,
    tier: str | None = None,
    reinforce: bool = True,
    tags: Sequence[str] = (),
    include_context: bool = False,
    as_of: float | None = None,
) -> Recall:
    """The best entries for `query` whose text fits `budget` tokens, best first (the best one
    always, shortened if need be); `include_context` adds the memories linked to them within
    the same budget. What is returned is reinforced and, with a session, counted for session
    hygiene."""
    if budget < 1:
        raise InvalidInput(f"token budget must be at least 1 (got {budget})")
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}: use brief or detailed")
    floor = PRIORITY_FLOOR[check_priority(priority_min)] if priority_min else 0.0
    if session is not None:
        session = hygiene.check_session(session)
    hygiene.archive_expired(mem)
    pool = mem.cfg.retrieval.candidate_pool
    hits: dict[str, Hit] = {}
    notes: list[str] = []
    terms: list[str] = []
    paths: list[str | None] = list(dict.fromkeys(normalize_path(c) for c in categories))
    paths = paths or [None]
    for path in paths:
        result = mem.retrieve(
            query, limit=pool, category=path, tier=tier, reinforce=False, tags=tags, as_of=as_of
        )
        terms = result.terms
        notes += [n for n in result.notes if n not in notes]
        for hit in result.hits:
            hits.setdefault(hit.memory.id, hit)
    ranked = sorted(
        (h for h in hits.values() if h.memory.importance >= floor),
        key=lambda h: (-h.explanation.score, h.memory.id),
    )
    chosen = fit(ranked, lambda h: h.memory.tokens, budget, len(ranked), _shorten_hit)
    if chosen and chosen[0] is not ranked[0]:
        notes.append(f"the best entry was shortened to fit {budget} tokens")
    elif ranked and not chosen:
        notes.append("no entry fits the token budget")
    extras = hygiene.extras_for(mem, [h.memory.id for h in chosen])
    entries = [entry(h, extras.get(h.memory.id, ((), None))[0], fmt) for h in chosen]
    if chosen and chosen[0] is not ranked[0]:
        entries[0]["shortened"] = True
    used = sum(h.memory.tokens for h in chosen)
    if include_context:
        related = links.context_for(mem, [h.memory.id for h in chosen], budget - used)
        entries += [_linked_entry(mem, record, source) for record, source in related]
        used += sum(record.tokens for record, _ in related)
    out = Recall(query, entries, used, budget, len(ranked), notes, terms, session)
    _after(mem, chosen, used, reinforce, session, terms)
    return out


def _after(
    mem: Memory,
    chosen: list[Hit],
    tokens: int,
    reinforce: bool,
    session: str | None,
    terms: list[str],
) -> None:
    """Reinforce what was returned (as retrieval does) and count it for the session; a
    read-only home is only read."""
    if mem.read_only:
        return
    if reinforce:
        mem.reinforce_later(
            [h.memory.id for h in chosen], {h.explanation.path for h in chosen}, tokens
        )
    if session:
        ids = [h.memory.id for h in chosen]
        hygiene.track(mem, session, ids, hygiene.lessons_used(mem.hot(), terms, ids))


# -- the context block --------------------------------------------------------------------------


@dataclass
class ContextBlock:
    text: str
    query: str | None
    trivial: bool
    budget: int
    always_loaded_tokens: int
    memory_tokens: int
    tokens: int
    memory_ids: list[str]
    left_out: list[str]
    notes: list[str]
    matches: int = 0
    """Memories retrieval found for the message (before the threshold)."""
    top_score: float = 0.0
    """The best relevance among them (core/injection.py)."""
    threshold: float = 0.0
    episode_ids: list[str] = field(default_factory=list)
    episode_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "context": self.text,
            "query": self.query,
            "trivial": self.trivial,
            "tokens": {
                "total": self.tokens,
                "always_loaded": self.always_loaded_tokens,
                "memories": self.memory_tokens,
                "episodes": self.episode_tokens,
                "budget": self.budget,
                "always_loaded_limit": min(ALWAYS_LOADED_MAX_TOKENS, self.budget),
            },
            "memories": self.memory_ids,
            "episodes": self.episode_ids,
            "match_count": self.matches,
            "injected_count": len(self.memory_ids),
            "top_score": round(self.top_score, 4),
            "threshold": self.threshold,
            "left_out": self.left_out,
            "notes": self.notes,
        }


MEMORIES_HEADING = "## Relevant memories"
FACTS_HEADING = "## Current facts"
MAX_FACTS = 6


def _add_current_facts(
    mem: Memory, out: ContextBlock, query: str, as_of: float | None, hits: list[Hit]
) -> None:
    """What the knowledge graph holds true about what the message names, with what each fact
    replaced ("lives in Porto since 2026-10-17 (before: Lisbon)"), within a quarter of the
    budget left (nothing when the agent has no graph)."""
    if not mem.reads.view()[2][0]:
        return
    answered = current.answered_attributes(query, [(h.explanation.via, h.memory) for h in hits])
    lines = graphhistory.current_facts(mem, mem.agent_id, query, as_of, MAX_FACTS, answered)
    room = (out.budget - out.tokens) // 4
    while lines:
        text = f"\n{FACTS_HEADING}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n"
        if count_tokens(text) <= room:
            out.text += text
            out.tokens = count_tokens(out.text)
            return
        lines.pop()


def off_block(agent_id: str, query: str | None, budget: int) -> ContextBlock:
    """The block of an agent whose memory is off: empty (an agent integration injects nothing
    and carries on), with a note saying why; needs no memory opened."""
    off = f"memory is off for agent {agent_id!r} ([agents.{agent_id}] memory = false)"
    return ContextBlock("", query, True, budget, 0, 0, 0, [], [], [off])


def build_context(
    mem: Memory,
    query: str | None = None,
    *,
    budget: int = DEFAULT_CONTEXT_BUDGET,
    session: str | None = None,
    threshold: float | None = None,
    as_of: float | None = None,
) -> ContextBlock:
    """The block to put in the prompt before answering `query` (module doc): its whole text,
    `tokens`, is at most `budget`. Only memories whose relevance reaches `threshold` (default
    `[context] threshold`) are injected; episode abstracts have their own budget."""
    if budget < 1:
        raise InvalidInput(f"token budget must be at least 1 (got {budget})")
    if not mem.cfg.memory_on(mem.agent_id):
        return off_block(mem.agent_id, query, budget)
    floor = injection.check_threshold(mem.cfg.context.threshold if threshold is None else threshold)
    if session is not None:
        session = hygiene.check_session(session)
    mem.read_back_memory_md()  # hand edits of MEMORY.md are part of hot memory
    base = always_loaded(mem, min(ALWAYS_LOADED_MAX_TOKENS, budget))
    out = ContextBlock(base.text, query, True, budget, base.tokens, 0, 0, [], base.left_out, [])
    out.threshold = floor
    out.trivial = query is None or is_trivial(query)
    if query is not None and out.trivial:
        out.notes.append("trivial message: only the always-loaded part")
    out.text = base.text + working.task_sections(
        mem, query, session, budget - base.tokens, out.notes
    )
    out.tokens = count_tokens(out.text)
    head = out.text
    chosen: list[Hit] = []
    terms: list[str] = []
    if not out.trivial and query is not None:
        hygiene.archive_expired(mem)
        result = mem.retrieve(
            query, limit=mem.cfg.retrieval.candidate_pool, reinforce=False, as_of=as_of
        )
        terms = result.terms
        out.notes += result.notes
        _add_current_facts(mem, out, query, as_of, result.hits)
        facts = out.text[len(head) :]
        room = min(mem.cfg.context.episode_tokens, budget - out.tokens)
        eps = injection.episode_block(mem, query, terms, room, floor)
        chosen, episodes = _inject(out, result.hits, terms, floor, eps)
        if reordered := injection.answer_first(out.text, head, facts, episodes, budget):
            out.text, out.tokens = reordered, count_tokens(reordered)
    out.memory_tokens = out.tokens - out.always_loaded_tokens - out.episode_tokens
    if chosen or session:
        _after(mem, chosen, out.tokens - base.tokens, bool(chosen), session, terms)
    return out


def _inject(
    out: ContextBlock,
    hits: list[Hit],
    terms: list[str],
    floor: float,
    eps: injection.EpisodeBlock,
) -> tuple[list[Hit], str]:
    """Fill `out` with the memories above the threshold that fit, then the episode abstracts
    (returned too)."""
    kept, out.top_score = injection.above(hits, terms, floor)
    out.matches = len(hits)
    if hits and not kept:
        out.notes.append(f"no memory reaches the relevance threshold {floor:g}")
    heading = f"\n{MEMORIES_HEADING}\n\n"
    episodes_text = injection.section(eps)
    room = out.budget - out.tokens - count_tokens(episodes_text) - count_tokens(heading)
    fitted = fit(kept, _line_cost, room, len(kept), _shorten_line)
    lines = [(_memory_line(hit), hit) for hit in fitted]
    out.text, chosen, episodes_text = injection.assemble(
        out.text, lines, episodes_text, heading, out.budget
    )
    out.tokens, out.episode_tokens = count_tokens(out.text), count_tokens(episodes_text)
    out.episode_ids = eps.ids if episodes_text else []
    out.memory_ids = [h.memory.id for h in chosen]
    return chosen, episodes_text


def _line_cost(hit: Hit) -> int:
    return count_tokens(_memory_line(hit) + "\n")


def _shorten_line(hit: Hit, room: int) -> Hit | None:
    """The hit with its text cut so that its whole line fits `room` tokens."""
    frame = _line_cost(dataclasses.replace(hit, memory=dataclasses.replace(hit.memory, text="")))
    return _shorten_hit(hit, room - frame) if room - frame > 0 else None


def _memory_line(hit: Hit) -> str:
    e = hit.explanation
    where = e.path or "root"
    if e.space is not None:
        where = f"space {e.space}: {where}"
    line = f"- [{where}] {hit.memory.text} (id {hit.memory.id}"
    if e.written_by:
        line += f", by {e.written_by}"
    if e.supersession and not e.supersession.startswith("the current"):
        line += f"; {e.supersession.split(':', 1)[0]}"
    return line + ")"
