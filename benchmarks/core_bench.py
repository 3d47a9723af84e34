"""Core engine benchmark: store throughput, retrieval latency against raw FTS5, context size.

    .venv/bin/python -m benchmarks.core_bench [--memories 100000] [--seed 7]

Builds a fresh home in a temp folder with a generated 5-year agent, and prints numbers and
ratios measured in this run (the baseline is a raw FTS5 bm25() query on the same data).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.agent_gen import CATEGORIES, generate, queries
from tiermem.core.engine import Memory
from tiermem.core.errors import LimitExceeded
from tiermem.core.terms import fts_match, query_terms
from tiermem.core.tokens import count_tokens
from tiermem.core.warm import NewFact

YEAR = 365.25 * 86400.0


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def timed(fn, *args, **kwargs) -> float:
    started = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - started


def bench_retrieval(mem: Memory, qs: list[str], label: str) -> dict[str, float]:
    for q in qs[:20]:  # warm the page cache
        mem.retrieve(q, reinforce=False)
    ours = [timed(mem.retrieve, q) for q in qs]
    no_reinforce = [timed(mem.retrieve, q, reinforce=False) for q in qs]
    sql = (
        "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
        "ORDER BY bm25(memories_fts) LIMIT 5"
    )
    raw = []
    for q in qs:
        match = fts_match(query_terms(q, mem.cfg.retrieval.max_query_terms))
        raw.append(timed(mem.db.query, sql, (match,)))
    ms = 1000.0
    row = {
        "p50": statistics.median(ours) * ms,
        "p99": percentile(ours, 99) * ms,
        "p50_read_only": statistics.median(no_reinforce) * ms,
        "raw_p50": statistics.median(raw) * ms,
        "raw_p99": percentile(raw, 99) * ms,
    }
    row["ratio"] = row["p50"] / row["raw_p50"]
    row["ratio_read_only"] = row["p50_read_only"] / row["raw_p50"]
    print(
        f"retrieve @ {label:>7}: p50 {row['p50']:.2f} ms  p99 {row['p99']:.2f} ms  "
        f"(read-only p50 {row['p50_read_only']:.2f} ms) | raw FTS5 bm25 p50 "
        f"{row['raw_p50']:.2f} ms p99 {row['raw_p99']:.2f} ms | ratio {row['ratio']:.2f}x "
        f"(read-only {row['ratio_read_only']:.2f}x)"
    )
    return row


def fill_hot(mem: Memory) -> None:
    mem.update_hot("identity", {"agent_name": "Claw", "owner_name": "Sam", "trust_level": 0.95})
    mem.update_hot(
        "owner_profile",
        {
            "timezone": "Europe/Paris",
            "work_hours": "9-18",
            "topics_loved": ["systems", "cycling", "cooking"],
        },
    )
    for i in range(25):
        mem.add_lesson(
            f"Lesson {i}: double-check the deploy checklist before release {i}",
            0.5 + i / 100,
            "lessons/ops",
        )
    for i in range(12):  # a full hot memory refuses what cannot fit: the benchmark keeps going
        with contextlib.suppress(LimitExceeded):
            mem.add_event(f"Event {i}: shipped milestone {i} with the team")
        with contextlib.suppress(LimitExceeded):
            mem.add_task(f"Task {i}: follow up on the roadmap item {i}")
    for i in range(4):
        mem.add_project(f"Project {i}", f"Long-running project number {i}", "active")


def context_size(mem: Memory, qs: list[str]) -> tuple[int, int]:
    sizes = [mem.context_block(mem.retrieve(q, limit=5, reinforce=False)) for q in qs[:20]]
    block = max(sizes, key=len)
    return len(block.encode()), count_tokens(block)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    start = time.time() - 5 * YEAR
    facts = list(generate(args.memories, args.seed, start))
    qs = queries(args.queries, args.seed + 1)
    print(
        f"generated {len(facts)} facts over {len({f.category for f in facts})} categories "
        f"(of {len(CATEGORIES)}), 5 years, seed {args.seed}"
    )
    with tempfile.TemporaryDirectory(prefix="tiermem-bench-") as tmp:
        one = Memory(Path(tmp) / "one")
        sample = [NewFact(f.text + " (single)", f.category, f.importance) for f in facts[:2000]]
        elapsed = sum(timed(one.store, f.text, f.category, f.importance) for f in sample)
        one.close()
        print(
            f"store one-by-one: {len(sample) / elapsed:,.0f} facts/s "
            f"({elapsed / len(sample) * 1000:.2f} ms each, one transaction per fact)"
        )

        clock = {"now": start + 3600}
        mem = Memory(Path(tmp) / "agent", clock=lambda: clock["now"])
        day_one = [f for f in facts if f.created_at is not None and f.created_at < start + 86400]
        mem.store_many(day_one[:50])
        fill_hot(mem)
        size_day1 = context_size(mem, qs)
        print(
            f"context (hot + tree + top-5) day 1: {size_day1[0]:,} bytes, {size_day1[1]:,} tokens"
        )

        batched = 0.0
        results = []
        for lo in range(0, len(facts), 1000):
            batched += timed(mem.store_many, facts[lo : lo + 1000])
            if lo + 1000 == 10_000:
                results.append(bench_retrieval(mem, qs, "10k"))
        print(
            f"store batched: {len(facts) / batched:,.0f} facts/s "
            f"(batches of 1,000, FTS index and tree maintained)"
        )
        clock["now"] = time.time()
        report = mem.consolidate("full")
        after = report.after
        assert after is not None
        print(
            f"full consolidation of {len(facts):,} memories: evicted {len(report.evicted):,}, "
            f"promoted {len(report.promoted)}; warm {after.warm_bytes:,} bytes "
            f"({after.warm_count} facts), cold {after.cold_count:,}, "
            f"frozen {after.frozen_count:,}"
        )
        results.append(bench_retrieval(mem, qs, f"{len(facts) // 1000}k"))
        hot, tree = mem.hot_size_bytes(), mem.trees.load().size_bytes()
        size_year5 = context_size(mem, qs)
        print(f"hot {hot:,} bytes + tree {tree:,} bytes = {hot + tree:,} bytes (target <= 7 KB)")
        print(
            f"context (hot + tree + top-5) year 5: {size_year5[0]:,} bytes, "
            f"{size_year5[1]:,} tokens (day 1: {size_day1[1]:,} tokens; "
            f"ratio {size_year5[1] / size_day1[1]:.2f}x)"
        )
        flat = mem.memories.total_tokens()
        print(
            f"flat MEMORY.md with everything would be {flat:,} tokens "
            f"({flat / size_year5[1]:,.0f}x the tiered context)"
        )
        mem.close()


if __name__ == "__main__":
    main()
