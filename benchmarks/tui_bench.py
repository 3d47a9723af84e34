"""TUI benchmark on a generated home: time to first paint, and search keystroke-to-results.

    .venv/bin/python -m benchmarks.tui_bench [--memories 100000] [--queries 60] [--seed 7]

Builds a fresh home in a temp folder with the generated "5-year agent" of `core_bench`, then
drives the real app headless (Textual's Pilot) and prints medians. Targets: first
paint < 1 s, search update < 50 ms p50.

- first paint: from creating the app to its first screen composed and drawn (the dashboard,
  its data still loading); "dashboard data" is when its gauges are filled.
- search: on the Memories screen with the query minus its last letter already typed, from the
  last key press to the table holding the retrieval results for the full query (the worker's
  retrieval with the last word as a prefix, the message back, and the table filled). Also the
  process CPU time of that interval: on a shared, loaded machine the wall time includes waiting
  for a core, the CPU time does not. The load average is printed with the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from textual import events

from benchmarks.agent_gen import generate, queries
from tiermem.core.engine import Memory
from tiermem.tui.app import TiermemApp
from tiermem.tui.app.screens.memories import MemoriesScreen
from tiermem.tui.app.widgets.gauge import Gauge
from tiermem.tui.app.widgets.memory_table import MemoryTable

YEAR = 365.25 * 86400.0


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def build_home(home: Path, n: int, seed: int) -> float:
    now = time.time()
    facts = list(generate(n, seed, now - 5 * YEAR))
    started = time.perf_counter()
    with Memory(home) as mem:
        for lo in range(0, len(facts), 1000):
            mem.store_many(facts[lo : lo + 1000])
        mem.consolidate("quick")
    return time.perf_counter() - started


async def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("the app did not get there")
        await asyncio.sleep(0.0005)


async def first_paint(home: Path) -> tuple[float, float]:
    started = time.perf_counter()
    app = TiermemApp(home, watch=False)
    async with app.run_test(size=(120, 40)) as pilot:
        painted = time.perf_counter() - started  # run_test yields after the first refresh
        gauge = app.screen.query_one("#g-hot", Gauge)
        await wait_for(lambda: gauge.value != "…")
        data = time.perf_counter() - started
        await pilot.pause()
    return painted, data


async def memories_first_page(app: TiermemApp) -> tuple[float, float]:
    """Wall and CPU seconds from pressing `3` on the dashboard to the Memories screen drawn with
    its first page (with no memory opened: to the screen drawn, Textual's own cost)."""
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await asyncio.sleep(0.5)  # the dashboard's data loaded, the app idle
        started, cpu_started = time.perf_counter(), time.process_time()
        await pilot.press("3")
        screen = app.screen
        assert isinstance(screen, MemoriesScreen)
        if app.memory is not None:
            await wait_for(lambda: screen.shown_serial == screen.serial and screen.serial > 0)
        drawn(app)
        return time.perf_counter() - started, time.process_time() - cpu_started


def drawn(app: TiermemApp) -> None:
    """Lay out and draw what is pending now, as the screen's refresh timer would next (what
    Pilot does after a pause): both sides of a figure end with their screen drawn."""
    app.screen._on_timer_update()


async def search_latency(home: Path, qs: list[str]) -> tuple[list[float], list[float]]:
    app = TiermemApp(home, watch=False)
    times: list[float] = []
    cpu: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        started = time.perf_counter()
        await pilot.press("3")
        screen = app.screen
        assert isinstance(screen, MemoriesScreen)
        await wait_for(lambda: screen.shown_serial == screen.serial and screen.serial > 0)
        search = screen.query_one("#search")
        search.focus()
        table = screen.query_one(MemoryTable)
        driver = app._driver
        assert driver is not None
        for q in qs:
            search.value = q[:-1]  # type: ignore[attr-defined]
            await wait_for(lambda: screen.shown_serial == screen.serial)
            await pilot.pause()
            before = screen.serial
            key = events.Key(q[-1], q[-1])  # what the terminal driver sends for a key press
            key.set_sender(app)
            started, cpu_started = time.perf_counter(), time.process_time()
            driver.send_message(key)
            await wait_for(lambda b=before: screen.shown_serial > b)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
            assert table.row_count >= 0
    return times, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5, help="first-paint runs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tiermem-tui-bench-") as tmp:
        home = Path(tmp) / "home"
        built = build_home(home, args.memories, args.seed)
        print(f"home: {args.memories:,} memories generated and stored in {built:.1f} s")
        paints = [asyncio.run(first_paint(home)) for _ in range(args.runs)]
        ms = 1000.0
        painted = [p for p, _ in paints]
        data = [d for _, d in paints]
        print(
            f"first paint: median {statistics.median(painted) * ms:.0f} ms "
            f"(min {min(painted) * ms:.0f}, max {max(painted) * ms:.0f}; target < 1000 ms) | "
            f"dashboard data shown: median {statistics.median(data) * ms:.0f} ms"
        )
        pages = [asyncio.run(memories_first_page(TiermemApp(home, watch=False))) for _ in range(5)]
        print(
            f"memories screen, first page shown: median {statistics.median(p for p, _ in pages) * ms:.0f}"
            f" ms, CPU {statistics.median(c for _, c in pages) * ms:.0f} ms (target < 300 ms idle)"
        )
        qs = [q for q in queries(args.queries, args.seed + 1) if len(q) > 2]
        times, cpu = asyncio.run(search_latency(home, qs))
        print(
            f"search keystroke → results: p50 {statistics.median(times) * ms:.1f} ms, "
            f"p95 {percentile(times, 95) * ms:.1f} ms, p99 {percentile(times, 99) * ms:.1f} ms "
            f"over {len(times)} queries (target p50 < 50 ms) | CPU time p50 "
            f"{statistics.median(cpu) * ms:.1f} ms, p95 {percentile(cpu, 95) * ms:.1f} ms"
        )
        print(f"load average while measuring: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
