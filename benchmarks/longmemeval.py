"""Retrieval quality on LongMemEval (public data, MIT) against same-run baselines.

    .venv/bin/python -m benchmarks.longmemeval [--split s|oracle] [--questions N]
        [--systems tiermem,fts5,fts5-porter,bm25s] [--types T,...] [--half dev|test]
        [--set retrieval.length_penalty=0] [--embed-cache FILE]

Each question's haystack sessions become one agent's memories (one memory per turn, dated by its
session), ingested through tiermem's public API into a fresh home; the question is the query,
asked at the question's date. Baselines index exactly the same memories: raw SQLite FTS5
`bm25()` (unicode61), FTS5 with the porter tokenizer, and `bm25s` (if installed). Reported per
question type and overall: recall@5, recall@10 and MRR of the evidence turns (`has_answer`) and
of the evidence sessions (`answer_session_ids`), and query latency: p50/p95 over questions of
each query's median time over `--repeat` runs (reads only: tiermem's reinforcement is off), and
apart the p50 of the first run right after indexing (cold caches, one-off costs).

More systems: `tiermem-vector`, `tiermem-hybrid`, `tiermem-fallback` (the `vector` extra;
embeddings are computed while indexing, outside the timed query, and kept in `--embed-cache` so
a rerun does not recompute them), and `tiermem-llm` (LLM tree search; needs an endpoint in
TIERMEM_LLM_BASE_URL / TIERMEM_LLM_MODEL, skipped with a note otherwise). `--half dev` and
`--half test` keep the even or odd questions: settings are chosen on dev, then checked on test.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import re
import sqlite3
import statistics
import tempfile
import time
import tomllib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from tiermem.core import episodes, graph, vectors
from tiermem.core.config import Config, config_from_mapping
from tiermem.core.engine import Memory
from tiermem.core.llm import settings_from
from tiermem.core.terms import STOPWORDS, fts_match
from tiermem.core.warm import MAX_TEXT_BYTES, NewFact, memory_id

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
FILES = {"s": "longmemeval_s_compact.json.xz", "oracle": "longmemeval_oracle.json.xz"}
K = 10
_WORD = re.compile(r"[^\W_]+")

Turn = tuple[str, int]  # (session id, turn index)


@dataclass
class Haystack:
    """One question's memories: unique texts with the turns each stands for."""

    question: dict[str, Any]
    texts: list[str] = field(default_factory=list)
    dates: list[float] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    turns: list[list[Turn]] = field(default_factory=list)
    evidence_turns: set[Turn] = field(default_factory=set)
    truncated: int = 0


def load(split: str) -> tuple[list[dict[str, Any]], Callable[[dict[str, Any]], list[Any]]]:
    with lzma.open(BENCH / FILES[split]) as handle:
        data = msgspec.json.decode(handle.read())
    if split == "oracle":
        return data, lambda q: q["haystack_sessions"]
    sessions = data["sessions"]
    return data["questions"], lambda q: [sessions[s] for s in q["haystack_session_ids"]]


def parse_date(text: str) -> float:
    """'2023/05/20 (Sat) 14:21' (LongMemEval's dates carry no zone: read as UTC)."""
    return datetime.strptime(text, "%Y/%m/%d (%a) %H:%M").replace(tzinfo=UTC).timestamp()


def build(question: dict[str, Any], sessions: list[Any]) -> Haystack:
    stack = Haystack(question)
    index: dict[str, int] = {}
    for sid, date, turns in zip(
        question["haystack_session_ids"], question["haystack_dates"], sessions, strict=True
    ):
        for i, turn in enumerate(turns):
            text = " ".join(str(turn["content"]).split())
            if not text:
                continue
            if len(text.encode()) > MAX_TEXT_BYTES:
                text = text.encode()[: MAX_TEXT_BYTES - 4].decode(errors="ignore")
                stack.truncated += 1
            key = memory_id("bench", text)
            if key not in index:
                index[key] = len(stack.texts)
                stack.texts.append(text)
                stack.dates.append(parse_date(date))
                stack.roles.append(turn["role"])
                stack.turns.append([])
            stack.turns[index[key]].append((sid, i))
            if turn.get("has_answer"):
                stack.evidence_turns.add((sid, i))
    return stack


