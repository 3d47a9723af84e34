"""Every benchmark figure in one run: tiermem against a baseline measured in the same run.

    python -m benchmarks                 # default sizes (a few minutes)
    python -m benchmarks --quick         # small sizes, for CI (under 2 minutes)
    python -m benchmarks --size 300000   # retrieval at 300k memories (default 100k, the goal's size)

Prints a table (tiermem, baseline, ratio, goal) with the machine's load average before and
after, and writes it as JSON to benchmarks/out/ (one file per run). On a shared machine the load
shows how far to trust the wall times; the ratios are less sensitive to it than the raw numbers.
The sync figures start a real sqld on loopback (`.sqld/`, see tests/sync/sqld.py), and end
with the sync-scale growth table at its quick sizes (`python -m benchmarks.sync_scale`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks import figures, figures_sync, sync_scale
from benchmarks.figures import Figure
from benchmarks.tui_bench import build_home
from tests.sync.sqld import INSTALL_COMMAND, SqldServer, sqld_binary

OUT = Path(__file__).parent / "out"


@dataclass(frozen=True)
class Sizes:
    facts: int  # batched store and bytes per memory
    singles: int  # single stores
    retrieve: int  # memories for the retrieve figure
    queries: int
    starts: int  # process starts per command
    tui_home: int
    paints: int
    pushes: int
    ends: int  # conversation-ends
    restores: int
    idle: float  # seconds of daemon idling per mode
    restore_mb: float  # records of the fully restored agent


QUICK = Sizes(2_000, 50, 3_000, 40, 5, 1_000, 2, 10, 5, 3, 10.0, 1.0)
FULL = Sizes(20_000, 300, 100_000, 200, 20, 10_000, 5, 50, 20, 10, 60.0, 5.0)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def local_figures(tmp: Path, sizes: Sizes, say: Callable[[str], None]) -> list[Figure]:
    out: list[Figure] = []
    home = tmp / "start-home"
    build_home(home, 1_000, 7)
    say("process start")
    out += figures.start_figures(home, sizes.starts)
    say("process start, handed to the resident process")
    out += figures.resident_start_figures(home, sizes.starts)
    say("store and bytes per memory")
    out += figures.store_figures(tmp, figures.facts_for(sizes.facts), sizes.singles)
    say(f"retrieve at {sizes.retrieve:,}")
    out.append(figures.retrieve_figure(tmp, sizes.retrieve, sizes.queries))
    out.append(figures.retrieve_figure(tmp, sizes.retrieve, sizes.queries, consolidated=True))
    say("TUI first paint")
    tui_home = tmp / "tui-home"
    build_home(tui_home, sizes.tui_home, 7)
    out.append(figures.tui_figure(tui_home, sizes.paints))
    out.append(figures.memories_page_figure(tui_home, sizes.paints))
    return out


def sync_figures(tmp: Path, sizes: Sizes, say: Callable[[str], None]) -> list[Figure]:
    os.environ["TIERMEM_SECRET_STORE"] = "file"  # never the user's keyring
    server = SqldServer(tmp / "sqld")
    server.start()
    try:
        vault = figures_sync.Vault(tmp, server)
        say("push")
        out = [figures_sync.push_figure(vault, sizes.pushes)]
        say("conversation-end to the server")
        out.append(figures_sync.conversation_end_figure(vault, sizes.ends))
        say("restore as a command")
        out += figures_sync.restore_figures(vault, sizes.restores)
        say(f"full restore ({sizes.restore_mb:g} MB, loopback and 100 ms RTT)")
        out += figures_sync.full_restore_figures(tmp, sizes.restore_mb, 0.1)
        say(f"daemon idle CPU ({2 * sizes.idle:.0f} s)")
        out.append(figures_sync.daemon_figure(vault, sizes.idle))
        return out
    finally:
        server.stop()


def table(rows: list[Figure]) -> str:
    head = f"{'figure':<52} {'tiermem':>12} {'baseline':>12} {'ratio':>7} {'goal':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        mark = "" if r.ratio <= r.goal else "  (over)"
        lines.append(
            f"{r.name:<52} {r.tiermem:>9.2f} {r.unit:<2} {r.baseline:>9.2f} {r.unit:<2} "
            f"{r.ratio:>6.2f}x {r.goal:>6.1f}x{mark}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    parser.add_argument("--size", type=int, help="memories for the retrieve figure")
    parser.add_argument("--no-sync", action="store_true", help="skip the sqld figures")
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the JSON")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.size:
        sizes = Sizes(**{**sizes.__dict__, "retrieve": args.size})
    if not args.no_sync and not sqld_binary().is_file():
        print(f"sqld is not installed; run:\n    {INSTALL_COMMAND}\n(or pass --no-sync)")
        return 2
    started, load_before = time.time(), load()

    def say(what: str) -> None:
        """Announce the next figure and start it on a settled heap: what the earlier figures
        left is collected and frozen, so its collections do not slow this one (a figure then
        costs what it would in a process of its own)."""
        gc.collect()
        gc.freeze()
        print(f"[{time.time() - started:6.1f} s, load {load()}] {what}", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="tiermem-benchmarks-") as tmp:
        rows = local_figures(Path(tmp), sizes, say)
        if not args.no_sync:
            rows += sync_figures(Path(tmp), sizes, say)
    load_after = load()
    print(table(rows))
    print(
        f"load average (1, 5, 15 min): {load_before} before, {load_after} after; {os.cpu_count()} CPUs"
    )
    report = {
        "started": started,
        "seconds": time.time() - started,
        "mode": "quick" if args.quick else "full",
        "load_before": load_before,
        "load_after": load_after,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "figures": [r.as_dict() for r in rows],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started))
    path = args.out / f"benchmarks-{stamp}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {path}")
    if not args.no_sync:  # the growth table at small sizes (`python -m benchmarks.sync_scale`)
        return sync_scale.main(["--quick", "--out", str(args.out)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
