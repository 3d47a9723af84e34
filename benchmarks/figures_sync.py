"""The sync figures of `python -m benchmarks`, against a real sqld on loopback: one push against a
bare insert, `conversation-end` exit to the record on the server (no daemon), `tiermem restore`
as a command against the in-process restore, and the daemon's idle CPU (watchdog vs polling).

    python -m benchmarks.figures_sync --daemon HOME AGENT watch|poll   (the measured daemon)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import restore_bench
from benchmarks.figures import (
    Figure,
    child_env,
    installed,
    mean_ms,
    median_ms,
    resident_process,
    run_handed,
    run_measured,
    run_timed,
)
from benchmarks.sync_bench import fill_critical_state, small_hot_change
from tests.sync.faultproxy import FaultProxy
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.daemon import Daemon
from tiermem.sync.engine import SyncEngine
from tiermem.sync.push import kick
from tiermem.sync.restore import restore
from tiermem.sync.state import CRITICAL_TABLE
from tiermem.sync.vault.hrana import HranaClient

AGENT = "bench"
TRANSCRIPT = "User: remember that the benchmark run {n} used the oolong server\nAssistant: Noted.\n"


class Vault:
    """A source home with a filled critical state, synced to `server`."""

    def __init__(self, tmp: Path, server: SqldServer) -> None:
        self.tmp, self.server = tmp, server
        self.home = tmp / "source"
        self.key = crypto.generate_recovery_key()
        with Memory(self.home, AGENT) as mem, SyncEngine(mem) as engine:
            fill_critical_state(mem)
            engine.init(server.url, server.token, self.key)
            assert engine.push().pushed
            s = engine.settings()
            assert s is not None
            self.record_id = crypto.record_id(engine.vault_key(s), CRITICAL_TABLE, AGENT)
        with HranaClient(server.url, server.token) as raw:
            raw.execute("CREATE TABLE IF NOT EXISTS bench_raw (k INTEGER PRIMARY KEY, v BLOB)")

    def newest_version(self, raw: HranaClient) -> object:
        rows = raw.execute(
            "SELECT max(version) FROM records WHERE record_id = ?", (self.record_id,)
        ).rows
        return rows[0][0] if rows else None


def push_figure(vault: Vault, n: int) -> Figure:
    """`SyncEngine.push()` of one small hot change against a bare insert of the same bytes."""
    ours, base = [], []
    with (
        Memory(vault.home, AGENT) as mem,
        SyncEngine(mem) as engine,
        HranaClient(vault.server.url, vault.server.token) as raw,
    ):
        blob = b""
        # alternating push by push: a change in the machine's load weighs on both sides
        for i in range(n):
            small_hot_change(mem, f"benchmark conversation {i:06d} ended")
            started = time.perf_counter()
            result = engine.push()
            ours.append(time.perf_counter() - started)
            if len(blob) != result.bytes:
                blob = os.urandom(result.bytes)
            started = time.perf_counter()
            raw.batch([("INSERT INTO bench_raw (v) VALUES (?)", (blob,))])
            base.append(time.perf_counter() - started)
    return Figure(
        f"push one small change ({n}x)",
        median_ms(ours),
        median_ms(base),
        "ms",
        3.0,
        f"median, loopback sqld; baseline: bare HTTP insert of the same {len(blob):,} B",
    )


def _wait_pusher_done(home: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fd = kick.take_lock(kick.pusher_lock_path(home, AGENT))
        if fd is not None:
            os.close(fd)
            return
        time.sleep(0.01)
    raise TimeoutError("the pusher did not finish")


def conversation_end_figure(vault: Vault, n: int) -> Figure:
    """From `conversation-end` exiting to its record on the server, no daemon running."""
    env = child_env(TIERMEM_SYNC_TOKEN=vault.server.token)
    home = ["--home", str(vault.home), "--agent-id", AGENT]
    python, tiermem = installed(vault.tmp / "installed-venv")
    command = [tiermem, *home, "conversation-end", "-"]
    delays = []
    with HranaClient(vault.server.url, vault.server.token) as raw:
        for i in range(n):
            before = vault.newest_version(raw)
            run_timed(command, env, TRANSCRIPT.format(n=i))
            exited = time.perf_counter()
            while vault.newest_version(raw) == before:
                if time.perf_counter() - exited > 60:
                    raise TimeoutError("the record never reached the server")
                time.sleep(0.002)
            delays.append(time.perf_counter() - exited)
            _wait_pusher_done(vault.home)
        base = [_bare_process_insert(python, vault.server, env) for _ in range(n)]
    return Figure(
        f"conversation-end exit -> record on server ({n}x)",
        median_ms(delays),
        median_ms(base),
        "ms",
        3.0,
        "no daemon, loopback; baseline: a new Python process sending one bare insert",
    )


BARE_INSERT = """
import sys, httpx
body = {"requests": [{"type": "execute", "stmt": {"sql": "INSERT INTO bench_raw (v) VALUES (x'00')"}}]}
httpx.post(sys.argv[1] + "/v2/pipeline", json=body, headers={"Authorization": "Bearer " + sys.argv[2]}).raise_for_status()
"""


def _bare_process_insert(python: str, server: SqldServer, env: dict[str, str]) -> float:
    return run_timed([python, "-c", BARE_INSERT, server.url, server.token], env)


def restore_figures(vault: Vault, n: int) -> list[Figure]:
    """`tiermem restore` of the critical state as a whole command against `restore()` here:
    wall time, then CPU time (the steadier one on a shared machine)."""
    tmp, server = vault.tmp, vault.server
    inproc: list[tuple[float, float]] = []
    for i in range(n):
        wall, cpu = time.perf_counter(), time.process_time()
        restore(tmp / f"restore-{i}", AGENT, server.url, server.token, recovery_key=vault.key)
        inproc.append((time.perf_counter() - wall, time.process_time() - cpu))
    env = child_env(
        TIERMEM_SYNC_TOKEN=server.token,
        TIERMEM_RECOVERY_KEY=crypto.format_recovery_key(vault.key),
    )

    _, tiermem = installed(tmp / "installed-venv")

    def command(home: Path) -> list[str]:
        cli = [tiermem, "--agent-id", AGENT, "--home", str(home)]
        return [*cli, "restore", "--url", server.url]

    run_timed(command(tmp / "cli-warm"), env)
    cli = [run_measured(command(tmp / f"cli-{i}"), env) for i in range(n)]
    with resident_process(tiermem, env) as (handing, pid):
        run_timed(command(tmp / "resident-warm"), handing)
        handed = [run_handed(command(tmp / f"resident-{i}"), handing, pid) for i in range(n)]
    note = "whole `tiermem restore` process vs restore() in this process, loopback"
    return [
        *_restore_rows("restore critical state as a command", cli, inproc, note, median_ms),
        *_restore_rows("restore as a command, resident", handed, inproc, note + "; mean", mean_ms),
    ]


def _restore_rows(
    label: str,
    samples: list[tuple[float, float]],
    inproc: list[tuple[float, float]],
    note: str,
    center: Callable[[list[float]], float],
) -> list[Figure]:
    def row(name: str, k: int) -> Figure:
        values = (center([c[k] for c in samples]), center([c[k] for c in inproc]))
        return Figure(name, *values, "ms", 1.5, note)

    return [row(f"{label} ({len(samples)}x)", 0), row(f"{label}, CPU", 1)]


def full_restore_figures(tmp: Path, size_mb: float, rtt: float) -> list[Figure]:
    """A whole generated agent (about `size_mb` of records) restored in a fresh process against
    the raw paged read of the same rows (bare SELECTs, nothing decrypted or written), on
    loopback and through a proxy that adds `rtt` to every request; on a server of its own (a
    server holding another vault refuses a new one)."""
    server = SqldServer(tmp / "sqld-full-restore")
    server.start()
    try:
        key, _ = restore_bench.build_source(tmp / "full-source", server, size_mb, seed=7)
        tag = crypto.keyed_agent_tag(key, restore_bench.AGENT)
        with FaultProxy(server.url, latency=rtt) as slow:
            slow.upstream.headers["Accept-Encoding"] = "identity"  # the link's cost, not gzip's
            paths = (("loopback", server.url), (f"{rtt * 1000:.0f} ms RTT", slow.url))
            return [
                _full_restore(server, key, tag, tmp / f"full-{i}", *p) for i, p in enumerate(paths)
            ]
    finally:
        server.stop()


def _full_restore(
    server: SqldServer, key: bytes, tag: bytes, target: Path, label: str, url: str
) -> Figure:
    raw_s, raw_bytes, _ = restore_bench.raw_read(url, server.token, 1000, tag)
    done = restore_bench.restore_in_child(url, server.token, key, target, 1000)
    return Figure(
        f"full restore, {raw_bytes / 1e6:.1f} MB, {label}",
        float(done["seconds"]),
        raw_s,
        "s",
        2.0,
        "baseline: raw paged read of the same rows; <= 2x its time is >= 0.5x its throughput; "
        f"peak RSS {done['maxrss_mb']:.0f} MB",
    )


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_cpu(vault: Vault, mode: str, seconds: float) -> float:
    """CPU seconds a daemon uses over `seconds` of idling (after its start-up pull)."""
    env = child_env(TIERMEM_SYNC_TOKEN=vault.server.token)
    command = [
        sys.executable,
        "-m",
        "benchmarks.figures_sync",
        "--daemon",
        str(vault.home),
        AGENT,
        mode,
    ]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        time.sleep(2.0)  # the start-up pull
        before = _cpu_seconds(proc.pid)
        time.sleep(seconds)
        return _cpu_seconds(proc.pid) - before
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def daemon_figure(vault: Vault, seconds: float) -> Figure:
    watch = _idle_cpu(vault, "watch", seconds)
    poll = _idle_cpu(vault, "poll", seconds)
    return Figure(
        f"daemon idle CPU over {seconds:.0f} s",
        watch,
        poll,
        "CPU s",
        1.0,
        "watchdog observer; baseline: the 0.25 s polling fallback (pull every 30 s in both)",
    )


def daemon_child(home: str, agent_id: str, mode: str) -> None:
    """Run a daemon until SIGTERM; says `started` on stdout once it runs."""

    def said(event: dict[str, object]) -> None:
        if event["event"] == "started":
            print("started", flush=True)

    with Memory(Path(home), agent_id) as mem:
        daemon = Daemon(mem, watch=mode == "watch", report=said)
        signal.signal(signal.SIGTERM, lambda *_: daemon.stop())
        daemon.run()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--daemon"]:
        daemon_child(*sys.argv[2:5])
