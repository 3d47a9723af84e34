"""The command palette also finds memories (by the read-only retrieval of the Memories screen)
and tree nodes; choosing one opens it on its screen (a memory: its row and detail). Commands come from the app's own list.
A hit quotes memory text, categories and node descriptions: all of it is shown as written,
never read as markup."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING

from textual.command import Hit, Hits, Provider
from textual.content import Content
from textual.fuzzy import Matcher

from tiermem.core.engine import Memory
from tiermem.core.printable import printable
from tiermem.tui.app.screens.memories import MemoriesScreen, search_as_you_type
from tiermem.tui.app.screens.tree import TreeScreen
from tiermem.tui.app.widgets.format import literal

if TYPE_CHECKING:
    from tiermem.core.tree import TreeIndex

MEMORY_HITS = 8


class MemoryProvider(Provider):
    """Memories and tree nodes of the open agent."""

    async def search(self, query: str) -> Hits:
        memory: Memory | None = getattr(self.app, "memory", None)
        if memory is None or not query.strip():
            return
        matcher = self.matcher(query)
        tree: TreeIndex = await asyncio.to_thread(memory.trees.load)
        for path, node in sorted(tree.nodes.items()):
            score = matcher.match(f"Tree: {path}")
            if score > 0:
                yield Hit(
                    score,
                    highlight(matcher, f"Tree: {path}"),
                    partial(self._open_node, path),
                    text=f"Tree: {path}",
                    help=literal(node.description) or None,
                )
        result = await asyncio.to_thread(search_as_you_type, memory, query, None, None)
        for rank, hit in enumerate(result.hits[:MEMORY_HITS]):
            text = printable(" ".join(hit.memory.text.split()))
            shown = text if len(text) <= 70 else text[:69] + "…"
            yield Hit(
                0.9 - rank * 0.05,
                Content(f"Memory: {shown}"),
                partial(self._open_memory, hit.memory.id),
                text=f"Memory: {shown}",
                help=literal(f"{hit.memory.category} · {hit.memory.tier}"),
            )

    async def _open_node(self, path: str) -> None:
        await self.app.switch_mode("tree")
        if isinstance(self.app.screen, TreeScreen):
            self.app.screen.select_path(path)

    async def _open_memory(self, memory_id: str) -> None:
        await self.app.switch_mode("memories")
        if isinstance(self.app.screen, MemoriesScreen):
            self.app.screen.open_memory(memory_id)


def highlight(matcher: Matcher, candidate: str) -> Content:
    """`matcher.highlight` for text that is data: the same marks, but `candidate` is taken as
    written (the matcher's own reads it as markup)."""
    content = Content(candidate)
    _, offsets = matcher.fuzzy_search.match(matcher.query, candidate)
    for offset in offsets:
        if not candidate[offset].isspace():
            content = content.stylize(matcher.match_style, offset, offset + 1)
    return content
