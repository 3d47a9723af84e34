"""Metrics: charts over days (retrievals, evictions, warm size, context tokens saved)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual_plotext import PlotextPlot

from tiermem.core.engine import Memory
from tiermem.core.metrics import DayMetrics
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.screens.dashboard import live_today

RANGES = (7, 30, 90, 365)


@dataclass(frozen=True)
class MetricsData:
    days: int
    history: list[DayMetrics]


def history_with_today(memory: Memory, days: int) -> list[DayMetrics]:
    """The stored days, with today's gauges measured now (read-only)."""
    history = memory.metrics.history(days)
    today, _ = live_today(memory)
    if history and history[-1].day == today.day:
        return [*history[:-1], today]
    return [*history, today][-days:]


CHARTS: tuple[tuple[str, str, str], ...] = (
    ("retrievals", "Retrievals per day", "bar"),
    ("evictions", "Evictions per day", "bar"),
    ("warm_kb", "Warm size (KB)", "line"),
    ("tokens_saved", "Context tokens saved", "bar"),
)


def series(history: list[DayMetrics], name: str) -> list[float]:
    if name == "warm_kb":
        return [d.warm_bytes / 1024 for d in history]
    if name == "tokens_saved":
        return [float(d.tokens_saved) for d in history]
    return [float(getattr(d, name)) for d in history]


class MetricsScreen(DataScreen[MetricsData]):
    MODE = "metrics"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right_square_bracket", "range(1)", "Longer", key_display="]"),
        Binding("left_square_bracket", "range(-1)", "Shorter", key_display="["),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.days = 30

    def compose_body(self) -> ComposeResult:
        with Grid(id="charts"):
            for name, _, _ in CHARTS:
                yield PlotextPlot(id=f"chart-{name}")

    def fetch(self, memory: Memory) -> MetricsData:
        return MetricsData(self.days, history_with_today(memory, self.days))

    def show(self, data: MetricsData) -> None:
        labels = [d.day[5:] for d in data.history]  # MM-DD
        xs = [float(i) for i in range(len(labels))]
        for name, title, kind in CHARTS:
            widget = self.query_one(f"#chart-{name}", PlotextPlot)
            # ticks far enough apart that plotext never has to drop an overlapping label
            room = max(2, (widget.size.width - 12) // 12)
            step = max(1, -(-len(labels) // room))
            plt = widget.plt
            plt.clear_data()
            plt.clear_figure()
            ys = series(data.history, name)
            if kind == "bar":
                plt.bar(xs, ys, marker="hd")
            else:
                plt.plot(xs, ys, marker="braille")
            plt.xticks(xs[::step], labels[::step])
            widget.border_title = f"{title} · {data.days} d"
            widget.refresh()

    def action_range(self, step: int) -> None:
        index = RANGES.index(self.days) if self.days in RANGES else 1
        self.days = RANGES[max(0, min(len(RANGES) - 1, index + step))]
        self.reload()
