"""MCP benchmark: `memory_recall` through `tiermem mcp` (stdio round trip, the SDK's own client)
against the same recall in-process, on the same generated home, measured in the same run.

    .venv/bin/python -m benchmarks.mcp_bench [--memories 100000] [--queries 200] [--seed 7]

Both sides run `core.context.recall` with the default 3,000-token budget and reinforcement on;
the difference is the protocol: JSON-RPC over the server's stdin/stdout, argument validation,
the result serialised twice (text and structured content). An MCP `ping` round trip is
measured too: the transport's floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from benchmarks.agent_gen import generate, queries
from benchmarks.core_bench import fill_hot, percentile
from tiermem.core import context
from tiermem.core.engine import Memory

YEAR = 365.25 * 86400.0
MS = 1000.0


def build_home(home: Path, n: int, seed: int) -> float:
    start = time.time() - 5 * YEAR
    facts = list(generate(n, seed, start))
    began = time.perf_counter()
    with Memory(home) as mem:
        for lo in range(0, len(facts), 1000):
            mem.store_many(facts[lo : lo + 1000])
        fill_hot(mem)
    return time.perf_counter() - began


def _local(mem: Memory, q: str, entries: list[int]) -> float:
    t0 = time.perf_counter()
    found = context.recall(mem, q)
    elapsed = time.perf_counter() - t0
    entries[0] += len(found.entries)
    return elapsed


async def _remote(session: ClientSession, q: str, entries: list[int]) -> float:
    t0 = time.perf_counter()
    result = await session.call_tool("memory_recall", {"query": q})
    elapsed = time.perf_counter() - t0
    assert not result.is_error, result.content
    assert result.structured_content is not None
    entries[1] += len(result.structured_content["entries"])
    return elapsed


async def measure(
    home: Path, qs: list[str]
) -> tuple[list[float], list[float], list[float], float, int, int]:
    """Each query in-process and over MCP, one right after the other in alternating order
    (paired, so load on the machine hits both sides alike); MCP pings as the transport's
    floor."""
    env = {"TIERMEM_HOME": str(home)}
    if os.environ.get("TIERMEM_DRIVER"):
        env["TIERMEM_DRIVER"] = os.environ["TIERMEM_DRIVER"]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tiermem.tui", "mcp"], env=env
    )
    local: list[float] = []
    remote: list[float] = []
    pings: list[float] = []
    entries = [0, 0]
    began = time.perf_counter()
    with open(os.devnull, "w") as log, Memory(home) as mem:
        async with (
            stdio_client(params, errlog=log) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("memory_hot", {})  # opens the home
            startup = time.perf_counter() - began
            for q in qs[:20]:  # warm both page caches
                context.recall(mem, q, reinforce=False)
                await session.call_tool("memory_recall", {"query": q})
            for i, q in enumerate(qs):
                if i % 2:  # alternate which side goes first: neither always finds warm caches
                    local.append(_local(mem, q, entries))
                    remote.append(await _remote(session, q, entries))
                else:
                    remote.append(await _remote(session, q, entries))
                    local.append(_local(mem, q, entries))
                t0 = time.perf_counter()
                await session.send_ping()
                pings.append(time.perf_counter() - t0)
    return local, remote, pings, startup, entries[0], entries[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    qs = queries(args.queries, args.seed + 1)
    with tempfile.TemporaryDirectory(prefix="tiermem-mcp-bench-") as tmp:
        home = Path(tmp) / "home"
        built = build_home(home, args.memories, args.seed)
        print(f"home: {args.memories:,} generated memories stored in {built:.1f} s")
        local, remote, pings, startup, local_entries, remote_entries = asyncio.run(
            measure(home, qs)
        )
    p50_local, p50_remote = statistics.median(local) * MS, statistics.median(remote) * MS
    overhead = statistics.median(r - x for r, x in zip(remote, local, strict=True)) * MS
    print(
        f"memory_recall in-process: p50 {p50_local:.2f} ms  p99 {percentile(local, 99) * MS:.2f} ms"
        f"  ({local_entries / len(qs):.1f} entries per recall, budget 3000 tokens)"
    )
    print(
        f"memory_recall over MCP stdio: p50 {p50_remote:.2f} ms  "
        f"p99 {percentile(remote, 99) * MS:.2f} ms  ({remote_entries / len(qs):.1f} entries)"
    )
    print(
        f"MCP overhead: +{overhead:.2f} ms per call (median of paired differences), p50 ratio "
        f"{p50_remote / p50_local:.2f}x;"
        f" ping round trip p50 {statistics.median(pings) * MS:.2f} ms;"
        f" server start to first answer {startup * MS:.0f} ms"
    )


if __name__ == "__main__":
    main()
