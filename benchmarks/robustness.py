"""Retrieval on every shape of conversation: LongMemEval and variants of it (benchmarks/variants).

    .venv/bin/python -m benchmarks.robustness [--questions N] [--variants turns,user,...]
        [--repeat 5] [--hybrid N] [--embedders minilm,model2vec]

Questions are split into a dev and a test half by a hash of their id. On each variant's dev half
(the first N dev questions) every tiermem setting of `SETTINGS` is measured against the same-run
baselines, on one index per question (retrieval is a pure read here); the changes kept are those
that help or are neutral on every variant (no loss of recall@10 or MRR beyond 0.005 on any dev
half). The test half (the first N test questions) then reports the defaults, the fixed and no
length prior, any kept change, and the baselines, per variant and per question type. Latency:
per question the median over `--repeat` runs of wall and CPU (process) time; the ratio to the
baseline is of CPU p50. `--hybrid N` also measures hybrid and vector mode on N questions per
variant (of the test half, or the dev half with `--hybrid-half dev`) with each embedder (memory
embeddings are computed while indexing; the query's embedding is timed).
JSON goes to benchmarks/out/robustness-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.longmemeval import (
    Bm25s,
    Fts5,
    K,
    Scores,
    System,
    Tiermem,
    load,
    mean,
    parse_date,
    score_question,
)
from benchmarks.variants import BUILDERS, VARIANTS, Shaped, split_half
from tiermem.core import vectors
from tiermem.core.terms import fts_match, query_terms
from tiermem.core.warm import NewFact

OUT = Path(__file__).resolve().parent / "out"
BASELINE = "fts5-porter-stop"
SETTINGS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "adjacent pairs": {"adjacent_pairs": True},
    "fixed prior 0.3": {"length_spread_full": 0.0},
    "prior off": {"length_penalty": 0.0},
    "spread 0.6-0.9": {"length_spread_min": 0.6, "length_spread_full": 0.9},
    "spread 0.7-1.0": {"length_spread_min": 0.7, "length_spread_full": 1.0},
    "spread 0.9-1.2": {"length_spread_min": 0.9, "length_spread_full": 1.2},
    "penalty 0.4": {"length_penalty": 0.4},
    "category boost 0": {"category_boost": 0.0},
    "temporal boost 0": {"temporal_boost": 0.0},
    "tier tie-break 0": {"tier_tiebreak": 0.0},
    "pool 50": {"candidate_pool": 50},
}
"""Tiermem settings tried on the dev halves (each a change to the defaults)."""


class Fts5Stop(Fts5):
    """FTS5 porter with tiermem's query stopwords: the strongest simple baseline."""

    def __init__(self) -> None:
        super().__init__("porter unicode61")
        self.name = BASELINE

    def search(self, query: str) -> list[int]:
        terms = query_terms(query, 32)
        if not terms:
            return []
        sql = "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?"
        return [r[0] for r in self.db.execute(sql, (fts_match(terms), K))]


@dataclass
class Run(Scores):
    """Scores of one system on one question type, with CPU time per query beside wall time."""

    cpu: list[float] = field(default_factory=list)


class ShapedTiermem(Tiermem):
    """tiermem over a variant's memories (their own categories and importance); `use` switches
    the retrieval settings on the same index."""

    def index(self, stack: Shaped) -> None:  # type: ignore[override]
        asked = parse_date(stack.question["question_date"])
        from tiermem.core.engine import Memory

        self.home = Path(tempfile.mkdtemp(dir=self.root))
        self.mem = Memory(self.home, "bench", config=self.config, clock=lambda: asked)
        facts = [
            NewFact(text, category, importance, created_at=date, source="longmemeval")
            for text, category, importance, date in zip(
                stack.texts, stack.categories, stack.importance, stack.dates, strict=True
            )
        ]
        self.position = {o.id: i for i, o in enumerate(self.mem.store_many(facts))}
        if self.mode in ("vector", "hybrid"):
            vectors.VectorIndex(self.mem.memories).sync()  # indexing, not the timed query

    def close(self) -> None:
        self.mem.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def use(self, overrides: dict[str, Any]) -> None:
        retrieval = msgspec.structs.replace(self.config.retrieval, **overrides)
        self.mem.cfg = msgspec.structs.replace(self.config, retrieval=retrieval)