class System:
    name = ""

    def index(self, stack: Haystack) -> None:
        raise NotImplementedError

    def search(self, query: str) -> list[int]:
        """Positions in `stack.texts`, best first."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class Tiermem(System):
    """tiermem through its public API; `mode` keyword, vector, hybrid or fallback (keyword with
    the vector fallback on), or `llm` for LLM tree search."""

    def __init__(self, root: Path, mode: str = "keyword", overrides: dict[str, Any] | None = None):
        self.root = root
        self.mode = mode
        self.name = "tiermem" if mode == "keyword" else f"tiermem-{mode}"
        self.count = 0
        settings: dict[str, Any] = {"dedup": {"near": False}}
        for section, values in (overrides or {}).items():
            settings.setdefault(section, {}).update(values)
        if mode == "fallback":
            settings.setdefault("retrieval", {})["vector_fallback"] = True
        if mode in SIGNAL_MODES:
            settings.setdefault("graph", {}).update(SIGNAL_MODES[mode])
        else:
            settings.setdefault("graph", {})["retrieval_signal"] = False
        # Exact duplicates still merge (content-addressed ids); near-duplicate merging is off
        # so that every system holds the very same memories.
        self.config = config_from_mapping(settings, "benchmark settings")

    def index(self, stack: Haystack) -> None:
        self.count += 1
        asked = parse_date(stack.question["question_date"])
        home = self.root / f"{self.name}-{self.count}"
        self.mem = Memory(home, "bench", config=self.config, clock=lambda: asked)
        facts = [
            NewFact(text, f"chat/{role}", 0.5, created_at=date, source="longmemeval")
            for text, role, date in zip(stack.texts, stack.roles, stack.dates, strict=True)
        ]
        outcomes = self.mem.store_many(facts)
        self.position = {o.id: i for i, o in enumerate(outcomes)}
        if self.mode in ("vector", "hybrid", "fallback"):
            vectors.VectorIndex(self.mem.memories).sync()  # indexing, not the timed query
        if self.mode in SIGNAL_MODES:
            add_episodes(self.mem, stack, [o.id for o in outcomes])

    def search(self, query: str) -> list[int]:
        mode = self.mode if self.mode in ("vector", "hybrid") else None
        try:
            result = self.mem.retrieve(
                query, limit=K, reinforce=False, mode=mode, llm=self.mode == "llm"
            )
        except Exception:  # an empty query is a clear error; count it as no result
            return []
        return [self.position[h.memory.id] for h in result.hits]

    def close(self) -> None:
        self.mem.close()


def add_episodes(mem: Memory, stack: Haystack, ids: list[str]) -> None:
    """One episode per haystack session (its turns are its facts) and the graph of every turn,
    as conversation-end would leave them (indexing, not the timed query)."""
    sessions: dict[str, list[int]] = defaultdict(list)
    for position, turns in enumerate(stack.turns):
        sessions[turns[0][0]].append(position)
    with mem.db.transaction():
        for sid, positions in sessions.items():
            when = stack.dates[positions[0]]
            draft = episodes.Draft(
                source=f"session:{sid}",
                texts=[stack.texts[p] for p in positions],
                participants=sorted({stack.roles[p] for p in positions}),
                fact_ids=[ids[p] for p in positions],
                started_at=when,
                ended_at=when,
            )
            episode = episodes.write(mem, draft)
            graph.index_episode(mem, episode.id, episode.summary)
    graph.index_memories(mem, limit=None)


class CachedEmbedder:
    """The real embedder behind a content-addressed cache on disk (SQLite) for memory texts, so
    that reruns of the benchmark (other fusion weights, say) do not embed the same 100,000 turns
    again. Queries are always embedded by the model: that is part of the timed query."""

    def __init__(self, inner: vectors.Embedder, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS e (key TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self.hits = self.misses = 0

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.name}\0{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        keys = [self._key(t) for t in texts]
        known: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            sql = f"SELECT key, v FROM e WHERE key IN ({','.join('?' * len(part))})"
            known.update(self.db.execute(sql, part).fetchall())
        todo = [i for i, k in enumerate(keys) if k not in known]
        if todo:
            fresh = self.inner.embed([texts[i] for i in todo])
            rows = [(keys[i], v) for i, v in zip(todo, fresh, strict=True)]
            self.db.executemany("INSERT OR REPLACE INTO e (key, v) VALUES (?, ?)", rows)
            self.db.commit()
            known.update(rows)
        self.hits += len(keys) - len(todo)
        self.misses += len(todo)
        return [known[k] for k in keys]

    def embed_query(self, query: str) -> bytes:
        return self.inner.embed_query(query)  # never cached: part of the timed query


class Fts5(System):
    def __init__(self, tokenizer: str) -> None:
        self.tokenizer = tokenizer
        self.name = "fts5" if tokenizer == "unicode61" else f"fts5-{tokenizer.split()[0]}"

    def index(self, stack: Haystack) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{self.tokenizer}')")
        self.db.executemany(
            "INSERT INTO t (rowid, text) VALUES (?, ?)", [(i, t) for i, t in enumerate(stack.texts)]
        )

    def search(self, query: str) -> list[int]:
        words = list(dict.fromkeys(w.casefold() for w in _WORD.findall(query)))
        if not words:
            return []
        sql = "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?"
        return [r[0] for r in self.db.execute(sql, (fts_match(words), K))]

    def close(self) -> None:
        self.db.close()


class Bm25s(System):
    name = "bm25s"

    def __init__(self) -> None:
        import bm25s

        self.bm25s = bm25s

    def index(self, stack: Haystack) -> None:
        self.n = len(stack.texts)
        tokens = self.bm25s.tokenize(stack.texts, stopwords="en", show_progress=False)
        self.retriever = self.bm25s.BM25()
        self.retriever.index(tokens, show_progress=False)

    def search(self, query: str) -> list[int]:
        tokens = self.bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        docs, _ = self.retriever.retrieve(tokens, k=min(K, self.n), show_progress=False)
        return [int(d) for d in docs[0]]


@dataclass
class Scores:
    turn_r5: list[float] = field(default_factory=list)
    turn_r10: list[float] = field(default_factory=list)
    turn_mrr: list[float] = field(default_factory=list)
    sess_r5: list[float] = field(default_factory=list)
    sess_r10: list[float] = field(default_factory=list)
    sess_mrr: list[float] = field(default_factory=list)
    latency: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)


def score_question(stack: Haystack, ranked: Sequence[int], scores: Scores) -> None:
    turn_lists = [stack.turns[i] for i in ranked]
    if stack.evidence_turns:
        found: list[set[Turn]] = []
        seen: set[Turn] = set()
        for turns in turn_lists:
            seen |= set(turns) & stack.evidence_turns
            found.append(set(seen))
        total = len(stack.evidence_turns)
        scores.turn_r5.append(len(found[4] if len(found) > 4 else seen) / total)
        scores.turn_r10.append(len(seen) / total)
        first = next((r for r, t in enumerate(turn_lists, 1) if set(t) & stack.evidence_turns), 0)
        scores.turn_mrr.append(1 / first if first else 0.0)
    answer = set(stack.question["answer_session_ids"])
    if answer:
        sessions: list[str] = []
        for turns in turn_lists:
            for sid, _ in turns:
                if sid not in sessions:
                    sessions.append(sid)
        scores.sess_r5.append(len(answer & set(sessions[:5])) / len(answer))
        scores.sess_r10.append(len(answer & set(sessions[:10])) / len(answer))
        first = next((r for r, s in enumerate(sessions, 1) if s in answer), 0)
        scores.sess_mrr.append(1 / first if first else 0.0)


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def report(results: dict[str, dict[str, Scores]]) -> None:
    systems = list(results)
    types = sorted({t for per in results.values() for t in per})
    header = (
        f"{'system':<17}{'type':<27}{'n':>4}  turn r@5  r@10   mrr | sess r@5  r@10   mrr"
        " | p50 ms  p95 ms  1st p50"
    )
    print(header)
    print("-" * len(header))
    for qtype in [*types, "overall"]:
        for name in systems:
            per = results[name]
            if qtype == "overall":
                s = Scores()
                for part in per.values():
                    for f in vars(s):
                        getattr(s, f).extend(getattr(part, f))
            else:
                s = per[qtype]
            lat = sorted(s.latency)
            p95 = lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))] if lat else 0.0
            print(
                f"{name:<17}{qtype:<27}{len(s.sess_r5):>4}  {mean(s.turn_r5):8.3f} "
                f"{mean(s.turn_r10):5.3f} {mean(s.turn_mrr):5.3f} | {mean(s.sess_r5):8.3f} "
                f"{mean(s.sess_r10):5.3f} {mean(s.sess_mrr):5.3f} | "
                f"{statistics.median(lat) * 1000 if lat else 0:6.2f} {p95 * 1000:7.2f} "
                f"{statistics.median(s.first) * 1000 if s.first else 0:8.2f}"
            )
        print()


BASELINES = ("fts5", "fts5-porter", "bm25s")
TIERMEM_MODES = {
    "tiermem": "keyword",
    "tiermem-vector": "vector",
    "tiermem-hybrid": "hybrid",
    "tiermem-fallback": "fallback",
    "tiermem-llm": "llm",
    "tiermem-graph": "graph",
    "tiermem-entities": "entities",
    "tiermem-episodes": "episodes",
}
SIGNAL_MODES = {
    "graph": {},
    "entities": {"episode_boost": 0.0},
    "episodes": {"entity_boost": 0.0},
}
"""Keyword mode plus one episode per haystack session and the knowledge graph of its turns:
both signals, the entity signal only, the episode signal only."""


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """['retrieval.length_penalty=0'] → {'retrieval': {'length_penalty': 0}} (TOML values)."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        section, _, name = key.strip().partition(".")
        out.setdefault(section, {})[name] = tomllib.loads(f"v = {value.strip()}")["v"]
    return out


