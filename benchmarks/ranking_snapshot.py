"""Ranked results of many queries as JSON, to show that a change to the read path ranks the same.

    python -m benchmarks.ranking_snapshot build HOME --size 20000   # a store with a fixed clock
    python -m benchmarks.ranking_snapshot dump HOME out.json        # 200 queries' results
    python -m benchmarks.ranking_snapshot compare before.json after.json

Build once, then dump with the old and the new code on copies of the same home (ids are random
per store): every hit's id, score and whole explanation must be equal. The queries cover the
default retrieve and its tier, category, budget and time-cue variants.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.agent_gen import generate, queries
from tiermem.core.engine import Memory

NOW = 1_780_000_000.0
"""The fixed clock of the build and of every dump (tier scores decay with time)."""
YEAR = 365.25 * 86400.0
CUES = ["last week", "in May", "yesterday", "last year", "in 2025"]


def build(home: Path, size: int) -> None:
    with Memory(home, clock=lambda: NOW) as mem:
        facts = list(generate(size, 7, NOW - 5 * YEAR))
        for lo in range(0, len(facts), 1000):
            mem.store_many(facts[lo : lo + 1000])


def cases(n: int) -> list[tuple[str, dict[str, Any]]]:
    """`n` default queries, then the same words with filters, a budget and time cues."""
    qs = queries(n, 8)
    out: list[tuple[str, dict[str, Any]]] = [(q, {}) for q in qs]
    out += [(q, {"tier": "warm"}) for q in qs[:20]]
    out += [(q, {"category": "projects"}) for q in qs[20:40]]
    out += [(q, {"budget": 120}) for q in qs[40:60]]
    out += [(q, {"limit": 20}) for q in qs[60:80]]
    out += [(f"{q} {CUES[i % len(CUES)]}", {}) for i, q in enumerate(qs[80:100])]
    out += [("the", {}), ("kube", {}), ('"quoted" OR NOT', {}), ("Sarah's deadline", {})]
    out += [("python databases tips", {}), ("garden repairs", {}), ("deploy", {"limit": 40})]
    return out


def dump(home: Path, n: int) -> list[dict[str, Any]]:
    out = []
    with Memory(home, clock=lambda: NOW) as mem:
        for query, options in cases(n):
            r = mem.retrieve(query, reinforce=False, **options)
            out.append(
                {
                    "query": query,
                    "options": options,
                    "terms": r.terms,
                    "categories": [dataclasses.asdict(c) for c in r.categories],
                    "candidates": r.candidates,
                    "tokens": r.tokens,
                    "notes": r.notes,
                    "windows": r.time_windows,
                    "hits": [
                        {"id": h.memory.id, "text": h.memory.text}
                        | dataclasses.asdict(h.explanation)
                        for h in r.hits
                    ],
                }
            )
    return out


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[str]:
    """The queries whose results differ in any way (ids, order, scores, explanations)."""
    if len(before) != len(after):
        return [f"{len(before)} results before, {len(after)} after"]
    return [f"{a['query']!r} {a['options']}" for a, b in zip(before, after, strict=True) if a != b]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ranking_snapshot")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("home", type=Path)
    b.add_argument("--size", type=int, default=20_000)
    d = sub.add_parser("dump")
    d.add_argument("home", type=Path)
    d.add_argument("out", type=Path)
    d.add_argument("--queries", type=int, default=200)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.home, args.size)
    elif args.command == "dump":
        args.out.write_text(json.dumps(dump(args.home, args.queries), indent=1) + "\n")
    else:
        old, new = (json.loads(p.read_text()) for p in (args.before, args.after))
        differ = compare(old, new)
        hits = sum(len(r["hits"]) for r in old)
        print(f"{len(old)} queries, {hits} hits: {len(differ)} differ")
        for line in differ[:20]:
            print("  " + line)
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