def timed(
    search: Callable[[str], list[int]], query: str, repeat: int
) -> tuple[list[int], float, float]:
    """The ranking and the median wall and CPU seconds of `repeat` runs."""
    walls, cpus = [], []
    ranked: list[int] = []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        ranked = search(query)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return ranked, statistics.median(walls), statistics.median(cpus)


Table = dict[str, dict[str, Run]]  # system → question type → scores


def record(table: Table, name: str, stack: Shaped, got: tuple[list[int], float, float]) -> None:
    run = table.setdefault(name, defaultdict(Run))[stack.question["question_type"]]
    ranked, wall, cpu = got
    run.latency.append(wall)
    run.cpu.append(cpu)
    score_question(stack, ranked, run)


def baselines() -> list[System]:
    out: list[System] = [Fts5("unicode61"), Fts5("porter unicode61"), Fts5Stop()]
    try:
        out.append(Bm25s())
    except ImportError:
        print("bm25s not installed: that baseline is skipped")
    return out


def run_variant(
    builder: Callable[[dict[str, Any], list[Any]], Shaped],
    questions: Sequence[dict[str, Any]],
    sessions_of: Callable[[dict[str, Any]], list[Any]],
    settings: dict[str, dict[str, Any]],
    repeat: int,
    root: Path,
) -> Table:
    """Every setting of tiermem (one index per question) and the baselines on `questions`."""
    table: Table = {}
    for question in questions:
        stack = builder(question, sessions_of(question))
        query = question["question"]
        engine = ShapedTiermem(root)
        engine.index(stack)
        for name, overrides in settings.items():
            engine.use(overrides)
            record(table, f"tiermem {name}", stack, timed(engine.search, query, repeat))
        engine.close()
        for system in baselines():
            system.index(stack)
            record(table, system.name, stack, timed(system.search, query, repeat))
            system.close()
    return table


def run_vectors(
    builder: Callable[[dict[str, Any], list[Any]], Shaped],
    questions: Sequence[dict[str, Any]],
    sessions_of: Callable[[dict[str, Any]], list[Any]],
    embedders: dict[str, vectors.Embedder],
    repeat: int,
    root: Path,
) -> Table:
    """Hybrid and vector mode with each embedder, and keyword mode, on the same questions."""
    table: Table = {}
    for question in questions:
        stack = builder(question, sessions_of(question))
        query = question["question"]
        for label, embedder in embedders.items():
            vectors.set_default_embedder(embedder)
            for mode in ("hybrid", "vector"):
                engine = ShapedTiermem(root, mode)
                engine.index(stack)
                record(table, f"{mode} {label}", stack, timed(engine.search, query, repeat))
                engine.close()
        engine = ShapedTiermem(root)
        engine.index(stack)
        record(table, "keyword", stack, timed(engine.search, query, repeat))
        engine.close()
        for label, embedder in embedders.items():
            _, wall, cpu = timed(embedding_probe(embedder), query, repeat)
            run = table.setdefault(f"query embedding {label}", defaultdict(Run))["all"]
            run.latency.append(wall)
            run.cpu.append(cpu)
    vectors.set_default_embedder(None)
    return table


def embedding_probe(embedder: vectors.Embedder) -> Callable[[str], list[int]]:
    """A query's embedding alone, as a timed search (its ranking is empty)."""

    def probe(query: str) -> list[int]:
        embedder.embed_query(query)
        return []

    return probe


def overall(per_type: dict[str, Run]) -> Run:
    total = Run()
    for part in per_type.values():
        for name in vars(total):
            getattr(total, name).extend(getattr(part, name))
    return total


def summary(run: Run) -> dict[str, float]:
    return {
        "n": len(run.sess_r10),
        "turn_n": len(run.turn_r10),
        "r5": mean(run.turn_r5),
        "r10": mean(run.turn_r10),
        "mrr": mean(run.turn_mrr),
        "sess_r10": mean(run.sess_r10),
        "sess_mrr": mean(run.sess_mrr),
        "p50_ms": statistics.median(run.latency) * 1000 if run.latency else 0.0,
        "cpu_p50_ms": statistics.median(run.cpu) * 1000 if run.cpu else 0.0,
    }


TOLERANCE = 0.005
"""A change counts as a loss on a variant when it lowers recall@10 or MRR by more than this."""