def make_systems(names: Sequence[str], root: Path, overrides: dict[str, Any]) -> list[System]:
    systems: list[System] = []
    for name in names:
        if name in TIERMEM_MODES:
            mode = TIERMEM_MODES[name]
            if mode in ("vector", "hybrid", "fallback") and not vectors.installed():
                print(
                    f"{name}: skipped (the vector extra is not installed: {vectors.INSTALL_HINT})"
                )
                continue
            if mode == "llm" and not settings_from(Config().llm).configured:
                print(
                    f"{name}: skipped (no LLM endpoint: set TIERMEM_LLM_BASE_URL and "
                    "TIERMEM_LLM_MODEL to measure LLM tree search)"
                )
                continue
            systems.append(Tiermem(root, mode, overrides))
        elif name == "fts5":
            systems.append(Fts5("unicode61"))
        elif name == "fts5-porter":
            systems.append(Fts5("porter unicode61"))
        elif name == "bm25s":
            try:
                systems.append(Bm25s())
            except ImportError:
                print("bm25s not installed: that baseline is skipped (pip install bm25s)")
        else:
            raise SystemExit(f"unknown system {name!r}")
    return systems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=sorted(FILES), default="s")
    parser.add_argument("--questions", type=int, default=0, help="first N questions (0 = all)")
    parser.add_argument(
        "--systems",
        default=",".join(["tiermem", *BASELINES]),
        help=f"comma list of {', '.join([*TIERMEM_MODES, *BASELINES])}",
    )
    parser.add_argument("--types", default="", help="only these question types (comma list)")
    parser.add_argument(
        "--half", choices=("dev", "test"), help="even (dev) or odd (test) questions"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="a tiermem config override (TOML value), repeatable",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="runs of each query: latency is the median per question (the first run, right "
        "after indexing, is reported apart)",
    )
    parser.add_argument(
        "--embed-cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "tiermem-lme-embeddings.sqlite",
        help="where vector systems keep computed embeddings",
    )
    args = parser.parse_args()
    questions, sessions_of = load(args.split)
    if args.half:
        questions = questions[args.half == "test" :: 2]
    if args.types:
        wanted = set(args.types.split(","))
        questions = [q for q in questions if q["question_type"] in wanted]
    if args.questions:
        questions = questions[: args.questions]
    overrides = parse_overrides(args.set)
    started = time.perf_counter()
    cache = None
    with tempfile.TemporaryDirectory(prefix="tiermem-lme-") as tmp:
        systems = make_systems(args.systems.split(","), Path(tmp), overrides)
        if any(
            isinstance(s, Tiermem) and s.mode in ("vector", "hybrid", "fallback") for s in systems
        ):
            cache = CachedEmbedder(vectors.default_embedder(), args.embed_cache)
            vectors.set_default_embedder(cache)
        results: dict[str, dict[str, Scores]] = {s.name: defaultdict(Scores) for s in systems}
        truncated = 0
        for question in questions:
            stack = build(question, sessions_of(question))
            truncated += stack.truncated
            for system in systems:
                system.index(stack)
                runs = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    ranked = system.search(question["question"])
                    runs.append(time.perf_counter() - t0)
                system.close()
                scores = results[system.name][question["question_type"]]
                scores.first.append(runs[0])
                scores.latency.append(statistics.median(runs))
                score_question(stack, ranked, scores)
    print(
        f"LongMemEval {args.split}: {len(questions)} questions"
        f"{' (' + args.half + ' half)' if args.half else ''}, top-{K}, "
        f"{time.perf_counter() - started:.0f} s; {truncated} turns truncated to 64 KB; "
        f"stopwords: {len(STOPWORDS)}; overrides: {overrides or 'none'}"
    )
    if cache:
        print(f"embeddings: {cache.misses} computed, {cache.hits} from {args.embed_cache}")
    report(results)


if __name__ == "__main__":
    main()
