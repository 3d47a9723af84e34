"""A shared space under load, against a real sqld (JWT auth) on loopback: 20 member devices
(one writer home each) write and read one space concurrently while it grows.

Per size step: every member stores `--writes` memories into the space and pushes, all at once
(threads), then pulls until it holds everything the round wrote; reported are push and pull
latency p50/p95, the convergence time (start of the round → the last member holding all of
it) and the server's bytes per memory. `python -m benchmarks.spaces_scale --quick` (to 2k
memories), the default grows to 10k, `--full` to 100k. docs/spaces.md has the capacity plan
built on these numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.sync.sqld import SqldServer
from tiermem.core import spaces
from tiermem.core.engine import Memory
from tiermem.core.warm import NewFact
from tiermem.sync import crypto
from tiermem.sync.devices.pairing_approval import answer_pairing
from tiermem.sync.devices.pairing_exchange import start_pairing
from tiermem.sync.engine import SyncEngine
from tiermem.sync.spaces import vaults
from tiermem.sync.vault.hrana import HranaClient
from tiermem.sync.vault.retry import RetryPolicy

SPACE = "loadtest"
RESULT = Path(__file__).parent / "results" / "spaces_scale.json"


def _policy() -> RetryPolicy:
    return RetryPolicy(max_attempts=8)


def _nap(seconds: float) -> None:
    time.sleep(min(seconds, 0.02))


def _join(owner: Memory, root: Path, name: str, server: SqldServer) -> None:
    """A member's home joins the space by pairing with the owner's device, as a writer."""
    with Memory(root, name) as mem, mem.open_space(SPACE) as joining:
        pairing = start_pairing(joining, server.url, server.token, name, sleep=_nap)
        try:
            with vaults.open_engine(owner, SPACE) as engine:
                approval = answer_pairing(engine, sleep=_nap, role="writer")
                code = pairing.wait_code()
                approval.wait_code()
                approval.approve(code)
            pairing.finish()
        finally:
            pairing.close()
        with SyncEngine(joining) as engine:
            vaults.adopt(mem, engine)


def _fill(owner: Memory, count: int, start: int) -> None:
    """The owner adds `count` memories to the space and pushes them (the history grows)."""
    with owner.open_space(SPACE) as space:
        facts = [
            NewFact(f"Team note {i}: service {i % 97} owns queue {i % 13}", f"teams/t{i % 50}")
            for i in range(start, start + count)
        ]
        for chunk in range(0, len(facts), 500):
            space.store_many(facts[chunk : chunk + 500])
    vaults.sync_included(owner, _policy())


def _member_round(root: Path, name: str, writes: int, step: int, expected: int) -> dict[str, Any]:
    """One member: write, push, then pull until the space holds `expected` memories."""
    with Memory(root, name) as mem, mem.open_space(SPACE) as space:
        for i in range(writes):
            space.store(f"{name} observed event {step}-{i} on host h{i % 7}", f"events/{name}")
        with SyncEngine(space) as engine:
            t0 = time.perf_counter()
            engine.push(_policy())
            push_s = time.perf_counter() - t0
            pulls: list[float] = []
            while True:
                t0 = time.perf_counter()
                engine.pull(_policy())
                pulls.append(time.perf_counter() - t0)
                held = int(space.db.scalar(
                    "SELECT count(*) FROM memories WHERE agent_id = ?", (space.agent_id,)
                ))  # fmt: skip
                if held >= expected or len(pulls) > 200:
                    return {"push": push_s, "pulls": pulls, "done": time.perf_counter()}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _server_bytes(server: SqldServer) -> int:
    with HranaClient(server.url, server.token, timeout=30.0) as client:
        rows = client.execute("SELECT COALESCE(sum(length(envelope)), 0) FROM records").rows
    return int(str(rows[0][0]))


def run(members: int, steps: list[int], writes: int, tmp: Path) -> dict[str, Any]:
    server = SqldServer(tmp / "sqld")
    server.start()
    try:
        with Memory(tmp / "owner", "owner") as owner:
            spaces.create(owner.db, SPACE, "owner", owner.now())
            owner.open_space(SPACE).close()
            vaults.share(
                owner, SPACE, server.url, server.token, crypto.generate_recovery_key(),
                policy=_policy(),
            )  # fmt: skip
            t0 = time.perf_counter()
            names = [f"m{i:02d}" for i in range(members)]
            for name in names:
                _join(owner, tmp / name, name, server)
            join_s = time.perf_counter() - t0
            held = 0
            report: dict[str, Any] = {"members": members, "writes_per_member": writes,
                                      "join_seconds_total": round(join_s, 2), "steps": []}  # fmt: skip
            for step, target in enumerate(steps):
                _fill(owner, target - held, held)
                held = target
                expected = held + members * writes
                started = time.perf_counter()
                with ThreadPoolExecutor(max_workers=members) as pool:
                    out = list(
                        pool.map(
                            lambda n, st=step, ex=expected: _member_round(
                                tmp / n, n, writes, st, ex
                            ),
                            names,
                        )
                    )
                held = expected
                pushes = [r["push"] for r in out]
                pulls = [p for r in out for p in r["pulls"]]
                report["steps"].append({
                    "memories": held,
                    "push_ms_p50": round(_pct(pushes, 0.5), 1),
                    "push_ms_p95": round(_pct(pushes, 0.95), 1),
                    "pull_ms_p50": round(_pct(pulls, 0.5), 1),
                    "pull_ms_p95": round(_pct(pulls, 0.95), 1),
                    "pulls_per_member": round(len(pulls) / members, 1),
                    "convergence_s": round(max(r["done"] for r in out) - started, 2),
                    "server_bytes_per_memory": round(_server_bytes(server) / held),
                })  # fmt: skip
                print(json.dumps(report["steps"][-1]), file=sys.stderr)
            return report
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="grow to 2k memories")
    size.add_argument("--full", action="store_true", help="grow to 100k memories")
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--writes", type=int, default=5, help="memories per member per step")
    args = parser.parse_args(argv)
    steps = [1000, 2000] if args.quick else [1000, 5000, 10000]
    if args.full:
        steps += [50000, 100000]
    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.members, steps, args.writes, Path(tmp))
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
