"""Dashboard: every tier against its limit, today's activity, and the sync state."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Static

from tiermem.core import curate, episodes
from tiermem.core import graph as graphmod
from tiermem.core.config import Config
from tiermem.core.engine import Memory
from tiermem.core.metrics import DayMetrics, day_of
from tiermem.core.rows import MemoryRow
from tiermem.core.scoring import DAY
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.screens.sync import SyncView, sync_view
from tiermem.tui.app.widgets.format import (
    compact,
    count,
    day,
    kib,
    markup,
    markup_lines,
    one_line,
    spark,
    stamp,
)
from tiermem.tui.app.widgets.gauge import Gauge


@dataclass(frozen=True)
class DashboardData:
    cfg: Config
    today: DayMetrics
    hot_tokens: int
    frozen_count: int
    pinned: int
    forgotten: int
    sync: SyncView
    recent: list[DayMetrics]
    categories: list[tuple[str, int, int]]
    latest: list[MemoryRow]
    """The last `TREND_DAYS` calendar days, oldest first (a day without activity is zeros)."""
    episodes: tuple[int, int]
    """(episodes, of them not yet dreamt into facts)."""
    graph: tuple[int, int]
    """(entities, relations)."""


TREND_DAYS = 14
TOP_CATEGORIES = 10
RECENT = 16


def live_today(mem: Memory) -> tuple[DayMetrics, int]:
    """Today's counters with the gauges measured now (read-only: nothing is written)."""
    today = day_of(mem.now())
    base = next((d for d in mem.metrics.history(3) if d.day == today), None)
    zero = dict.fromkeys(("retrievals", "evictions", "promotions", "stores", "context_tokens"), 0)
    counters = zero if base is None else {k: getattr(base, k) for k in zero}
    live = DayMetrics(day=today, **counters, **mem.gauges())
    return live, mem.memories.counts()["frozen"]


def recent_days(mem: Memory, today: DayMetrics) -> list[DayMetrics]:
    stored = {d.day: d for d in mem.metrics.history(TREND_DAYS)} | {today.day: today}
    now = mem.now()
    days = [day_of(now - i * DAY) for i in range(TREND_DAYS - 1, -1, -1)]
    zero = dict.fromkeys(DayMetrics.__dataclass_fields__, 0)
    del zero["day"]
    return [stored.get(d) or DayMetrics(day=d, **zero) for d in days]


def busiest(mem: Memory, n: int = TOP_CATEGORIES) -> list[tuple[str, int, int]]:
    """The top-level categories holding the most memories: (path, warm, cold)."""
    tree = mem.tree()
    top = [(p, tree.nodes[p].warm, tree.nodes[p].cold) for p in tree.children("")]
    return sorted(top, key=lambda x: (-(x[1] + x[2]), x[0]))[:n]


def category_bars(categories: list[tuple[str, int, int]]) -> Content | str:
    """One bar per busy category: its warm memories, then its archived ones."""
    if not categories:
        return "[dim]no categories yet[/dim]"
    widest = max(w + c for _, w, c in categories) or 1
    return markup_lines(
        [
            *(
                markup(
                    f"$path {w + c:>6,}  [$success]{'█' * round(w / widest * 16)}[/]"
                    f"[dim]{'█' * round(c / widest * 16)}[/]",
                    path=f"{one_line(path, 14):<14}",
                )
                for path, w, c in categories
            ),
            markup("[dim]warm █ · archived █[/dim]"),
        ]
    )


class DashboardScreen(DataScreen[DashboardData]):
    MODE = "dashboard"

    def compose_body(self) -> ComposeResult:
        with Vertical(id="dash"):
            with Horizontal(id="dash-top", classes="dash-row"):
                with Vertical(id="tiers", classes="panel"):
                    yield Gauge("hot", id="g-hot")
                    yield Gauge("warm", id="g-warm")
                    yield Gauge("cold", id="g-cold")
                    yield Gauge("tree", id="g-tree")
                    yield Gauge("", id="g-tree-bytes")
                    yield Static("", id="tier-graph")
                    yield Static("", id="tier-notes")
                yield Static("…", id="today", classes="panel")
            yield Static("…", id="dash-sync", classes="panel")
            with Horizontal(id="dash-bottom", classes="dash-row"):
                yield Static("…", id="dash-categories", classes="panel")
                yield Static("…", id="dash-latest", classes="panel")

    def on_mount(self) -> None:
        self.query_one("#tiers").border_title = "Tiers"
        self.query_one("#today").border_title = "Today"
        self.query_one("#dash-sync").border_title = "Sync"
        self.query_one("#dash-categories").border_title = "Busiest categories"
        self.query_one("#dash-latest").border_title = "Latest memories"

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
            recent=recent_days(memory, today),
            categories=busiest(memory),
            latest=[x.record for x in curate.list_memories(memory, limit=RECENT)],
            episodes=(
                episodes.count(memory.db, memory.agent_id),
                episodes.count_unpromoted(memory.db, memory.agent_id),
            ),
            graph=graphmod.store_for(memory).count(),
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
        (n, waiting), (entities, relations) = data.episodes, data.graph
        self.query_one("#tier-graph", Static).update(
            f"episodes [b]{count(n)}[/b] [dim]({count(waiting)} to dream)[/dim] · "
            f"entities [b]{count(entities)}[/b] · relations [b]{count(relations)}[/b]"
        )
        self.query_one("#tier-notes", Static).update(
            f"[dim]hot {t.hot_tokens} tokens · {data.pinned} pinned · "
            f"{data.forgotten} forgotten[/dim]"
        )

        def trend(name: str) -> str:
            values = [float(getattr(d, name)) for d in data.recent]
            return f"  [$accent]{spark(values)}[/]"

        self.query_one("#today", Static).update(
            f"[b]{t.day}[/b]   [dim]last {TREND_DAYS} days →[/dim]\n"
            f"retrievals    {count(t.retrievals):>7}{trend('retrievals')}\n"
            f"evictions     {count(t.evictions):>7}{trend('evictions')}\n"
            f"stored        {count(t.stores):>7}{trend('stores')}\n"
            f"promoted      {count(t.promotions):>7}{trend('promotions')}\n"
            f"tokens saved  [b]{compact(t.tokens_saved):>7}[/b]{trend('tokens_saved')}"
        )
        s = data.sync
        self.query_one("#dash-sync", Static).update(
            markup(
                f"$state · outbox [b]{len(s.outbox)}[/b] pending"
                + (f" + {s.pending_memories} memories" if s.pending_memories else "")
                + f" · last push {stamp(s.last_push)} · next retry "
                f"{stamp(s.next_retry) if s.next_retry else '-'}\n"
                f"last error $error · conflicts {s.open_conflicts} open",
                state=s.state,
                error=s.last_error or "-",
            )
        )
        self.query_one("#dash-categories", Static).update(category_bars(data.categories))
        self.query_one("#dash-latest", Static).update(
            markup_lines(
                markup("[dim]$day[/dim] $text", day=day(m.created_at), text=one_line(m.text, 120))
                for m in data.latest
            )
            if data.latest
            else "[dim]nothing stored yet: s stores a memory[/dim]"
        )
