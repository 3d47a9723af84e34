"""The local figures of `python -m benchmarks`: each one measures tiermem and its baseline in the
same run and returns a `Figure` (the sync figures are in `benchmarks.figures_sync`)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sysconfig
import tempfile
import time
import venv
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from textual.app import App, ComposeResult
from textual.widgets import Static

from benchmarks.agent_gen import generate, queries
from benchmarks.tui_bench import first_paint, memories_first_page
from tiermem.core.engine import Memory
from tiermem.core.terms import fts_match, query_terms
from tiermem.core.warm import NewFact
from tiermem.tui.app import TiermemApp

YEAR = 365.25 * 86400.0
MS = 1000.0


@dataclass(frozen=True)
class Figure:
    """One line of the table: tiermem against its baseline, measured in the same run."""

    name: str
    tiermem: float
    baseline: float
    unit: str
    goal: float  # the ratio tiermem / baseline should stay at or under this
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.tiermem / self.baseline if self.baseline else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ratio": self.ratio, "met": self.ratio <= self.goal}


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * MS


def mean_ms(samples: Sequence[float]) -> float:
    return statistics.fmean(samples) * MS


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured child process: bytecode caches written and used, as on a
    user's machine (a session may set PYTHONDONTWRITEBYTECODE, which makes every start compile)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | extra


REPO = Path(__file__).resolve().parents[1]


CONSOLE_SCRIPT = """#!{python}
import sys
from tiermem.tui.entry import main
if __name__ == '__main__':
    sys.exit(main())
"""
"""What pip writes as the `tiermem` command (`[project.scripts]`)."""


def installed(folder: Path) -> tuple[str, str]:
    """A Python, and its `tiermem` command, that start as a user's install does (pipx, uv, a
    wheel): a venv whose one .pth lists this venv's site-packages and the package view
    (`.pkgview`). The development venv's editable-install hook, a .pth that imports a finder
    module (about 9 ms of every start, the baseline's `import sqlite3` included), stays out:
    measured with it, the start ratios read about a third lower than on a wheel install."""
    python, command = folder / "bin" / "python", folder / "bin" / "tiermem"
    if not command.exists():
        venv.create(folder, with_pip=False, symlinks=True)
        query = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        site = subprocess.run([python, "-c", query], capture_output=True, text=True, check=True)
        paths = [sysconfig.get_paths()["purelib"], str(REPO / ".pkgview")]
        (Path(site.stdout.strip()) / "tiermem-benchmark.pth").write_text("\n".join(paths) + "\n")
        command.write_text(CONSOLE_SCRIPT.format(python=python))
        command.chmod(0o755)
    return str(python), str(command)


def run_timed(command: Sequence[str], env: dict[str, str], stdin: str | None = None) -> float:
    """Wall time of one child process from spawn to exit (it must succeed)."""
    return run_measured(command, env, stdin)[0]


def run_measured(
    command: Sequence[str], env: dict[str, str], stdin: str | None = None
) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one child process; on a loaded machine the
    CPU time hardly moves while the wall time includes waiting for a core."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, input=stdin, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def facts_for(n: int, seed: int = 7) -> list[NewFact]:
    return list(generate(n, seed, time.time() - 5 * YEAR))


# -- process start ---------------------------------------------------------------------------


def start_figures(home: Path, runs: int) -> list[Figure]:
    """`tiermem --help`, `retrieve`, `store`, `hot` as whole processes vs `import sqlite3`, both
    started as on a user's install (`installed`): wall time, then CPU time (the steadier one on
    a shared machine)."""
    python, script = installed(home.parent / "installed-venv")
    note = "whole process, median; baseline `python -c 'import sqlite3'`"
    samples = start_samples(python, script, home, runs, child_env())
    return _start_rows("start", samples, note, statistics.median)


def resident_start_figures(home: Path, runs: int) -> list[Figure]:
    """The same commands handed to a running `tiermem resident` process. Their CPU time is the
    caller's plus the resident process's children's (whole clock ticks, so a mean, not a
    median, on both sides)."""
    python, script = installed(home.parent / "installed-venv")
    with resident_process(script, child_env()) as (env, pid):
        samples = start_samples(python, script, home, runs, env, resident=pid)
    note = "handed to `tiermem resident`, mean; baseline `python -c 'import sqlite3'`"
    return _start_rows("start (resident)", samples, note, statistics.fmean)


@contextlib.contextmanager
def resident_process(script: str, env: dict[str, str]) -> Iterator[tuple[dict[str, str], int]]:
    """`tiermem resident` started by `script` with its socket in a new folder: the environment
    that hands commands to it, and its pid."""
    runtime = tempfile.mkdtemp(prefix="tmb")  # short: a socket path must stay under 108 bytes
    env = env | {"XDG_RUNTIME_DIR": runtime, "TIERMEM_RESIDENT": "1"}
    started = subprocess.run(
        [script, "--json", "resident", "start"], env=env, capture_output=True, text=True, check=True
    )
    try:
        yield env, json.loads(started.stdout)["pid"]
    finally:
        subprocess.run([script, "resident", "stop"], env=env, capture_output=True, check=True)
        shutil.rmtree(runtime, ignore_errors=True)


Samples = dict[str, list[tuple[float, float]]]


def start_samples(
    python: str, script: str, home: Path, runs: int, env: dict[str, str], resident: int = 0
) -> Samples:
    """(wall, CPU) of each run of each command, the baseline's under "baseline"."""
    tiermem = [script, "--home", str(home)]
    commands = {
        "baseline": [python, "-c", "import sqlite3"],
        "--help": [*tiermem, "--help"],
        "retrieve": [*tiermem, "retrieve", "deploy checklist"],
        "store": [*tiermem, "store", "--text", "{}", "--category", "bench/start"],
        "hot": [*tiermem, "hot"],
    }
    for command in commands.values():  # warm: bytecode caches, page cache
        run_timed([part.format("warm-up fact") for part in command], env)
    samples: Samples = {}
    for name, command in commands.items():
        samples[name] = [
            run_handed([part.format(f"start fact {i}") for part in command], env, resident)
            for i in range(runs)
        ]
    return samples


