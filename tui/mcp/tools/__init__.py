"""The MCP tools, one small module per group, and the registry the server publishes in order."""

from tiermem.tui.mcp.tools import (
    audit,
    changes,
    conversation,
    graph,
    hot,
    hygiene,
    recall,
    store,
    working,
)
from tiermem.tui.mcp.tools.base import ToolSpec

TOOLS: tuple[ToolSpec, ...] = (
    store.STORE,
    recall.RECALL,
    recall.SEARCH,
    store.GET,
    store.UPDATE,
    changes.SUPERSEDE,
    changes.UNSUPERSEDE,
    changes.CHANGES,
    hot.HOT,
    audit.INDEX_STATUS,
    audit.AUDIT,
    hygiene.FORGET,
    hygiene.PIN,
    hygiene.RESTORE,
    recall.CONTEXT,
    working.GET,
    working.UPDATE,
    conversation.CONVERSATION_END,
    hygiene.HEALTH,
    graph.EPISODE_SEARCH,
    graph.EPISODE_LIST,
    graph.EPISODE_GET,
    graph.KNOWLEDGE_GRAPH_SEARCH,
    graph.KNOWLEDGE_GRAPH_TIMELINE,
    graph.KNOWLEDGE_GRAPH_ADD,
    graph.KNOWLEDGE_GRAPH_INVALIDATE,
)
"""Every tool, in the order clients list them (and packaging/openclaw/TOOLS.md shows them)."""

__all__ = ["TOOLS", "ToolSpec"]
