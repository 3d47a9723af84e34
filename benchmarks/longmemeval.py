"""Retrieval quality on LongMemEval (public data, MIT) against same-run baselines.

    .venv/bin/python -m benchmarks.longmemeval [--split s|oracle] [--questions N]

Each question's haystack sessions become one agent's memories (one memory per turn, dated by its
session), ingested through tiermem's public API into a fresh home. The question is the query.
Baselines index exactly the same memories: raw SQLite FTS5 `bm25()` (unicode61), FTS5 with the
porter tokenizer, and `bm25s` (if installed). Reported per question type and overall:
recall@5, recall@10 and MRR of the evidence turns (`has_answer`) and of the evidence sessions
(`answer_session_ids`), and query latency p50/p95.
"""

from __future__ import annotations

import argparse
import lzma
import re
import sqlite3
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from tiermem.core.engine import Memory
from tiermem.core.retrieve import STOPWORDS, fts_match, query_terms
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
    return datetime.strptime(text[:10], "%Y/%m/%d").replace(tzinfo=UTC).timestamp()


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
    name = "tiermem"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0

    def index(self, stack: Haystack) -> None:
        self.count += 1
        self.mem = Memory(self.root / f"h{self.count}", "bench", clock=lambda: max(stack.dates))
        facts = [
            NewFact(text, f"chat/{role}", 0.5, created_at=date, source="longmemeval")
            for text, role, date in zip(stack.texts, stack.roles, stack.dates, strict=True)
        ]
        outcomes = self.mem.store_many(facts)
        self.position = {o.id: i for i, o in enumerate(outcomes)}

    def search(self, query: str) -> list[int]:
        try:
            result = self.mem.retrieve(query, limit=K, reinforce=False)
        except Exception:  # an empty query is a clear error; count it as no result
            return []
        return [self.position[h.memory.id] for h in result.hits]

    def close(self) -> None:
        self.mem.close()


class Fts5(System):
    def __init__(self, tokenizer: str) -> None:
        self.tokenizer = tokenizer
        self.name = "fts5" if tokenizer == "unicode61" else f"fts5-{tokenizer.split()[0]}"

    def index(self, stack: Haystack) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{self.tokenizer}')")
        self.db.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)",
                            [(i, t) for i, t in enumerate(stack.texts)])

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
    header = (f"{'system':<13}{'type':<27}{'n':>4}  turn r@5  r@10   mrr | sess r@5  r@10   mrr"
              " | p50 ms  p95 ms")
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
                f"{name:<13}{qtype:<27}{len(s.sess_r5):>4}  {mean(s.turn_r5):8.3f} "
                f"{mean(s.turn_r10):5.3f} {mean(s.turn_mrr):5.3f} | {mean(s.sess_r5):8.3f} "
                f"{mean(s.sess_r10):5.3f} {mean(s.sess_mrr):5.3f} | "
                f"{statistics.median(lat) * 1000 if lat else 0:6.2f} {p95 * 1000:7.2f}"
            )
        print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--split", choices=sorted(FILES), default="s")
    parser.add_argument("--questions", type=int, default=0, help="first N questions (0 = all)")
    args = parser.parse_args()
    questions, sessions_of = load(args.split)
    if args.questions:
        questions = questions[: args.questions]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tiermem-lme-") as tmp:
        systems: list[System] = [Tiermem(Path(tmp)), Fts5("unicode61"),
                                 Fts5("porter unicode61")]
        try:
            systems.append(Bm25s())
        except ImportError:
            print("bm25s not installed: that baseline is skipped (pip install bm25s)")
        results: dict[str, dict[str, Scores]] = {s.name: defaultdict(Scores) for s in systems}
        truncated = 0
        for question in questions:
            stack = build(question, sessions_of(question))
            truncated += stack.truncated
            for system in systems:
                system.index(stack)
                t0 = time.perf_counter()
                ranked = system.search(question["question"])
                elapsed = time.perf_counter() - t0
                system.close()
                scores = results[system.name][question["question_type"]]
                scores.latency.append(elapsed)
                score_question(stack, ranked, scores)
    print(f"LongMemEval {args.split}: {len(questions)} questions, top-{K}, "
          f"{time.perf_counter() - started:.0f} s; {truncated} turns truncated to 64 KB; "
          f"stopwords: {len(STOPWORDS)}; query terms as tiermem extracts them, e.g. "
          f"{query_terms(questions[0]['question'], 32)}")
    report(results)


if __name__ == "__main__":
    main()
