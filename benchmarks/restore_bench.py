"""Full-restore benchmark: a generated 5-year agent brought back from a real sqld.

    .venv/bin/python -m benchmarks.restore_bench              # quick: ≈ 5 MB of records
    .venv/bin/python -m benchmarks.restore_bench --size-mb 50 # the issue's ≈ 50 MB agent

Starts a real sqld (JWT auth) on loopback, generates an agent with `benchmarks.agent_gen`
(facts spread over 5 years, tiers by age: the last 30 days warm, up to 2 years cold, older
frozen) sized so that its remote records total about `--size-mb`, pushes it with the sync engine,
and measures in this run, on loopback and through a proxy that adds `--rtt` to every request:

- the raw read: paging through the agent's rows with bare `SELECT`s of the same page size
  (no decryption, nothing written): the baseline throughput of sqld on that path;
- `restore()` in a fresh Python process: total time, MB/s of remote records against the raw
  read, peak memory (VmHWM, and its growth over the process before restoring);
- time until the restored agent answered a `retrieve` (critical state + tree in place, a
  second connection opens the home and searches), against the original design's promise of 2 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.agent_gen import generate, queries
from tests.sync.faultproxy import FaultProxy
from tests.sync.sqld import INSTALL_COMMAND, SqldServer, sqld_binary
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import RestoreProgress, restore
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import HranaClient

RESTORE_PROMISE_S = 120.0
AGENT = "bench-agent"
YEAR = 365.25 * 86400
BYTES_PER_MEMORY = 900  # a sealed memory record: ≈ 400-700 B of JSON padded to 512 or 1024, + 70


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mb", type=float, default=5.0, help="remote records, about")
    parser.add_argument("--rtt", type=float, default=0.1, help="injected round trip (seconds)")
    parser.add_argument("--page-rows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--child", nargs=4, metavar=("URL", "TOKEN", "TARGET", "PAGE_ROWS"))
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if not sqld_binary().is_file():
        sys.exit(f"sqld is not installed; run:\n    {INSTALL_COMMAND}")
    os.environ["TIERMEM_SECRET_STORE"] = "file"  # never the user's keyring
    with tempfile.TemporaryDirectory(prefix="tiermem-restore-bench-") as tmp:
        run(Path(tmp), args.size_mb, args.rtt, args.page_rows, args.seed)


def run(tmp: Path, size_mb: float, rtt: float, page_rows: int, seed: int) -> None:
    server = SqldServer(tmp / "sqld")
    server.start()
    try:
        key, described = build_source(tmp / "source", server, size_mb, seed)
        print(described)
        tag = crypto.keyed_agent_tag(key, AGENT)  # where the server files the vault's rows
        total_bytes = remote_bytes(server, tag)
        with FaultProxy(server.url, latency=rtt) as slow:
            # The proxy's own client must not ask sqld for gzip and decode it: that CPU is the
            # proxy's, not the link's (the restore itself asks for identity, like the raw read).
            slow.upstream.headers["Accept-Encoding"] = "identity"
            paths = (("loopback", server.url), (f"{rtt * 1000:.0f} ms RTT", slow.url))
            for i, (label, url) in enumerate(paths):
                raw_s, raw_bytes, raw_rows = raw_read(url, server.token, page_rows, tag)
                result = restore_in_child(url, server.token, key, tmp / f"target{i}", page_rows)
                mb = result["memory_bytes"] / 1e6
                print(f"\n{label}:")
                print(
                    f"  raw read of the same rows ({raw_rows:,} rows, {raw_bytes / 1e6:.1f} MB, "
                    f"pages of {page_rows}): {raw_s:.2f} s = {raw_bytes / 1e6 / raw_s:.1f} MB/s"
                )
                print(
                    f"  restore: {result['seconds']:.2f} s for {result['memories']:,} memories "
                    f"({result['rows']:,} rows, {mb:.1f} MB, {result['pages']} pages) = "
                    f"{mb / result['seconds']:.1f} MB/s -> {raw_s / result['seconds']:.2f}x the "
                    "raw read's throughput"
                )
                print(
                    f"  usable (critical state + tree in place): {result['usable_seconds']:.2f} s;"
                    f" first retrieve answered after {result['retrieve_at']:.2f} s "
                    f"({result['retrieve_hits']} hits) -> "
                    f"{RESTORE_PROMISE_S / result['retrieve_at']:,.0f}x faster than the promised 2 min"
                )
                print(
                    f"  peak memory of the restoring process: {result['maxrss_mb']:.0f} MB "
                    f"(+{result['maxrss_mb'] - result['rss_before_mb']:.0f} MB over the "
                    f"{result['rss_before_mb']:.0f} MB it had before restoring; "
                    f"{result['streaming_peak_mb']:.0f} MB until the last page, before the swap;"
                    f" the vault is {total_bytes / 1e6:.0f} MB)"
                )
    finally:
        server.stop()


def build_source(home: Path, server: SqldServer, size_mb: float, seed: int) -> tuple[bytes, str]:
    """The recovery key of a generated agent pushed to `server`, and a line describing it."""
    n = max(100, int(size_mb * 1e6 / BYTES_PER_MEMORY))
    now = time.time()
    start = now - 5 * YEAR
    started = time.perf_counter()
    with Memory(home, AGENT, clock=lambda: now) as mem:
        facts = list(generate(n, seed, start))
        for lo in range(0, len(facts), 2000):
            mem.store_many(facts[lo : lo + 2000])
        mem.update_hot("identity", {"agent_name": "Bench", "owner_name": "Sam"})
        for i in range(15):
            mem.add_lesson(f"lesson {i}: measure before tuning anything", 0.7 + i / 100)
        with mem.db.transaction():
            mem.db.execute(
                "UPDATE memories SET tier = CASE WHEN created_at > ? THEN 'warm' "
                "WHEN created_at > ? THEN 'cold' ELSE 'frozen' END WHERE agent_id = ?",
                (now - 30 * 86400, now - 2 * YEAR, AGENT),
            )
        counts = mem.memories.counts()
        built = time.perf_counter() - started
        key = crypto.generate_recovery_key()
        with SyncEngine(mem) as engine:
            engine.init(server.url, server.token, key)
            pushed = time.perf_counter()
            result = engine.push()
            push_s = time.perf_counter() - pushed
    described = (
        f"source: {n:,} generated facts over 5 years -> {sum(counts.values()):,} memories "
        f"({', '.join(f'{v:,} {k}' for k, v in counts.items())}), built in {built:.1f} s; "
        f"pushed {result.records:,} records ({result.bytes / 1e6:.1f} MB) in "
        f"{result.requests} requests, {push_s:.1f} s"
    )
    return key, described


def remote_bytes(server: SqldServer, tag: bytes) -> int:
    with HranaClient(server.url, server.token) as c:
        rs = c.execute("SELECT sum(length(envelope)) FROM records WHERE agent_tag = ?", (tag,))
    return int(str(rs.rows[0][0]))


def raw_read(url: str, token: str, page_rows: int, tag: bytes) -> tuple[float, int, int]:
    """Seconds, bytes and rows of paging through the agent's records with bare SELECTs."""
    size = rows = after = 0
    with HranaClient(url, token, timeout=60.0) as c:
        started = time.perf_counter()
        while True:
            page = c.execute(*store.records_after(tag, after, page_rows)).rows
            for r in page:
                envelope = r[5]
                assert isinstance(envelope, bytes)
                size += len(envelope)
            rows += len(page)
            if len(page) < page_rows:
                break
            seq = page[-1][0]
            assert isinstance(seq, int)
            after = seq
        return time.perf_counter() - started, size, rows


