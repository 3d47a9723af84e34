"""The many-device part of the sync-scale benchmark: what one device's periodic pull costs when
W other devices each pushed R conversation-ends (a new memory and a hot-state change each)
since its last pull, for a few writers and for every device of the vault.

Devices run in this one process, one after another (each its own home, device id and roster
entry); what is measured is bytes and requests, not concurrency (tests/sync/test_chaos.py and
the research scripts run devices as processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.scale_wire import Wire
from benchmarks.sync_bench import fill_critical_state, small_hot_change
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore

AGENT = "team"


def run(tmp: Path, server: SqldServer, devices: int, rounds: int) -> dict[str, Any]:
    """Reader 0's pull after 1 writer, then after every other device, pushed `rounds` times."""
    key = crypto.generate_recovery_key()
    homes = [tmp / f"dev{i}" for i in range(devices)]
    wire = Wire()
    with Memory(homes[0], AGENT) as first, SyncEngine(first, transport=wire) as reader:
        fill_critical_state(first)
        reader.init(server.url, server.token, key, new_vault=True)
        reader.push()
        for home in homes[1:]:
            restore(home, AGENT, server.url, server.token, recovery_key=key)
        writers = [Memory(h, AGENT) for h in homes[1:]]
        engines = [SyncEngine(m) for m in writers]
        try:
            for e in engines:
                e.pull()
            reader.pull()
            out: dict[str, Any] = {"devices": devices, "rounds": rounds, "runs": []}
            for count in sorted({1, devices - 1}):
                for r in range(rounds):
                    for i, (m, e) in enumerate(zip(writers[:count], engines[:count], strict=True)):
                        m.store(f"device {i} round {r}: the ticket queue was triaged", "team")
                        small_hot_change(m, f"device {i} round {r}")
                        e.push()
                before = wire.snapshot()
                result = reader.pull()
                used = wire.snapshot().minus(before)
                out["runs"].append(
                    {
                        "writers": count,
                        "pushes": count * rounds,
                        "applied": result.applied,
                        "down": used.down,
                        "requests": used.requests,
                    }
                )
            return out
        finally:
            for e in engines:
                e.close()
            for m in writers:
                m.close()


def print_report(r: dict[str, Any]) -> None:
    print(
        f"\nmany devices ({r['devices']} devices, {r['rounds']} pushes per writer between pulls):"
    )
    print("| writers | pushes by others | reader's pull: bytes down, requests | bytes per writer |")
    print("|---:|---:|---|---:|")
    for x in r["runs"]:
        print(
            f"| {x['writers']} | {x['pushes']} | {x['down']:,}, {x['requests']} "
            f"| {x['down'] / x['writers']:,.0f} |"
        )
