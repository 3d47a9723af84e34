"""Dashboard: every tier against its limit, today's activity, and the sync state."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Static

from tiermem.core import curate
from tiermem.core.config import Config
from tiermem.core.engine import Memory
from tiermem.core.metrics import DayMetrics, day_of
from tiermem.tui.screens.base import DataScreen
from tiermem.tui.screens.sync import SyncView, sync_view
from tiermem.tui.widgets.format import compact, count, kib, stamp
from tiermem.tui.widgets.gauge import Gauge


@dataclass(frozen=True)
class DashboardData:
    cfg: Config
    today: DayMetrics
    hot_tokens: int
    frozen_count: int
    pinned: int
    forgotten: int
    sync: SyncView


def live_today(mem: Memory) -> tuple[DayMetrics, int]:
    """Today's counters with the gauges measured now (read-only: nothing is written)."""
    today = day_of(mem.now())
    base = next((d for d in mem.metrics.history(3) if d.day == today), None)
    zero = dict.fromkeys(("retrievals", "evictions", "promotions", "stores", "context_tokens"), 0)
    counters = zero if base is None else {k: getattr(base, k) for k in zero}
    live = DayMetrics(day=today, **counters, **mem.gauges())
    return live, mem.memories.counts()["frozen"]


class DashboardScreen(DataScreen[DashboardData]):
    MODE = "dashboard"

    def compose_body(self) -> ComposeResult:
        with Grid(id="dash"):
            with Vertical(id="tiers", classes="panel"):
                yield Gauge("hot", id="g-hot")
                yield Gauge("warm", id="g-warm")
                yield Gauge("cold", id="g-cold")
                yield Gauge("tree", id="g-tree")
                yield Gauge("", id="g-tree-bytes")
                yield Static("", id="tier-notes")
            yield Static("…", id="today", classes="panel")
            yield Static("…", id="dash-sync", classes="panel")

    def on_mount(self) -> None:
        self.query_one("#tiers").border_title = "Tiers"
        self.query_one("#today").border_title = "Today"
        self.query_one("#dash-sync").border_title = "Sync"

    def fetch(self, memory: Memory) -> DashboardData:
        today, frozen = live_today(memory)
        return DashboardData(
            cfg=memory.cfg,
            today=today,
            hot_tokens=today.hot_tokens,
            frozen_count=frozen,
            pinned=len(curate.pinned_ids(memory.db, memory.agent_id)),
            forgotten=curate.forgotten_count(memory),
            sync=sync_view(memory),
        )

    def show(self, data: DashboardData) -> None:
        t, cfg = data.today, data.cfg
        self.query_one("#g-hot", Gauge).set(
            t.hot_bytes, cfg.hot.max_bytes, f"{count(t.hot_bytes)}/{count(cfg.hot.max_bytes)} B"
        )
        self.query_one("#g-warm", Gauge).set(
            t.warm_bytes,
            cfg.warm.max_bytes,
            f"{kib(t.warm_bytes)}/{cfg.warm.max_bytes // 1024} KB · {count(t.warm_count)}",
        )
        self.query_one("#g-cold", Gauge).set(
            t.cold_count,
            None,
            f"{count(t.cold_count)} archived ({count(data.frozen_count)} frozen)",
        )
        self.query_one("#g-tree", Gauge).set(
            t.tree_nodes, cfg.tree.max_nodes, f"{t.tree_nodes}/{cfg.tree.max_nodes} nodes"
        )
        self.query_one("#g-tree-bytes", Gauge).set(
            t.tree_bytes, cfg.tree.max_bytes, f"{count(t.tree_bytes)}/{count(cfg.tree.max_bytes)} B"
        )
        self.query_one("#tier-notes", Static).update(
            f"[dim]hot {t.hot_tokens} tokens · {data.pinned} pinned · "
            f"{data.forgotten} forgotten[/dim]"
        )
        self.query_one("#today", Static).update(
            f"[b]{t.day}[/b]\n"
            f"retrievals    {count(t.retrievals)}\n"
            f"evictions     {count(t.evictions)}\n"
            f"stored        {count(t.stores)}   promoted {count(t.promotions)}\n"
            f"tokens saved  [b]{compact(t.tokens_saved)}[/b]"
        )
        s = data.sync
        self.query_one("#dash-sync", Static).update(
            f"{s.state} · outbox [b]{len(s.outbox)}[/b] pending · last push "
            f"{stamp(s.last_push)} · next retry {stamp(s.next_retry) if s.next_retry else '-'}\n"
            f"last error {s.last_error or '-'}"
        )