def run_handed(command: Sequence[str], env: dict[str, str], resident: int) -> tuple[float, float]:
    """`run_measured`, with the CPU time of the child that the resident process `resident`
    forked to run the command added (0: no resident process)."""
    before = children_cpu(resident)
    wall, cpu = run_measured(command, env)
    return wall, cpu + children_cpu(resident) - before


def children_cpu(pid: int) -> float:
    """CPU seconds of the ended (and reaped) children of `pid`; 0 for no process."""
    if not pid:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def _start_rows(
    label: str, samples: Samples, note: str, center: Callable[[list[float]], float]
) -> list[Figure]:
    def ms(name: str, k: int) -> float:
        return center([x[k] for x in samples[name]]) * MS

    names = [name for name in samples if name != "baseline"]
    walls = [
        Figure(f"{label}: tiermem {n}", ms(n, 0), ms("baseline", 0), "ms", 2.5, note) for n in names
    ]
    cpus = [
        Figure(f"{label} CPU: tiermem {n}", ms(n, 1), ms("baseline", 1), "ms", 2.5, note)
        for n in names
    ]
    return walls + cpus


# -- store, retrieve, size -------------------------------------------------------------------


RAW_SCHEMA = (
    "CREATE TABLE m (rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, text TEXT, category TEXT, "
    "importance REAL, created_at REAL)",
    "CREATE VIRTUAL TABLE f USING fts5(text, content='m', content_rowid='rowid')",
)
RAW_INSERT = "INSERT INTO m (id, text, category, importance, created_at) VALUES (?, ?, ?, ?, ?)"
RAW_INDEX = "INSERT INTO f (rowid, text) VALUES (?, ?)"


def raw_db(path: Path) -> sqlite3.Connection:
    """The baseline store: one table and its FTS5 index, WAL, fsync on commit like tiermem."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for sql in RAW_SCHEMA:
        conn.execute(sql)
    return conn


def raw_insert(conn: sqlite3.Connection, facts: Sequence[NewFact], offset: int) -> None:
    conn.execute("BEGIN")
    for i, f in enumerate(facts, offset):
        cur = conn.execute(RAW_INSERT, (f"id{i}", f.text, f.category, f.importance, f.created_at))
        conn.execute(RAW_INDEX, (cur.lastrowid, f.text))
    conn.execute("COMMIT")


def db_bytes(path: Path) -> int:
    """The database's size with its WAL folded in."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path.stat().st_size


def store_figures(tmp: Path, facts: list[NewFact], singles: int) -> list[Figure]:
    """Batched and single stores, and bytes per memory, against the raw table + FTS5."""
    mem = Memory(tmp / "store")
    conn = raw_db(tmp / "raw.db")
    ours = raw = 0.0
    for lo in range(0, len(facts), 1000):
        batch = facts[lo : lo + 1000]
        ours += timed(lambda b=batch: mem.store_many(b))  # type: ignore[misc]
        raw += timed(lambda b=batch, o=lo: raw_insert(conn, b, o))  # type: ignore[misc]
    n = len(facts)
    sample = [
        NewFact(f"{f.text} (single {i})", f.category, f.importance)
        for i, f in enumerate(facts[:singles])
    ]
    one = [timed(lambda f=f: mem.store(f.text, f.category, f.importance)) for f in sample]  # type: ignore[misc]
    raw_one = [timed(lambda f=f, i=i: raw_insert(conn, [f], n + i)) for i, f in enumerate(sample)]  # type: ignore[misc]
    mem.close()
    conn.close()
    total = n + len(sample)
    ours_bytes = db_bytes(tmp / "store" / "tiermem.db") / total
    raw_bytes = db_bytes(tmp / "raw.db") / total
    return [
        Figure(
            f"store batched ({n:,} facts, 1,000 per transaction)",
            ours / n * 1e6,
            raw / n * 1e6,
            "µs/fact",
            2.0,  # at least half the raw insert's throughput
            "baseline: raw sqlite3 table + FTS5 insert, same batches",
        ),
        Figure(
            f"store one fact ({len(sample)}x)",
            median_ms(one),
            median_ms(raw_one),
            "ms",
            1.5,
            "median; baseline: a raw one-row transaction (row + FTS5), fsync on commit",
        ),
        Figure(
            "bytes per memory",
            ours_bytes,
            raw_bytes,
            "B",
            1.6,
            "database file after checkpoint; baseline: raw table + FTS5",
        ),
    ]


