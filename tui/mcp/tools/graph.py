"""Episodes and the knowledge graph: episode search and reading, knowledge-graph search."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from tiermem.core import episodes, scoped
from tiermem.core.graph import edit, view
from tiermem.core.graph.dates import parse_when
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.base import ToolSpec


def episode_search(
    home: Home,
    query: Annotated[str, Field(description="Words to look for in past conversations.")],
    limit: Annotated[int, Field(ge=1, le=50, description="Most episodes returned.")] = 5,
) -> dict[str, Any]:
    def run(mem: Any) -> dict[str, Any]:
        found = episodes.search(mem.db, mem.agent_id, query, limit)
        return {
            "query": query,
            "episodes": [e.as_dict() | {"relevance": round(r, 4)} for e, r in found],
        }

    return home.run(run)


def episode_list(
    home: Home,
    limit: Annotated[int, Field(ge=1, le=100, description="Most episodes returned.")] = 10,
) -> dict[str, Any]:
    return home.run(
        lambda mem: {
            "episodes": [e.as_dict() for e in episodes.recent(mem.db, mem.agent_id, limit)]
        }
    )


def episode_get(
    home: Home, episode_id: Annotated[str, Field(description="The episode's id.")]
) -> dict[str, Any]:
    return home.run(lambda mem: episodes.get(mem.db, mem.agent_id, episode_id).as_dict())


AT_DOC = "As of this date (YYYY-MM-DD, YYYY-MM or e.g. 'March 3'): what was true then."


def _when(mem: Any, text: str | None) -> float | None:
    return None if text is None or not text.strip() else parse_when(text, mem.now())


def knowledge_graph_search(
    home: Home,
    query: Annotated[
        str,
        Field(
            description="A question ('where does Sam live', 'who is my manager', 'what does "
            "Orchard use for its queue') or an entity's name or part of it."
        ),
    ],
    entity: Annotated[
        bool, Field(description="Return the best entity in full (relations, mentions).")
    ] = False,
    at: Annotated[str | None, Field(description=AT_DOC)] = None,
) -> dict[str, Any]:
    def run(mem: Any) -> dict[str, Any]:
        return scoped.graph_search(mem, query, at=_when(mem, at), entity=entity)

    return home.run(run)


def knowledge_graph_timeline(
    home: Home,
    entity: Annotated[str, Field(description="The entity's name, alias or id ('I' is the user).")],
) -> dict[str, Any]:
    return home.run(lambda mem: view.timeline(mem, "User" if entity.strip() == "I" else entity))


def knowledge_graph_add(
    home: Home,
    subject: Annotated[str, Field(description="Who or what ('I' or 'User' is the user).")],
    predicate: Annotated[
        str, Field(description="lives_in, works_at, reports_to, role, uses_database, leads…")
    ],
    object: Annotated[  # noqa: A002 (the tool's published parameter name)
        str, Field(description="The value: a place, company, person, tool…")
    ],
    since: Annotated[str | None, Field(description="When it began (default: now).")] = None,
) -> dict[str, Any]:
    return home.run(lambda mem: edit.add(mem, subject, predicate, object, _when(mem, since)))


def knowledge_graph_invalidate(
    home: Home,
    edge_id: Annotated[str | None, Field(description="The relation's id (re-…).")] = None,
    subject: Annotated[str | None, Field(description="Or: whose relation.")] = None,
    predicate: Annotated[str | None, Field(description="With subject: which relation.")] = None,
    object: Annotated[  # noqa: A002 (the tool's published parameter name)
        str | None, Field(description="With subject: only this value.")
    ] = None,
    at: Annotated[str | None, Field(description="When it ended (default: now).")] = None,
) -> dict[str, Any]:
    target = [edge_id] if edge_id else [t for t in (subject, predicate, object) if t]

    def run(mem: Any) -> dict[str, Any]:
        return edit.invalidate(mem, target, _when(mem, at))

    return home.run(run)


EPISODE_SEARCH = ToolSpec(
    "episode_search",
    episode_search,
    "Search past conversations (episodes): summary, key topics, participants, time span, "
    "the facts distilled from each.",
)
EPISODE_LIST = ToolSpec("episode_list", episode_list, "The most recent episodes (conversations).")
EPISODE_GET = ToolSpec("episode_get", episode_get, "One episode in full, by id.")
KNOWLEDGE_GRAPH_SEARCH = ToolSpec(
    "knowledge_graph_search",
    knowledge_graph_search,
    "Ask the knowledge graph a question ('where does Sam live', 'who is my manager'): the "
    "answer that holds now (or `at` a date) first, then what held before with its time span; "
    "or find entities (people, projects, organisations, places, tools, URLs) by name. The "
    "graphs of the shared spaces the agent includes answer too: each entity and relation "
    "names its `space` (null: the agent's own, which comes first among equals).",
)
KNOWLEDGE_GRAPH_TIMELINE = ToolSpec(
    "knowledge_graph_timeline",
    knowledge_graph_timeline,
    "One entity's relations in time order, each with the window it held in.",
)
KNOWLEDGE_GRAPH_ADD = ToolSpec(
    "knowledge_graph_add",
    knowledge_graph_add,
    "Correct the knowledge graph: state subject–predicate–object from a date; the slot's "
    "older value (where they lived, worked…) ends there.",
)
KNOWLEDGE_GRAPH_INVALIDATE = ToolSpec(
    "knowledge_graph_invalidate",
    knowledge_graph_invalidate,
    "Correct the knowledge graph: end a relation (by id, or what holds of subject and "
    "predicate, optionally object) at a date.",
)
