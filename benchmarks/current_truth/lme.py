"""On LongMemEval: does the newest evidence come first? (knowledge-update, temporal-reasoning)

Each question's haystack sessions are ingested as benchmarks/longmemeval.py does (one memory per
turn, dated by its session, a fresh home per question, asked at the question's date). A question
whose evidence spans sessions of two or more dates passes when a turn of the newest evidence
session is in the top 10 of `retrieve` and ranks above every turn of the older evidence
sessions. Questions with evidence from a single date are counted apart (nothing to order).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchmarks.longmemeval import Haystack, Tiermem

TYPES = ("knowledge-update", "temporal-reasoning")


@dataclass
class Tally:
    """One question type's counts."""

    asked: int = 0
    single: int = 0  # evidence from one date only: not scored
    newest_first: int = 0
    newest_found: int = 0  # the newest evidence session in the top 10 at all

    @property
    def scored(self) -> int:
        return self.asked - self.single

    def as_dict(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "scored": self.scored,
            "single_date": self.single,
            "newest_first": self.newest_first,
            "newest_in_top10": self.newest_found,
            "newest_first_pct": pct(self.newest_first, self.scored),
        }


@dataclass
class Result:
    tallies: dict[str, Tally] = field(default_factory=dict)
    note: str = ""  # why nothing was measured
    stopped: str = ""  # why fewer questions than chosen were asked
    seconds: float = 0.0


def pct(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


def evidence_order(question: dict[str, Any], parse_date: Callable[[str], float]) -> list[list[str]]:
    """The evidence sessions grouped by date, newest group first."""
    dates = dict(zip(question["haystack_session_ids"], question["haystack_dates"], strict=True))
    by_date: dict[float, list[str]] = {}
    for sid in question["answer_session_ids"]:
        if sid in dates:
            by_date.setdefault(parse_date(dates[sid]), []).append(sid)
    return [by_date[d] for d in sorted(by_date, reverse=True)]


def newest_first(stack: Haystack, ranked: list[int], groups: list[list[str]]) -> tuple[bool, bool]:
    """(whether the newest evidence outranks the older, whether it was found at all)."""
    newest, older = set(groups[0]), {s for g in groups[1:] for s in g}
    for position in ranked:
        sessions = {sid for sid, _ in stack.turns[position]}
        if sessions & newest:
            return True, True
        if sessions & older:
            return False, any({sid for sid, _ in stack.turns[p]} & newest for p in ranked)
    return False, False


def pick(questions: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The first questions of each type, taken in turn (ku, tr, ku, …): `limit` in all."""
    per_type = [[q for q in questions if q["question_type"] == t] for t in TYPES]
    turns = [q for group in zip_longest(*per_type) for q in group if q is not None]
    return turns[:limit]


def run(limit: int | None, budget: float, say: Callable[[str], None]) -> Result:
    """Score `limit` questions of the two types (all when None), stopping after `budget` s."""
    try:  # tiermem itself, in process: a broken working tree is a note, not a crash
        from benchmarks import longmemeval as bench
    except Exception as exc:
        return Result(note=f"cannot load benchmarks.longmemeval ({type(exc).__name__}: {exc})")
    if not (bench.BENCH / bench.FILES["s"]).is_file():
        return Result(note=f"LongMemEval not found at {bench.BENCH / bench.FILES['s']}")
    questions, sessions_of = bench.load("s")
    chosen = pick(questions, limit)
    result = Result({t: Tally() for t in TYPES})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tiermem-current-truth-lme-") as tmp:
        system = bench.Tiermem(Path(tmp))
        for n, question in enumerate(chosen, 1):
            if time.perf_counter() - started > budget:
                result.stopped = (
                    f"time budget of {budget:.0f} s spent after {n - 1} of {len(chosen)} questions"
                )
                break
            if n % 10 == 0:
                say(f"LongMemEval {n}/{len(chosen)}")
            tally = result.tallies[question["question_type"]]
            groups = evidence_order(question, bench.parse_date)
            tally.asked += 1
            if len(groups) < 2:
                tally.single += 1
                continue
            stack = bench.build(question, sessions_of(question))
            _score(system, stack, groups, tally)
            shutil.rmtree(Path(tmp) / f"{system.name}-{system.count}", ignore_errors=True)
    result.seconds = time.perf_counter() - started
    return result


def _score(system: Tiermem, stack: Haystack, groups: list[list[str]], tally: Tally) -> None:
    system.index(stack)
    try:
        ranked = system.search(stack.question["question"])
    finally:
        system.close()
    first, found = newest_first(stack, ranked, groups)
    tally.newest_first += first
    tally.newest_found += found