def restore_in_child(
    url: str, token: str, key: bytes, target: Path, page_rows: int
) -> dict[str, Any]:
    env = {**os.environ, "TIERMEM_RECOVERY_KEY": crypto.format_recovery_key(key)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.restore_bench",
            "--child",
            url,
            token,
            str(target),
            str(page_rows),
        ],
        env=env,
        capture_output=True,
        check=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(url: str, token: str, target: str, page_rows: str) -> None:
    """One restore in this fresh process; prints its numbers as JSON."""
    key = crypto.parse_recovery_key(os.environ["TIERMEM_RECOVERY_KEY"])
    query = queries(1, 3)[0]
    rss_before = _status_mb("VmRSS")
    first: dict[str, Any] = {}
    started = time.perf_counter()

    def progress(p: RestoreProgress) -> None:
        if p.phase == "memories":
            first["streaming_peak_mb"] = _status_mb("VmHWM")
        if p.phase == "critical" and "retrieve_at" not in first:
            with Memory(Path(target), AGENT) as early:
                hits = early.retrieve(query).hits
                context = early.context_block()
            first.update(
                retrieve_at=time.perf_counter() - started,
                retrieve_hits=len(hits),
                context_bytes=len(context.encode()),
            )

    result = restore(
        Path(target),
        AGENT,
        url,
        token,
        recovery_key=key,
        page_rows=int(page_rows),
        progress=progress,
        timeout=60.0,
    )
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, so a child would report the
    # parent's (the benchmark's) size from before it exec'd.
    maxrss_mb = _status_mb("VmHWM")
    print(
        json.dumps(
            {
                "seconds": result.seconds,
                "usable_seconds": result.usable_seconds,
                "memories": result.memories,
                "rows": result.rows,
                "pages": result.pages,
                "memory_bytes": result.memory_bytes,
                "maxrss_mb": maxrss_mb,
                "rss_before_mb": rss_before,
                **first,
            }
        )
    )


if __name__ == "__main__":
    main()
