"""Sync under injected faults and kills, checked against the real sqld.

- Fault runs: ≥ 20 % of requests faulted (5xx, 429, resets, read timeouts, truncated bodies,
  answers dropped after the commit); every conversation-end is followed by a push that may fail;
  at the end the outbox is drained. 0 lost (the server's newest state is the local state, every
  confirmed version is there) and 0 duplicated (no state is stored twice).
- Daemon kills: the real `tiermem daemon` is SIGKILLed mid-push again and again while
  conversations end; a final daemon drains the outbox and stops on SIGTERM. Nothing is lost.

The default suite runs a small bounded version of each; `-m chaos` runs the full counts
(50 seeds × 200 conversation-ends; 50 kills). Every run prints its seed.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import (
    FakeSleep,
    conversation_end,
    dump_bytes,
    identity_counter,
    remote_versions,
    settings,
)
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.engine import SyncEngine
from tiermem.sync.vault.hrana import HranaClient, HranaError, is_retryable
from tiermem.sync.vault.retry import RetryPolicy

FAULTS: dict[faultproxy.Fault, float] = {
    faultproxy.PASS: 74.0,
    faultproxy.status(500): 3.0,
    faultproxy.status(502): 2.0,
    faultproxy.status(503): 3.0,
    faultproxy.status(429, retry_after="1"): 3.0,
    faultproxy.RESET: 3.0,
    faultproxy.Fault("reset", forward=True): 2.0,
    faultproxy.DROP_AFTER_COMMIT: 5.0,
    faultproxy.TRUNCATE: 2.0,
    faultproxy.hold(1.0, forward=True): 1.5,
    faultproxy.hold(1.0): 1.5,
}
FAST_TIMEOUT = httpx.Timeout(connect=2.0, read=0.2, write=2.0, pool=2.0)


@pytest.fixture
def direct(sqld: SqldServer) -> Iterator[HranaClient]:
    with HranaClient(sqld.url, sqld.token, timeout=10.0) as c:
        yield c


@dataclass
class Outcome:
    faulted: float
    requests: int
    versions: int
    confirmed: int


def check_remote(
    direct: HranaClient, engine: SyncEngine, mem: Memory, conversations: int, confirmed: set[str]
) -> int:
    """0 lost, 0 duplicated; returns the number of remote versions."""
    versions = remote_versions(direct, engine)
    plaintexts = [p for _, _, p in versions]
    assert len(set(plaintexts)) == len(plaintexts), "a state was stored twice"
    assert plaintexts[-1] == dump_bytes(mem), "the newest remote state is not the local one"
    assert confirmed <= {v for v, _, _ in versions}, "a confirmed version is missing"
    counters = [identity_counter(p) for p in plaintexts]
    assert counters == sorted(counters), "version order disagrees with the order of changes"
    assert counters[-1] == conversations - 1
    return len(versions)


def fault_run(
    sqld: SqldServer, direct: HranaClient, home: Path, seed: int, conversations: int
) -> Outcome:
    print(f"fault run seed={seed} conversations={conversations}")
    rng = random.Random(seed)
    sleep = FakeSleep()

    def jitter(cap: float) -> float:
        return rng.uniform(0, cap)

    def policy(attempts: int | None) -> RetryPolicy:
        return RetryPolicy(max_attempts=attempts, sleep=sleep, jitter=jitter)

    agent = f"chaos-{seed}-{uuid.uuid4().hex[:8]}"
    confirmed: set[str] = set()
    with (
        FaultProxy(sqld.url, seed=seed, weights=FAULTS) as proxy,
        Memory(home, agent) as mem,
        SyncEngine(mem, timeout=FAST_TIMEOUT) as engine,
    ):
        engine.init(
            proxy.url,
            sqld.token,
            crypto.generate_recovery_key(),
            policy=policy(None),
            new_vault=True,
        )
        for n in range(conversations):
            conversation_end(mem, n)
            try:
                result = engine.push(policy(2))
            except HranaError as exc:
                assert is_retryable(exc), exc
                assert sqld.token not in str(exc)
                continue
            if result.pushed:
                assert result.version is not None
                confirmed.add(result.version)
        final = engine.push(policy(None))  # the outbox drains
        if final.version is not None:
            confirmed.add(final.version)
        assert not engine.has_work()
        assert engine.status().pending == 0
        faulted = sum(e.fault.kind != "pass" for e in proxy.log) / len(proxy.log)
        versions = check_remote(direct, engine, mem, conversations, confirmed)
        assert proxy.errors == []
        return Outcome(faulted, len(proxy.log), versions, len(confirmed))


def test_fault_runs_bounded(sqld: SqldServer, direct: HranaClient, tmp_path: Path) -> None:
    outcomes = [fault_run(sqld, direct, tmp_path / f"h{seed}", seed, 40) for seed in (1, 2)]
    total = sum(o.requests for o in outcomes)
    assert sum(o.faulted * o.requests for o in outcomes) / total >= 0.15


@pytest.mark.chaos
def test_fault_runs_50_seeds_x_200_conversations(
    sqld: SqldServer, direct: HranaClient, tmp_path: Path
) -> None:
    outcomes = [fault_run(sqld, direct, tmp_path / f"h{seed}", seed, 200) for seed in range(50)]
    requests = sum(o.requests for o in outcomes)
    faulted = sum(o.faulted * o.requests for o in outcomes) / requests
    print(
        f"50 runs: {requests} requests, {faulted:.1%} faulted, "
        f"{sum(o.versions for o in outcomes)} versions stored, "
        f"{sum(o.confirmed for o in outcomes)} confirmed pushes"
    )
    assert faulted >= 0.20


# ------------------------------------------------------------------------------- daemon kills


def daemon_process(home: Path, agent: str, token: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "TIERMEM_SYNC_TOKEN": token, "TIERMEM_SECRET_STORE": "file"}
    env.pop("TIERMEM_DRIVER", None)  # the shipped libSQL driver
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tiermem.tui",
            "--home",
            str(home),
            "--agent-id",
            agent,
            "daemon",
            "--poll",
            "0.05",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def grew(proxy: FaultProxy, seen: int) -> bool:
    return len(proxy.log) > seen


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    pytest.fail(f"timed out waiting for {what}")


def kill_run(
    sqld: SqldServer, direct: HranaClient, home: Path, seed: int, kills: int
) -> dict[str, int]:
    """Returns how many kills left a push in flight that the server had / had not committed."""
    print(f"daemon kill run seed={seed} kills={kills}")
    rng = random.Random(seed)
    agent = f"kill-{seed}-{uuid.uuid4().hex[:8]}"
    weights = {faultproxy.PASS: 8.0, faultproxy.DROP_AFTER_COMMIT: 1.0, faultproxy.status(503): 1.0}
    conversations = 0
    killed_mid_request = 0
    phases = {"in flight, committed": 0, "in flight, not committed": 0, "nothing in flight": 0}
    with (
        FaultProxy(sqld.url, seed=seed, weights=weights, latency=0.06) as proxy,
        Memory(home, agent) as mem,
        SyncEngine(mem) as engine,
    ):
        engine.init(
            proxy.url,
            sqld.token,
            crypto.generate_recovery_key(),
            policy=RetryPolicy(max_attempts=None, sleep=FakeSleep()),
            new_vault=True,
        )
        for _ in range(kills):
            for _ in range(rng.randint(1, 3)):
                conversation_end(mem, conversations)
                conversations += 1
            seen = len(proxy.log)
            daemon = daemon_process(home, agent, sqld.token)
            try:
                if rng.random() < 0.8:  # mostly: kill once its push is on the wire
                    wait_for(functools.partial(grew, proxy, seen), 30, "the daemon's push")
                    time.sleep(rng.uniform(0, 0.08))
                    killed_mid_request += 1
                else:  # sometimes: at any moment of its start or its push
                    time.sleep(rng.uniform(0, 0.6))
            finally:
                daemon.kill()
                _, err = daemon.communicate(timeout=30)
            assert b"Traceback" not in err
            inflight = settings(engine).inflight
            if inflight is None:
                phases["nothing in flight"] += 1
            else:
                (row,) = direct.execute(
                    "SELECT count(*) FROM records WHERE version = ?", (inflight.version,)
                ).rows
                phases["in flight, committed" if row[0] else "in flight, not committed"] += 1
        conversation_end(mem, conversations)
        conversations += 1
        daemon = daemon_process(home, agent, sqld.token)
        try:
            wait_for(lambda: not engine.has_work(), 60, "the outbox to drain")
        finally:
            daemon.send_signal(signal.SIGTERM)
            _, err = daemon.communicate(timeout=30)
        assert daemon.returncode == 0, err.decode()
        assert b"Traceback" not in err and sqld.token.encode() not in err
        check_remote(direct, engine, mem, conversations, set())
        assert killed_mid_request > 0
    print(f"kills: {phases}")
    return phases


def test_daemon_kills_bounded(sqld: SqldServer, direct: HranaClient, tmp_path: Path) -> None:
    kill_run(sqld, direct, tmp_path / "home", seed=11, kills=4)


@pytest.mark.chaos
def test_daemon_killed_mid_push_50_times(
    sqld: SqldServer, direct: HranaClient, tmp_path: Path
) -> None:
    phases = kill_run(sqld, direct, tmp_path / "home", seed=12, kills=50)
    # The run did kill in both dangerous windows: before and after the server's commit.
    assert phases["in flight, committed"] > 0 and phases["in flight, not committed"] > 0
