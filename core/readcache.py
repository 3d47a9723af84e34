"""What a read reuses from the previous read while nothing was written: the tree index, whether
any memory of the agent carries a tag (most homes have none, so a search skips its two tag
queries), whether the agent has any entity or episode to consult (if neither, a search
neither asks the graph nor loads its code; without episodes it skips their search), and the
graph lookups of earlier searches (`memo`: the entities a name means, who an entity reaches).

The mark is SQLite's own: `data_version` moves when another connection commits and
`total_changes()` when this one changes a row. Inside a transaction nothing is cached (a
rollback would leave the cache ahead of the database).
"""

from __future__ import annotations

import threading

from tiermem.core.db import Database
from tiermem.core.tree import TreeIndex, TreeStore

_MARK = "SELECT total_changes(), data_version FROM pragma_data_version"

GraphKinds = tuple[bool, bool]
"""Whether the agent has (any entity, any episode)."""

MEMO_MAX = 20_000
"""Entries the memo keeps before it starts over (a long read-only session asks many names)."""


class ReadCache:
    """Per-connection results of reads, dropped whenever the database changed."""

    def __init__(self, db: Database, trees: TreeStore) -> None:
        self.db = db
        self.trees = trees
        self._mark: tuple[object, ...] | None = None
        self._tree: TreeIndex | None = None
        self._tagged: bool | None = None
        self._graphed: GraphKinds | None = None
        self._memo: dict[object, object] = {}
        self._lock = threading.Lock()  # a front end reads from several threads

    def _valid(self) -> bool:
        if self.db.in_transaction:
            self._mark = None
            return False
        mark = self.db.query_one(_MARK)
        if mark != self._mark:
            self._mark, self._tree, self._tagged, self._graphed = mark, None, None, None
            self._memo = {}
        return True

    def view(self) -> tuple[TreeIndex, bool, GraphKinds]:
        """The agent's tree index without counts (shared between reads: never change it),
        whether any memory of the agent carries a tag, and whether the agent has any entity and
        any episode."""
        with self._lock:
            return self._view()

    def memo(self) -> dict[object, object]:
        """Results a read may keep for the next one, as of the last `view` (the caller's keys;
        an empty dict that nothing keeps while a transaction is open)."""
        with self._lock:
            if self._mark is None:
                return {}
            if len(self._memo) > MEMO_MAX:
                self._memo = {}
            return self._memo

    def _view(self) -> tuple[TreeIndex, bool, GraphKinds]:
        if not self._valid():
            return self.trees.load(), self._any_tags(), self._any_graph()
        if self._tree is None:
            self._tree = self.trees.load()
        if self._tagged is None:
            self._tagged = self._any_tags()
        if self._graphed is None:
            self._graphed = self._any_graph()
        return self._tree, self._tagged, self._graphed

    def _any_tags(self) -> bool:
        return bool(
            self.db.scalar(
                "SELECT EXISTS (SELECT 1 FROM memory_extras WHERE agent_id = ? AND tags != '')",
                (self.trees.agent_id,),
            )
        )

    def _any_graph(self) -> GraphKinds:
        agent = self.trees.agent_id
        row = self.db.query_one(
            "SELECT EXISTS (SELECT 1 FROM entity_names WHERE agent_id = ?), "
            "EXISTS (SELECT 1 FROM episodes WHERE agent_id = ?)",
            (agent, agent),
        )
        return (False, False) if row is None else (bool(row[0]), bool(row[1]))