def choose(dev: dict[str, Table]) -> tuple[list[str], dict[str, float]]:
    """The changes to the defaults that help or are neutral on every variant's dev half (no
    loss in recall@10 or MRR, a gain somewhere), and each change's worst-variant effect."""
    worst: dict[str, float] = {}
    kept = []
    for name in SETTINGS:
        if name == "defaults":
            continue
        deltas = []
        for table in dev.values():
            ours = summary(overall(table[f"tiermem {name}"]))
            base = summary(overall(table["tiermem defaults"]))
            deltas += [ours["r10"] - base["r10"], ours["mrr"] - base["mrr"]]
        worst[name] = min(deltas)
        if worst[name] >= -TOLERANCE and max(deltas) > TOLERANCE:
            kept.append(name)
    return kept, worst


def print_table(title: str, table: Table, systems: Sequence[str]) -> None:
    print(f"\n== {title}")
    header = (
        f"{'system':<28}{'type':<26}{'n':>4} {'r@5':>6} {'r@10':>6} {'mrr':>6} "
        f"{'s r@10':>7} {'s mrr':>6} {'p50 ms':>7} {'cpu ms':>7}"
    )
    print(header)
    types = sorted({t for name in systems for t in table[name]})
    for qtype in [*types, "overall"]:
        for name in systems:
            run = overall(table[name]) if qtype == "overall" else table[name].get(qtype, Run())
            s = summary(run)
            print(
                f"{name:<28}{qtype:<26}{s['n']:>4} {s['r5']:6.3f} {s['r10']:6.3f} {s['mrr']:6.3f} "
                f"{s['sess_r10']:7.3f} {s['sess_mrr']:6.3f} {s['p50_ms']:7.2f} "
                f"{s['cpu_p50_ms']:7.2f}"
            )
        print()


def as_json(table: Table) -> dict[str, Any]:
    return {
        name: {"overall": summary(overall(per)), **{t: summary(r) for t, r in per.items()}}
        for name, per in table.items()
    }


def goal_line(variant: str, table: Table, name: str) -> str:
    ours, base = summary(overall(table[name])), summary(overall(table[BASELINE]))
    return (
        f"{variant:<9} recall@10 {ours['r10']:.3f} vs {base['r10']:.3f} "
        f"({(ours['r10'] - base['r10']) * 100:+.1f} pt), MRR {ours['mrr']:.3f} vs "
        f"{base['mrr']:.3f} ({(ours['mrr'] - base['mrr']) * 100:+.1f} pt), CPU p50 "
        f"{ours['cpu_p50_ms'] / base['cpu_p50_ms']:.2f}x"
    )


def halves(questions: list[dict[str, Any]], n: int) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"dev": [], "test": []}
    for q in questions:
        out[split_half(q["question_id"])].append(q)
    return {k: v[:n] if n else v for k, v in out.items()}


def embedders_named(names: Sequence[str]) -> dict[str, vectors.Embedder]:
    from benchmarks.longmemeval import CachedEmbedder

    cache = Path(tempfile.gettempdir()) / "tiermem-robustness-embeddings.sqlite"
    out: dict[str, vectors.Embedder] = {}
    for name in names:
        if name == "minilm":
            out[name] = CachedEmbedder(vectors.MiniLM(), cache)
        elif name == "model2vec":
            from benchmarks.static_embedder import StaticEmbedder

            out[name] = CachedEmbedder(StaticEmbedder(), cache)
        else:
            raise SystemExit(f"unknown embedder {name!r}: minilm or model2vec")
    return out


