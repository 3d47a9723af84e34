"""Three devices, random operations, faulted requests: everything converges, nothing is lost.

Each run: one device sets sync up, two more join by restoring into new homes (each gets its own
device id and key); then `ops` random operations on random devices — stores (from a small
vocabulary, so two devices often store the same fact), forgets, tier changes, access
reinforcement, hot edits, pushes, pulls and syncs — all through one fault proxy that fails
≥ 20 % of the requests (5xx, 429, resets before and after the commit, truncated answers).
Then every device syncs until a whole round changes nothing, and the checks are:

- 0 lost: every fact stored and never forgotten anywhere is on every device; every identity
  key written anywhere is there; nothing appears that was never stored;
- 0 duplicated: one row per fact; every device's manifests are numbered 1..n without a gap
  or a repeat;
- converged: the same decrypted rows (every column that syncs) and the same hot state and tree
  on every device, full-text search consistent with the rows.

The default suite runs one short run; `-m chaos` runs 50 seeds × 1,000 operations.
`TIERMEM_CONVERGENCE_SEED=N` replays one seed (with `TIERMEM_CONVERGENCE_OPS` to change the
length); every run prints its seed.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import FakeSleep
from tests.sync.sqld import SqldServer
from tiermem.core import curate, snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound
from tiermem.core.warm import Tier
from tiermem.sync import crypto, records
from tiermem.sync.engine import SyncEngine
from tiermem.sync.manifest import decode_manifest
from tiermem.sync.restore import restore
from tiermem.sync.vault.hrana import HranaClient, HranaError, is_retryable
from tiermem.sync.vault.retry import RetryPolicy

FAULTS: dict[faultproxy.Fault, float] = {
    faultproxy.PASS: 68.0,
    faultproxy.status(500): 4.0,
    faultproxy.status(502): 3.0,
    faultproxy.status(503): 4.0,
    faultproxy.status(429, retry_after="0"): 3.0,
    faultproxy.RESET: 3.0,
    faultproxy.Fault("reset", forward=True): 2.0,
    faultproxy.DROP_AFTER_COMMIT: 5.0,
    faultproxy.TRUNCATE: 2.0,
}
WORDS = ("otter", "heron", "quince", "basalt", "lantern", "cobalt", "fjord", "saffron")
TIERS: tuple[Tier, ...] = ("warm", "cold", "frozen")
COLUMNS = (
    "id, text, category, importance, created_at, access_count, last_access, tier, "
    "tier_changed_at, urls, commands, paths, source, size_bytes, tokens, pinned"
)
MAX_QUIET_ROUNDS = 12


@dataclass
class Clock:
    """Simulated time shared by the devices: every operation moves it on a little."""

    now: float = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Oracle:
    stored: set[str] = field(default_factory=set)
    forgotten: set[str] = field(default_factory=set)
    identity: set[str] = field(default_factory=set)
    pushes: int = 0
    pulls: int = 0
    failed: int = 0


class Device:
    def __init__(self, home: Path, agent: str, clock: Clock) -> None:
        self.mem = Memory(home, agent, clock=clock)
        self.engine = SyncEngine(self.mem, timeout=10.0, batch_bytes=64 * 1024)

    def close(self) -> None:
        self.engine.close()
        self.mem.close()

    def ids(self) -> list[str]:
        return [str(r[0]) for r in self.mem.db.query("SELECT id FROM memories ORDER BY seq")]

    def rows(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.mem.db.query(f"SELECT {COLUMNS} FROM memories ORDER BY id")]

    def critical(self) -> bytes:
        state = snapshot.dump(self.mem)
        return snapshot.canonical({"hot": state["hot"], "tree": state["tree"]})


def _operation(
    rng: random.Random, dev: Device, oracle: Oracle, policy: Callable[[int | None], RetryPolicy]
) -> None:
    mem = dev.mem
    kind = rng.choices(
        ["store", "forget", "tier", "reinforce", "hot", "push", "pull", "sync"],
        weights=[30, 6, 10, 12, 10, 9, 9, 6],
    )[0]
    ids = dev.ids()
    if kind == "store" or (not ids and kind in ("forget", "tier", "reinforce")):
        n = rng.randrange(400)
        text = f"fact {n} about the {rng.choice(WORDS)} and the {WORDS[n % len(WORDS)]}"
        oracle.stored.add(mem.store(text, f"topics/{WORDS[n % 4]}", rng.random()).id)
    elif kind == "forget":
        fid = rng.choice(ids)
        try:
            curate.move_to_forgotten(mem, fid)
        except NotFound:
            return
        oracle.forgotten.add(fid)
    elif kind == "tier":
        with mem.db.transaction():
            mem.memories.move([rng.choice(ids)], rng.choice(TIERS), mem.now())
    elif kind == "reinforce":
        with mem.db.transaction():
            mem.memories.reinforce(rng.sample(ids, min(3, len(ids))), mem.now())
    elif kind == "hot":
        key = f"k{rng.randrange(6)}"
        mem.update_hot("identity", {key: f"v{rng.randrange(10**6)}"})
        oracle.identity.add(key)
    else:
        try:
            if kind == "push":
                dev.engine.push(policy(2))
                oracle.pushes += 1
            elif kind == "pull":
                dev.engine.pull(policy(2))
                oracle.pulls += 1
            else:
                dev.engine.sync(policy(2))
        except HranaError as exc:
            assert is_retryable(exc), exc
            oracle.failed += 1


def _sync_until_quiet(devices: list[Device], policy: Callable[[int | None], RetryPolicy]) -> int:
    for round_ in range(1, MAX_QUIET_ROUNDS + 1):
        busy = False
        for dev in devices:
            pulled, pushed = dev.engine.sync(policy(None))
            busy = busy or pulled.applied > 0 or pushed.pushed
        if not busy:
            return round_
    pytest.fail(f"the devices did not converge within {MAX_QUIET_ROUNDS} sync rounds")


def _manifest_numbers(client: HranaClient, dev: Device) -> list[int]:
    s = dev.engine.require_ready()
    key = dev.engine.epoch_key(s.epoch, s)
    rid = records.record_id(dev.engine.id_key(s), records.MANIFEST_TABLE, s.device_id.hex())
    rows = client.execute(
        "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
        "WHERE record_id = ? ORDER BY seq",
        (rid,),
    ).rows
    return sorted(
        decode_manifest(
            records.open_row(key, dev.mem.agent_id, records.MANIFEST_TABLE, records.remote_row(r))
        ).n
        for r in rows
    )


def convergence_run(url: str, token: str, root: Path, seed: int, ops: int) -> dict[str, Any]:
    with HranaClient(url, token, timeout=10.0) as client:
        return _run(url, token, client, root, seed, ops)


def _run(
    url: str, token: str, client: HranaClient, root: Path, seed: int, ops: int
) -> dict[str, Any]:
    print(f"convergence run seed={seed} ops={ops} (replay: TIERMEM_CONVERGENCE_SEED={seed})")
    started = time.perf_counter()
    rng = random.Random(seed)
    clock = Clock()
    sleep = FakeSleep()

    def policy(attempts: int | None) -> RetryPolicy:
        return RetryPolicy(max_attempts=attempts, sleep=sleep, jitter=lambda cap: 0.0)

    agent = f"conv-{seed}-{uuid.uuid4().hex[:8]}"
    oracle = Oracle()
    devices: list[Device] = []
    with FaultProxy(url, seed=seed) as proxy:
        try:
            first = Device(root / "d0", agent, clock)
            devices.append(first)
            key = crypto.generate_recovery_key()
            first.engine.init(proxy.url, token, key, policy=policy(None), new_vault=True)
            first.engine.push(policy(None))
            for i in (1, 2):
                restore(
                    root / f"d{i}",
                    agent,
                    proxy.url,
                    token,
                    recovery_key=key,
                    policy=policy(None),
                    clock=clock,
                )
                devices.append(Device(root / f"d{i}", agent, clock))
            proxy.weights = dict(FAULTS)
            before = len(proxy.log)
            for _ in range(ops):
                clock.now += rng.uniform(0.001, 5.0)
                _operation(rng, rng.choice(devices), oracle, policy)
            rounds = _sync_until_quiet(devices, policy)
            faulted = [e for e in proxy.log[before:] if e.fault != faultproxy.PASS]
            share = len(faulted) / max(len(proxy.log) - before, 1)
            assert proxy.errors == [], proxy.errors

            reference = devices[0].rows()
            ids = {str(r[0]) for r in reference}
            assert len(ids) == len(reference)
            assert oracle.stored - oracle.forgotten <= ids, "a stored fact was lost"
            assert ids <= oracle.stored, "a fact appeared that nobody stored"
            texts = [str(r[1]) for r in reference]
            assert len(set(texts)) == len(texts), "a fact is stored twice"
            for dev in devices:
                assert dev.rows() == reference, "the devices hold different memories"
                assert dev.critical() == devices[0].critical(), "the hot state differs"
                assert oracle.identity <= set(dev.mem.hot().identity), "a hot edit was lost"
                assert not dev.engine.has_work()
                dev.mem.db.execute(
                    "INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')"
                )
                word = WORDS[0]
                found = dev.mem.db.scalar(
                    "SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?",
                    (f"text:{word}",),
                )
                assert found == sum(word in t for t in texts)
                numbers = _manifest_numbers(client, dev)
                assert numbers == list(range(1, len(numbers) + 1)), "manifest gap or repeat"
            (total,) = client.execute(
                "SELECT count(*) FROM records WHERE agent_tag = ?",
                (crypto.keyed_agent_tag(key, agent),),
            ).rows
        finally:
            for dev in devices:
                dev.close()
    outcome = {
        "seed": seed,
        "ops": ops,
        "memories": len(reference),
        "faulted_share": round(share, 3),
        "requests": len(proxy.log) - before,
        "failed_calls": oracle.failed,
        "quiet_after_rounds": rounds,
        "remote_rows": total[0],
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(f"convergence outcome {outcome}")
    assert share >= 0.2, f"only {share:.0%} of the requests were faulted"
    return outcome


def _seeds(default: list[int]) -> list[int]:
    replay = os.environ.get("TIERMEM_CONVERGENCE_SEED")
    return [int(replay)] if replay else default


def _ops(default: int) -> int:
    return int(os.environ.get("TIERMEM_CONVERGENCE_OPS", default))


def test_three_devices_converge_short(sqld: SqldServer, tmp_path: Path) -> None:
    for seed in _seeds([8]):
        convergence_run(sqld.url, sqld.token, tmp_path / str(seed), seed, _ops(200))


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """Homes and a server of their own on tmpfs when there is one: the runs are real libSQL
    files and a real sqld, without paying the disk's fsync 50 000 times."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(
        prefix="tiermem-convergence-", dir=shm if shm.is_dir() else None
    ) as root:
        yield Path(root)


@pytest.mark.chaos
def test_three_devices_converge_50_runs_of_1000_operations(scratch: Path) -> None:
    started = time.perf_counter()
    runs = int(os.environ.get("TIERMEM_CONVERGENCE_RUNS", 50))
    workers = int(os.environ.get("TIERMEM_CONVERGENCE_WORKERS", 4))
    server = SqldServer(scratch / "sqld")
    server.start()
    try:
        seeds = _seeds(list(range(1000, 1000 + runs)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [
                pool.submit(
                    convergence_run, server.url, server.token, scratch / str(s), s, _ops(1000)
                )
                for s in seeds
            ]
            outcomes = [f.result() for f in futures]
    finally:
        server.stop()
    faulted = sum(o["faulted_share"] * o["requests"] for o in outcomes)
    requests = sum(o["requests"] for o in outcomes)
    print(
        f"convergence: {len(outcomes)} runs x {_ops(1000)} ops x 3 devices, {requests} requests, "
        f"{faulted / max(requests, 1):.1%} faulted, 0 lost, 0 duplicated, all converged, "
        f"{time.perf_counter() - started:.0f} s"
    )
