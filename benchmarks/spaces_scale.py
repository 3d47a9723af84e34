"""A shared space under load, against a real sqld (JWT auth) on loopback: 20 member devices
(one writer home each) write and read one space concurrently while it grows.

Per size step: every member stores `--writes` memories into the space and pushes, all at once
(threads), then pulls until it holds everything the round wrote; reported are push and pull
latency p50/p95, the convergence time (start of the round → the last member holding all of
it) and the server's bytes per memory. `python -m benchmarks.spaces_scale --quick` (to 2k
memories) and the default (to 10k): members pull the owner's growth too. `--full` (10k, 50k,
100k): the owner bulk-loads the growth through the real push path, and members are devices
that already hold the history (their pull cursor moves past it, as after their last pull), so
each round measures the work of a team at that size; at the end a late member joins and pulls
the whole history once (a new member's first pull). docs/spaces.md has the capacity plan built
on these numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
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
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import HranaClient
from tiermem.sync.vault.retry import RetryPolicy

SPACE = "loadtest"
RESULT = Path(__file__).parent / "results" / "spaces_scale.json"
PAGE = 500
"""Rows per pull page (the pull's own page size)."""


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
        for chunk in range(0, len(facts), 2000):
            space.store_many(facts[chunk : chunk + 2000], count_tokens=False)
    vaults.sync_included(owner, _policy(), pull=False)  # members' writes: not needed here


def _held(space: Memory) -> int:
    return int(
        space.db.scalar("SELECT count(*) FROM memories WHERE agent_id = ?", (space.agent_id,))
    )


def _caught_up(root: Path, name: str, server: SqldServer) -> None:
    """A member that already holds the space's history: its pull cursor moves past the
    server's newest row, where its last pull would have left it."""
    with HranaClient(server.url, server.token, timeout=30.0) as client:
        newest = int(str(client.execute("SELECT COALESCE(max(seq), 0) FROM records").rows[0][0]))
    with Memory(root, name) as mem, mem.open_space(SPACE) as space, space.db.transaction():
        space.db.execute(
            "INSERT INTO sync_progress (agent_id, pull_cursor) VALUES (?, ?) "
            "ON CONFLICT (agent_id) DO UPDATE SET pull_cursor = excluded.pull_cursor",
            (space.agent_id, newest),
        )


Target = Callable[[int], int]
"""What a member must hold at the end of a round, from what it held at the start."""


def _grows_by(new: int) -> Target:
    return lambda held: held + new


def _reaches(expected: int) -> Target:
    return lambda _held: expected


def _member_round(root: Path, name: str, writes: int, step: int, target: Target) -> dict[str, Any]:
    """One member: write, push, then pull until the space holds what the round expects."""
    with Memory(root, name) as mem, mem.open_space(SPACE) as space:
        expected = target(_held(space))
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
                held = _held(space)
                if held >= expected or len(pulls) > 200:
                    done = time.perf_counter()
                    return {"push": push_s, "pulls": pulls, "done": done, "all": held >= expected}


def _say(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _server_bytes(server: SqldServer) -> int:
    with HranaClient(server.url, server.token, timeout=30.0) as client:
        rows = client.execute("SELECT COALESCE(sum(length(envelope)), 0) FROM records").rows
    return int(str(rows[0][0]))


def _first_page_ms(server: SqldServer) -> float:
    """The server's time for the first page of a pull from the start of the space's history
    (what a new member's first request costs), as the pull sends it."""
    with HranaClient(server.url, server.token, timeout=120.0) as client:
        tag = client.execute(
            "SELECT agent_tag FROM records GROUP BY agent_tag ORDER BY count(*) DESC LIMIT 1"
        ).rows[0][0]
        assert isinstance(tag, bytes)
        t0 = time.perf_counter()
        client.execute(*store.pull_page(tag, 0, PAGE))
        return round((time.perf_counter() - t0) * 1000, 1)


def run(members: int, steps: list[int], writes: int, tmp: Path, full: bool) -> dict[str, Any]:
    """Every step: the owner grows the space, then one round of all members at once; `full`:
    members already hold the growth, and after the first step a late member pulls it all."""
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
            _say(f"{members} members joined")
            report: dict[str, Any] = {
                "members": members,
                "writes_per_member": writes,
                "members_hold_history": full,
                "join_seconds_total": round(time.perf_counter() - t0, 2),
                "steps": [],
            }
            held = 0
            for step, size in enumerate(steps):
                report["steps"].append(
                    _step(owner, tmp, names, writes, step, size - held, server, full)
                )
                held = report["steps"][-1]["memories"]
                if full and step == 0:
                    report["late_member"] = _late_member(owner, tmp, server, held)
                    _say(json.dumps(report["late_member"]))
            return report
    finally:
        server.stop()


def _step(
    owner: Memory,
    tmp: Path,
    names: list[str],
    writes: int,
    step: int,
    growth: int,
    server: SqldServer,
    full: bool,
) -> dict[str, Any]:
    """The owner grows the space by `growth` memories, then one round of every member."""
    held = _held_by_owner(owner)
    t0 = time.perf_counter()
    _fill(owner, growth, held)
    fill_s = time.perf_counter() - t0
    _say(f"{held + growth} memories loaded in {fill_s:.1f} s")
    if full:
        for name in names:
            _caught_up(tmp / name, name, server)
    new = len(names) * writes
    expected = held + growth + step * new + new
    target = _grows_by(new) if full else _reaches(expected)
    row = _round(tmp, names, writes, step, target, server, expected)
    row = {"bulk_push_s": round(fill_s, 1), "first_page_ms": _first_page_ms(server), **row}
    _say(json.dumps(row))
    return row


def _held_by_owner(owner: Memory) -> int:
    with owner.open_space(SPACE) as space:
        return _held(space)


def _round(
    tmp: Path,
    names: list[str],
    writes: int,
    step: int,
    target: Target,
    server: SqldServer,
    memories: int,
) -> dict[str, Any]:
    """All members write, push and pull at once; the round's latencies and convergence."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        out = list(pool.map(lambda n: _member_round(tmp / n, n, writes, step, target), names))
    pushes = [r["push"] for r in out]
    pulls = [p for r in out for p in r["pulls"]]
    return {
        "memories": memories,
        "push_ms_p50": round(_pct(pushes, 0.5), 1),
        "push_ms_p95": round(_pct(pushes, 0.95), 1),
        "pull_ms_p50": round(_pct(pulls, 0.5), 1),
        "pull_ms_p95": round(_pct(pulls, 0.95), 1),
        "pulls_per_member": round(len(pulls) / len(names), 1),
        "convergence_s": round(max(r["done"] for r in out) - started, 2),
        "converged": all(r["all"] for r in out),
        "server_bytes_per_memory": round(_server_bytes(server) / memories),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def _late_member(owner: Memory, tmp: Path, server: SqldServer, memories: int) -> dict[str, Any]:
    """A member joining the grown space pulls its whole history once, alone."""
    _join(owner, tmp / "late", "late", server)
    with Memory(tmp / "late", "late") as mem, mem.open_space(SPACE) as space:
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        with SyncEngine(space) as engine:
            pulls = 0
            while _held(space) < memories and pulls < 20:
                engine.pull(_policy())
                pulls += 1
        seconds = time.perf_counter() - t0
        held = _held(space)
    return {
        "memories": held,
        "first_pull_s": round(seconds, 1),
        "ms_per_memory": round(seconds * 1000 / max(held, 1), 2),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="grow to 2k memories")
    size.add_argument(
        "--full", action="store_true", help="10k, 50k, 100k (members hold the history)"
    )
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--writes", type=int, default=5, help="memories per member per step")
    args = parser.parse_args(argv)
    steps = [1000, 2000] if args.quick else [1000, 5000, 10000]
    if args.full:
        steps = [10000, 50000, 100000]
    with tempfile.TemporaryDirectory() as tmp:
        report = run(args.members, steps, args.writes, Path(tmp), args.full)
    result = RESULT.with_name("spaces_scale_full.json") if args.full else RESULT
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