def markdown(out: dict[str, Any]) -> None:
    """README tables from a run's JSON: overall per variant, then recall@10 per question type."""
    test = out["test"]
    systems = list(next(iter(test.values())))
    print("| variant (test half) | " + " | ".join(systems) + " | CPU p50 ms (ratio) |")
    print("|---" * (len(systems) + 2) + "|")
    for variant, table in test.items():
        cells = [
            f"{table[n]['overall']['r10']:.3f} / {table[n]['overall']['mrr']:.3f}" for n in systems
        ]
        ours, base = table["tiermem defaults"]["overall"], table[BASELINE]["overall"]
        cpu = f"{ours['cpu_p50_ms']:.2f} / {base['cpu_p50_ms']:.2f} "
        cpu += f"({ours['cpu_p50_ms'] / base['cpu_p50_ms']:.1f}×)"
        print(f"| {variant} | " + " | ".join(cells) + f" | {cpu} |")
    types = sorted({t for table in test.values() for t in table[BASELINE] if t != "overall"})
    print("\n| turn r@10 (tiermem / FTS5 porter + stopwords) | " + " | ".join(types) + " |")
    print("|---" * (len(types) + 1) + "|")
    for variant, table in test.items():
        cells = []
        for t in types:
            ours, base = table["tiermem defaults"].get(t), table[BASELINE].get(t)
            known = ours and base and not math.isnan(ours["r10"])
            cells.append(
                f"{ours['r10']:.2f} / {base['r10']:.2f} ({ours['turn_n']})" if known else "–"
            )
        print(f"| {variant} | " + " | ".join(cells) + " |")
    for variant, table in out.get("vectors", {}).items():
        print(
            f"\n{variant}: "
            + "; ".join(
                f"{name} r@10 {s['overall']['r10']:.3f} MRR {s['overall']['mrr']:.3f} "
                f"CPU p50 {s['overall']['cpu_p50_ms']:.1f} ms"
                for name, s in table.items()
            )
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=60, help="per half (0 = all)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hybrid", type=int, default=0, help="questions for vector modes")
    parser.add_argument("--embedders", default="minilm,model2vec")
    parser.add_argument(
        "--hybrid-half", choices=("dev", "test"), default="test", help="half of --hybrid"
    )
    parser.add_argument("--skip-dev", action="store_true", help="test half only, defaults")
    parser.add_argument("--markdown", type=Path, help="print README tables from a run's JSON")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.markdown:
        markdown(json.loads(args.markdown.read_text()))
        return
    questions, sessions_of = load("s")
    split = halves(questions, args.questions)
    variants = args.variants.split(",")
    started = time.perf_counter()
    out: dict[str, Any] = {"questions_per_half": {k: len(v) for k, v in split.items()}}
    with tempfile.TemporaryDirectory(prefix="tiermem-robust-") as tmp:
        root = Path(tmp)
        final: dict[str, dict[str, Any]] = {
            "defaults": {},
            "fixed prior 0.3": SETTINGS["fixed prior 0.3"],
            "prior off": SETTINGS["prior off"],
        }
        if not args.skip_dev:
            dev = {
                v: run_variant(BUILDERS[v], split["dev"], sessions_of, SETTINGS, args.repeat, root)
                for v in variants
            }
            for v, table in dev.items():
                print_table(
                    f"dev half, {v}", table, [f"tiermem {n}" for n in SETTINGS] + [BASELINE]
                )
            kept, worst = choose(dev)
            print("\nworst change of recall@10 or MRR on a variant's dev half, against defaults:")
            for name, delta in worst.items():
                print(f"  {name:<22}{delta * 100:+6.2f} pt{'  <- kept' if name in kept else ''}")
            for name in kept:
                final[name] = SETTINGS[name]
            out["dev"] = {v: as_json(t) for v, t in dev.items()}
            out["dev_worst"], out["kept"] = worst, kept
        test = {
            v: run_variant(BUILDERS[v], split["test"], sessions_of, final, args.repeat, root)
            for v in variants
        }
        names = [f"tiermem {n}" for n in final] + [s.name for s in baselines()]
        for v, table in test.items():
            print_table(f"test half, {v}", table, names)
        print(f"\ngoal on the test halves (tiermem defaults against {BASELINE}):")
        for v, table in test.items():
            print("  " + goal_line(v, table, "tiermem defaults"))
        out["test"] = {v: as_json(t) for v, t in test.items()}
        if args.hybrid and vectors.installed():
            embedders = embedders_named(args.embedders.split(","))
            few = split[args.hybrid_half][: args.hybrid]
            vec = {
                v: run_vectors(BUILDERS[v], few, sessions_of, embedders, args.repeat, root)
                for v in variants
            }
            for v, table in vec.items():
                print_table(
                    f"vector modes, {args.hybrid_half} half, {len(few)} questions, {v}",
                    table,
                    list(table),
                )
            out["vectors"] = {v: as_json(t) for v, t in vec.items()}
    out["seconds"] = time.perf_counter() - started
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"robustness-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"\n{out['seconds']:.0f} s; JSON: {path}")


if __name__ == "__main__":
    main()