def retrieve_figure(tmp: Path, size: int, n_queries: int, consolidated: bool = False) -> Figure:
    """Default retrieve p50 against a raw FTS5 bm25 top-5 on the same index. `consolidated`:
    after a quick consolidation, as a home with the service timers is (tiers moved, the
    knowledge graph built, so its signal joins every search)."""
    with Memory(tmp / ("retrieve-consolidated" if consolidated else "retrieve")) as mem:
        facts = facts_for(size)
        for lo in range(0, len(facts), 1000):
            mem.store_many(facts[lo : lo + 1000])
        if consolidated:
            mem.consolidate("quick")
        qs = queries(n_queries, 8)
        sql = (
            "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY bm25(memories_fts) LIMIT 5"
        )
        limit = mem.cfg.retrieval.max_query_terms
        matches = [fts_match(query_terms(q, limit)) for q in qs]
        # both warm on every query first: whichever ran second would find the pages the
        # other read in the cache (the raw query used to, which made tiermem look slower)
        for q, m in zip(qs, matches, strict=True):
            mem.retrieve(q, reinforce=False)
            mem.db.query(sql, (m,))
        # alternating query by query: a change in the machine's load weighs on both sides
        pairs = [
            (timed(lambda q=q: mem.retrieve(q)), timed(lambda m=m: mem.db.query(sql, (m,))))  # type: ignore[misc]
            for q, m in zip(qs, matches, strict=True)
        ]
        ours, raw = [p[0] for p in pairs], [p[1] for p in pairs]
    home = ", consolidated (graph signal on)" if consolidated else ""
    return Figure(
        f"retrieve p50 at {size:,} memories{home}",
        median_ms(ours),
        median_ms(raw),
        "ms",
        1.3,
        f"{n_queries} queries, with reinforcement; baseline: raw FTS5 bm25() top-5",
    )


# -- TUI ---------------------------------------------------------------------------------------


class _Bare(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("hello")


class _NoData(TiermemApp):
    """The same screens, widgets and stylesheet with no memory opened: Textual's own cost of
    this UI, the baseline of "a bare Textual app of similar size"."""

    CSS_PATH = str(Path(inspect.getfile(TiermemApp)).with_name("app.tcss"))

    def open_agent(self, *args: Any, **kwargs: Any) -> Any:
        return None


async def _paint(app: App[Any]) -> float:
    started = time.perf_counter()
    async with app.run_test(size=(120, 40)) as pilot:
        painted = time.perf_counter() - started  # run_test yields after the first refresh
        await pilot.pause()
    return painted


def memories_page_figure(home: Path, runs: int) -> Figure:
    """From `3` on the dashboard to the Memories screen's first page, against the same switch
    in the same UI with no memory opened."""
    ours: list[tuple[float, float]] = []
    shell: list[tuple[float, float]] = []

    def first_page(kind: type[TiermemApp]) -> tuple[float, float]:
        return asyncio.run(memories_first_page(kind(home, watch=False)))

    for _ in range(runs):  # interleaved (see `tui_figure`)
        ours.append(_collected(lambda: first_page(TiermemApp)))
        shell.append(_collected(lambda: first_page(_NoData)))
    return Figure(
        "TUI Memories screen, first page",
        median_ms([w for w, _ in ours]),
        median_ms([w for w, _ in shell]),
        "ms",
        1.5,
        f"median of {runs}, headless, CPU {median_ms([c for _, c in ours]):.0f} ms; baseline: "
        "the same screen opened with no memory (goal also < 300 ms at 100k on an idle machine: "
        "`python -m benchmarks.tui_bench`)",
    )


T = TypeVar("T")


def _collected(run: Callable[[], T]) -> T:
    """One run after a full garbage collection, so what earlier runs left is not its cost."""
    gc.collect()
    return run()


def tui_figure(home: Path, runs: int) -> Figure:
    """First paint of the app against the same UI with no memory, the runs interleaved (the
    process slows as runs accumulate, which would otherwise weigh on whichever goes last)."""
    ours: list[float] = []
    shell: list[float] = []
    bare: list[float] = []
    for _ in range(runs):
        ours.append(_collected(lambda: asyncio.run(first_paint(home))[0]))
        shell.append(_collected(lambda: asyncio.run(_paint(_NoData(home, watch=False)))))
        bare.append(_collected(lambda: asyncio.run(_paint(_Bare()))))
    return Figure(
        "TUI first paint",
        median_ms(ours),
        median_ms(shell),
        "ms",
        1.5,
        f"median of {runs}, headless; baseline: the same UI with no memory opened "
        f"(a one-Static Textual app: {median_ms(bare):.0f} ms)",
    )
