"""The reads of one `Memory` not written yet, and when they are written.

A read reinforces what it found (access counts, recency, the tree node's activity, the day's
retrievals) without taking the write lock: the counts wait here (`core.reinforce.Pending`) and
the next write transaction of the same `Memory` writes them first, as does a flush or the close.
Token counts a read worked out for memories stored uncounted (`core.tokens.UNCOUNTED`) ride
along. A write that rolls back keeps them for the next one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from tiermem.core import reinforce, tokens
from tiermem.core.metrics import MetricsStore
from tiermem.core.tree import TreeStore
from tiermem.core.warm import MemoryStore


class DeferredReads:
    """What reads of one `Memory` left to write; the `Database` calls `on_begin` at the start of
    each write transaction and `on_rollback` when one rolls back."""

    def __init__(self, memories: MemoryStore, trees: TreeStore, metrics: MetricsStore) -> None:
        self.memories, self.trees, self.metrics = memories, trees, metrics
        self._pending = reinforce.Pending()
        self._lock = threading.Lock()  # reads may come from several threads
        self._writing: reinforce.Pending | None = None
        self._counts_mark = tokens.uncounted_mark()

    def add(self, ids: Sequence[str], paths: Iterable[str], tokens_read: int, now: float) -> None:
        """Keep the reinforcement of a read: these memories and tree paths, its tokens."""
        with self._lock:
            self._pending.add(ids, paths, tokens_read, now)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def hits(self, memory_id: str) -> tuple[int, list[float]]:
        """Reads of `memory_id` not written yet, and their times."""
        return self._pending.hits.get(memory_id, (0, []))

    def counts_changed(self) -> bool:
        """Whether reads counted memories stored uncounted since the counts were last kept."""
        return self._counts_mark != tokens.uncounted_mark()

    def on_begin(self) -> None:
        """Write the pending reads and counts first in the transaction that starts."""
        with self._lock:
            self._writing = self._pending.take() if self._pending else None
        if self._writing is not None:
            reinforce.write(self.memories, self.trees, self.metrics, self._writing)
        mark = tokens.uncounted_mark()
        if mark != self._counts_mark:  # reads counted memories stored uncounted: keep the counts
            self.memories.store_counts()
            self._counts_mark = mark

    def on_rollback(self) -> None:
        """A write that carried pending reads rolled back: they wait for the next one."""
        if self._writing is None:
            return
        with self._lock:
            self._pending.absorb(self._writing)
            self._writing = None
