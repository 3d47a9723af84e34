"""Sync benchmark: push latency and HTTP requests per push; restore time of the critical state.

    .venv/bin/python -m benchmarks.sync_bench [--pushes 100] [--restores 10] [--rtt 0.1]

Starts a real sqld (JWT auth) on loopback and a pass-through proxy that adds `--rtt` seconds to
every request (half each way), fills an agent's critical state close to its limits (hot ≈ 5 KB,
tree 40 nodes), and measures, in this run:

- push: `SyncEngine.push()` after a hot change (dump, seal, local bookkeeping with fsync, one
  HTTP request), against a baseline of the bare HTTP insert of an equal-sized blob; the number
  of HTTP requests each push made, counted at the proxy;
- daemon: time from a hot change to its confirmed push by a running daemon (woken by its
  file watcher);
- restore: `restore()` into a fresh home with the recovery key, on loopback and at the injected
  RTT, against a baseline of the bare SELECT of the newest record on the same path and against
  the original design's promise of 2 minutes; also with the passphrase (Argon2id, 64 MiB) and as the whole
  `tiermem restore` command (a new Python process).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.sync.faultproxy import FaultProxy
from tests.sync.sqld import INSTALL_COMMAND, SqldServer, sqld_binary
from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.daemon import Daemon
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.state import CRITICAL_TABLE
from tiermem.sync.vault.hrana import HranaClient

RESTORE_PROMISE_S = 120.0
PASSPHRASE = "benchmark quince walrus trombone"
AGENT = "bench"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def summary(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[
        min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))
    ]


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def fill_critical_state(mem: Memory) -> None:
    """Hot memory near its 5 KB limit and a 40-node tree."""
    mem.update_hot("identity", {"agent_name": "Claw", "owner_name": "Sam", "role": "research aide"})
    mem.update_hot("owner_profile", {"timezone": "Europe/Paris", "tea": "oolong", "work": "9-18"})
    for i in range(6):
        mem.add_project(
            f"project-{i}", f"long-running effort number {i} with a description", "active"
        )
    for i in range(10):
        mem.add_task(f"follow up on item {i} with the team before the review")
    for i in range(10):
        mem.add_event(f"conversation {i} ended with a decision about topic {i}")
    for i in range(20):
        mem.add_lesson(
            f"lesson {i}: check the assumptions behind every estimate twice", 0.7 + i / 100
        )
    for top in range(8):
        for child in range(4):
            mem.tree_add(f"area{top}/topic{child}", f"notes about topic {child} of area {top}")


def small_hot_change(mem: Memory, label: str) -> None:
    """One small change of the critical state that always fits: hot memory is kept full, where
    a new event would be the first item its own limit prunes (and so refused)."""
    mem.update_hot("identity", {"last_conversation": label})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pushes", type=int, default=100)
    parser.add_argument("--restores", type=int, default=10)
    parser.add_argument("--rtt", type=float, default=0.1, help="injected round trip (seconds)")
    args = parser.parse_args()
    if not sqld_binary().is_file():
        sys.exit(f"sqld is not installed; run:\n    {INSTALL_COMMAND}")
    os.environ["TIERMEM_SECRET_STORE"] = "file"  # never the user's keyring
    with tempfile.TemporaryDirectory(prefix="tiermem-sync-bench-") as tmp:
        run(Path(tmp), args.pushes, args.restores, args.rtt)


def run(tmp: Path, pushes: int, restores: int, rtt: float) -> None:
    server = SqldServer(tmp / "sqld")
    server.start()
    try:
        with (
            FaultProxy(server.url) as counting,
            FaultProxy(server.url, latency=rtt) as slow,
            Memory(tmp / "source", AGENT) as mem,
        ):
            fill_critical_state(mem)
            state = snapshot.canonical(snapshot.dump(mem))
            print(
                f"critical state: {len(state):,} bytes canonical (hot {mem.hot_size_bytes():,} B, "
                f"{len(mem.trees.load().nodes)} tree nodes); sqld {server.url}, RTT {rtt * 1000:.0f} ms"
            )
            key = crypto.generate_recovery_key()
            with SyncEngine(mem) as engine:
                engine.init(counting.url, server.token, key, passphrase=PASSPHRASE)
                assert engine.push().pushed
                bench_push(mem, engine, server, counting, pushes)
                bench_daemon(mem, engine)
            bench_restore(tmp, server, slow, key, restores, rtt)
    finally:
        server.stop()


def bench_push(
    mem: Memory, engine: SyncEngine, server: SqldServer, proxy: FaultProxy, n: int
) -> None:
    latencies, requests, wire, sizes = [], [], [], []
    for i in range(n):
        small_hot_change(mem, f"benchmark conversation {i:06d} ended")
        before = len(proxy.log)
        started = time.perf_counter()
        result = engine.push()
        latencies.append(time.perf_counter() - started)
        assert result.pushed
        requests.append(result.requests)
        wire.append(len(proxy.log) - before)
        sizes.append(result.bytes)
    with HranaClient(proxy.url, server.token) as raw:
        raw.execute("CREATE TABLE IF NOT EXISTS bench_raw (k INTEGER PRIMARY KEY, v BLOB)")
        blob = os.urandom(sizes[-1])

        def insert(i: int) -> None:
            raw.batch([("INSERT INTO bench_raw VALUES (?, ?)", (i, blob))])

        base = [timed(functools.partial(insert, i)) for i in range(n)]
    p50, p95 = summary(latencies)
    b50, _ = summary(base)
    print(
        f"push ({n}x, loopback through a pass-through proxy that counts requests): p50 {ms(p50)}, p95 {ms(p95)}; HTTP requests per push: "
        f"{min(wire)}..{max(wire)} at the wire ({sum(wire) / n:.2f} mean; engine counted "
        f"{sum(requests) / n:.2f}); envelope {sizes[-1]:,} B"
    )
    print(
        f"  baseline bare HTTP insert of {len(blob):,} B: p50 {ms(b50)} -> push is {p50 / b50:.2f}x"
    )


def bench_daemon(mem: Memory, engine: SyncEngine, trials: int = 10) -> None:
    with Memory(mem.home.root, AGENT) as own:
        daemon = Daemon(own)
        thread = threading.Thread(target=daemon.run)
        thread.start()
        delays = []
        try:
            for i in range(trials):
                time.sleep(0.3)
                small_hot_change(mem, f"daemon trial {i:06d}")
                started = time.perf_counter()
                while engine.has_work():
                    time.sleep(0.005)
                delays.append(time.perf_counter() - started)
        finally:
            daemon.stop()
            thread.join()
    p50, _ = summary(delays)
    print(
        f"daemon: change -> confirmed push p50 {ms(p50)}, max {ms(max(delays))} ({trials} changes, woken by the file watcher)"
    )


def bench_restore(
    tmp: Path, server: SqldServer, slow: FaultProxy, key: bytes, n: int, rtt: float
) -> None:
    def restores(url: str, label: str, count: int, **unlock: object) -> float:
        times = []
        for i in range(count):
            target = tmp / f"restore-{label}-{i}"
            result = restore(target, AGENT, url, server.token, **unlock)  # type: ignore[arg-type]
            times.append(result.seconds)
        return summary(times)[0]

    def raw_select(url: str, count: int) -> float:
        with Memory(tmp / "source", AGENT) as mem, SyncEngine(mem) as engine:
            s = engine.settings()
            assert s is not None
            rid = crypto.record_id(engine.vault_key(s), CRITICAL_TABLE, AGENT)
        sql = "SELECT version, envelope FROM records WHERE record_id = ? ORDER BY version DESC LIMIT 1"
        with HranaClient(url, server.token) as raw:
            return summary([timed(lambda: raw.execute(sql, (rid,))) for _ in range(count)])[0]

    for label, url in (("loopback", server.url), (f"{rtt * 1000:.0f} ms RTT", slow.url)):
        ours = restores(url, label.replace(" ", ""), n, recovery_key=key)
        base = raw_select(url, n)
        print(
            f"restore ({label}, recovery key, {n}x): p50 {ms(ours)} | bare SELECT of the record "
            f"{ms(base)} -> {ours / base:.1f}x | 2 min promise -> {RESTORE_PROMISE_S / ours:,.0f}x faster"
        )
    pw = restores(server.url, "passphrase", 3, passphrase=PASSPHRASE)
    print(f"restore (loopback, passphrase: Argon2id 64 MiB t=3 p=4, 3x): p50 {ms(pw)}")
    env = {
        **os.environ,
        "TIERMEM_SYNC_TOKEN": server.token,
        "TIERMEM_RECOVERY_KEY": crypto.format_recovery_key(key),
    }
    for label, url in (("loopback", server.url), (f"{rtt * 1000:.0f} ms RTT", slow.url)):
        times = []
        for i in range(3):
            command = [
                sys.executable,
                "-m",
                "tiermem.tui",
                "--home",
                str(tmp / f"cli-{label}-{i}"),
                "--agent-id",
                AGENT,
                "restore",
                "--url",
                url,
            ]
            run_it = functools.partial(
                subprocess.run, command, env=env, check=True, capture_output=True
            )
            times.append(timed(run_it))
        print(f"`tiermem restore` command ({label}, new process, 3x): p50 {ms(summary(times)[0])}")


if __name__ == "__main__":
    main()
