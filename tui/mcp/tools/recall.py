"""Finding memories: recall within a budget, search every tier, the prompt's context block."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from tiermem.core import context as ctx
from tiermem.core import hygiene, temporal
from tiermem.core.engine import Memory
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import SESSION_DOC, ToolSpec


def memory_recall(
    home: Home,
    query: Annotated[str, Field(description="What to recall, in natural language.")],
    categories: Annotated[
        list[str] | None, Field(description="Only these categories (and below).")
    ] = None,
    priority_min: Annotated[
        Literal["critical", "high", "medium", "low"] | None,
        Field(description="Leave out entries below this priority."),
    ] = None,
    token_budget: Annotated[
        int,
        Field(
            ge=1,
            description="Most tokens of the entries' text (the best one always, shortened "
            "if need be).",
        ),
    ] = ctx.DEFAULT_RECALL_BUDGET,
    format: Annotated[  # noqa: A002 (the tool's published parameter name)
        Literal["brief", "detailed"],
        Field(description="brief, or detailed (scores, metadata, explanation)."),
    ] = "brief",
    tags: Annotated[
        list[str] | None, Field(description="Only entries carrying all these tags.")
    ] = None,
    include_context: Annotated[
        bool, Field(description="Add the memories linked to the entries, in the same budget.")
    ] = False,
    as_of: Annotated[
        str | None,
        Field(description="What was true on this date (YYYY-MM-DD): later facts left out."),
    ] = None,
    session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
) -> dict[str, Any]:
    return home.run(
        lambda mem: ctx.recall(
            mem,
            query,
            categories=categories or [],
            priority_min=priority_min,
            budget=token_budget,
            fmt=format,
            session=home.session_for(session_id),
            tags=tags or [],
            include_context=include_context,
            as_of=_as_of(as_of),
        ).as_dict()
    )


def memory_search(
    home: Home,
    query: Annotated[str, Field(description="Keywords or a question.")],
    limit: Annotated[int, Field(ge=1, le=100, description="Most results.")] = 10,
    tier: Annotated[
        Literal["warm", "cold", "frozen", "all"] | None,
        Field(description="Only this tier (cold includes frozen)."),
    ] = None,
    category: Annotated[str | None, Field(description="Only this category and below.")] = None,
    tags: Annotated[
        list[str] | None, Field(description="Only memories carrying all these tags.")
    ] = None,
    as_of: Annotated[
        str | None,
        Field(description="What was true on this date (YYYY-MM-DD): later facts left out."),
    ] = None,
    session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
) -> dict[str, Any]:
    def work(mem: Memory) -> dict[str, Any]:
        result = mem.retrieve(
            query, limit=limit, tier=tier, category=category, tags=tags or [], as_of=_as_of(as_of)
        )
        hygiene.track_result(mem, home.session_for(session_id), result)
        return {
            "query": query,
            "terms": result.terms,
            "tree_matches": [{"path": c.path, "reason": c.reason} for c in result.categories],
            "candidates": result.candidates,
            "notes": result.notes,
            "results": [
                {
                    "id": h.memory.id,
                    "category": h.memory.category,
                    "content": h.memory.text,
                    "tier": h.memory.tier,
                    "priority": ctx.priority_of(h.memory.importance),
                    "score": round(h.explanation.score, 4),
                    "tags": list(h.explanation.tags),
                    "why": ctx.why(h),
                }
                | ctx.source_fields(h)
                for h in result.hits
            ],
        }

    return home.run(work)


def memory_context(
    home: Home,
    message: Annotated[
        str | None, Field(description="The user's message (none: always-loaded part).")
    ] = None,
    token_budget: Annotated[
        int, Field(ge=1, description="Most tokens of the whole block.")
    ] = ctx.DEFAULT_CONTEXT_BUDGET,
    as_of: Annotated[
        str | None,
        Field(description="What was true on this date (YYYY-MM-DD): later facts left out."),
    ] = None,
    session_id: Annotated[str | None, Field(description=SESSION_DOC)] = None,
) -> dict[str, Any]:
    return home.run(
        lambda mem: ctx.build_context(
            mem,
            message,
            budget=token_budget,
            session=home.session_for(session_id),
            as_of=_as_of(as_of),
        ).as_dict(),
        when_off=lambda: ctx.off_block(home.agent_id, message, token_budget).as_dict(),
    )


def _as_of(value: str | None) -> float | None:
    return None if value is None else temporal.parse_day(value, "as_of")


RECALL = ToolSpec(
    "memory_recall",
    memory_recall,
    "Recall the memories relevant to a query within a token budget (their text fits it; "
    "the best one always comes back, shortened if need be), best first, each with why it "
    "was found. Filters: categories (each with its subcategories), a minimum priority, "
    "tags (also `tag:T` in the query); include_context adds linked memories. What is true now "
    "comes first: a superseded memory ranks below what replaced it and says so; as_of answers "
    "what was true on a date.",
)
SEARCH = ToolSpec(
    "memory_search",
    memory_search,
    "Search every tier (warm, cold archive) by keywords through the category tree; "
    "results carry their explanation. No budget: use memory_recall for context.",
)
CONTEXT = ToolSpec(
    "memory_context",
    memory_context,
    "The block to put in the prompt before answering a message: the relevant memories "
    "(the current one first) and current facts, then hot memory and the tree index (under "
    "1,500 tokens together), all within the budget, with the session's working memory and "
    "the accepted skills the message triggers. A trivial message (under 3 meaningful "
    "words, not a question) gets the always-loaded part.",
)
