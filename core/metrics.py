"""Per-day metrics of one agent: counters bumped by events, gauges snapshotted on demand.

Context tokens saved compare the tiered context (hot + tree + retrieved memories) with a flat
MEMORY.md that holds everything (hot + every stored memory): per retrieval the saving is
`flat − (hot + tree + results)` = `all memories − tree − results` tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tiermem.core.db import Database

COUNTERS = ("retrievals", "evictions", "promotions", "stores", "context_tokens")
GAUGES = (
    "flat_tokens",
    "warm_bytes",
    "warm_count",
    "cold_count",
    "hot_bytes",
    "hot_tokens",
    "tree_nodes",
    "tree_bytes",
    "tree_tokens",
)


def day_of(ts: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


@dataclass(frozen=True)
class DayMetrics:
    """One day's counters and gauges of an agent's memory."""

    day: str
    retrievals: int
    evictions: int
    promotions: int
    stores: int
    context_tokens: int
    """Tokens of the memories returned by the day's retrievals."""
    flat_tokens: int
    """Tokens of every stored memory (what a flat MEMORY.md would add to hot)."""
    warm_bytes: int
    warm_count: int
    cold_count: int
    hot_bytes: int
    hot_tokens: int
    tree_nodes: int
    tree_bytes: int
    tree_tokens: int

    @property
    def tokens_saved(self) -> int:
        """Tokens kept out of the agent's context by the day's retrievals. Negative for a very
        young agent, whose tree index costs more than its few memories would."""
        per_retrieval = self.flat_tokens - self.tree_tokens
        return self.retrievals * per_retrieval - self.context_tokens


class MetricsStore:
    def __init__(self, db: Database, agent_id: str) -> None:
        self.db = db
        self.agent_id = agent_id

    def bump(self, now: float, **counts: int) -> None:
        """Add to today's counters (inside the caller's transaction)."""
        self._upsert(now, counts, COUNTERS, "{n} = {n} + excluded.{n}")

    def snapshot(self, now: float, **gauges: int) -> None:
        """Set today's gauges."""
        self._upsert(now, gauges, GAUGES, "{n} = excluded.{n}")

    def _upsert(
        self, now: float, values: dict[str, int], allowed: tuple[str, ...], update: str
    ) -> None:
        unknown = set(values) - set(allowed)
        if unknown:
            raise ValueError(f"unknown metrics {sorted(unknown)}")
        names = list(values)
        sets = ", ".join(update.format(n=n) for n in names)
        self.db.execute(
            f"INSERT INTO metrics_daily (agent_id, day, {', '.join(names)}) "
            f"VALUES (?, ?, {', '.join('?' * len(names))}) "
            f"ON CONFLICT (agent_id, day) DO UPDATE SET {sets}",
            (self.agent_id, day_of(now), *[int(values[n]) for n in names]),
        )

    def history(self, days: int) -> list[DayMetrics]:
        """The most recent `days` days that have a row, oldest first."""
        rows = self.db.query(
            f"SELECT day, {', '.join(COUNTERS + GAUGES)} FROM metrics_daily "
            "WHERE agent_id = ? ORDER BY day DESC LIMIT ?",
            (self.agent_id, days),
        )
        names = ("day", *COUNTERS, *GAUGES)
        out = [DayMetrics(**dict(zip(names, r, strict=True))) for r in rows]
        return out[::-1]
