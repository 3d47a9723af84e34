"""Tags at query time against tags in the full-text index: what a tagged query costs when tags
are read from `memory_extras`, and what rebuilding the FTS5 index (the price of a tags column
in it) costs on the same home.

    .venv/bin/python -m benchmarks.tags_bench [--memories 20000] [--tagged 2000] [--queries 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.agent_gen import generate
from tiermem.core import hygiene
from tiermem.core.engine import Memory

MS = 1000.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=20000)
    parser.add_argument("--tagged", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp) / "home") as mem:
        facts = list(generate(args.memories, 7, time.time() - 86400 * 365))
        ids = []
        for lo in range(0, len(facts), 1000):
            ids += [o.id for o in mem.store_many(facts[lo : lo + 1000])]
        with mem.db.transaction():
            for i, memory_id in enumerate(ids[: args.tagged]):
                hygiene.set_extras(mem, memory_id, [f"topic-{i % 50}", "benchmark"], None)
        timings: dict[str, list[float]] = {
            "tag word": [],
            "tag: filter + words": [],
            "no tag (baseline)": [],
        }
        queries = {
            "tag word": "topic-7",
            "tag: filter + words": "tag:benchmark project deadline",
            "no tag (baseline)": "project deadline",
        }
        for _ in range(args.queries):
            for name, query in queries.items():
                began = time.perf_counter()
                mem.retrieve(query, reinforce=False)
                timings[name].append((time.perf_counter() - began) * MS)
        began = time.perf_counter()
        with mem.db.transaction():
            mem.db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('rebuild')")
        rebuild = (time.perf_counter() - began) * MS
    print(f"{args.memories} memories, {args.tagged} tagged, {args.queries} queries each")
    for name, values in timings.items():
        print(f"  {name:<22} p50 {statistics.median(values):7.2f} ms")
    print(
        f"  FTS5 index rebuild      {rebuild:9.0f} ms (what a tags column in it costs at migration)"
    )


if __name__ == "__main__":
    main()
