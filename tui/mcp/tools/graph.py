"""Episodes and the knowledge graph: episode search and reading, knowledge-graph search."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from tiermem.core import episodes
from tiermem.core.graph import view
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


def knowledge_graph_search(
    home: Home,
    query: Annotated[str, Field(description="An entity's name or part of it.")],
    entity: Annotated[
        bool, Field(description="Return the best entity in full (relations, mentions).")
    ] = False,
) -> dict[str, Any]:
    def run(mem: Any) -> dict[str, Any]:
        found = view.search(mem, query)
        if entity and found["entities"]:
            found["entity"] = view.entity_view(mem, found["entities"][0]["id"])
        return found

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
    "Entities (people, projects, organisations, places, tools, URLs) whose names match, with "
    "their relations and time spans: who works on what, who lives where and since when.",
)
