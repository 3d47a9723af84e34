"""The figures of a run: counted per question type and person, as tables and as JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.current_truth.dataset import Person
from benchmarks.current_truth.lme import Result, pct
from benchmarks.current_truth.run import Acks, Answer, Imported

NA = "n/a (not available)"


@dataclass(frozen=True)
class Goal:
    """A row's goal: at least `pct` percent passing."""

    pct: float

    def verdict(self, figure: float | None) -> str:
        if figure is None:
            return "n/a"
        return "goal met" if figure >= self.pct else "goal not met"


GOALS = {"current retrieve": Goal(90), "current context": Goal(90), "as_of retrieve": Goal(95)}


@dataclass
class Count:
    """Passes out of answered questions; None answers (the CLI lacked the feature) are n/a."""

    passed: int = 0
    asked: int = 0
    missing: int = 0

    def add(self, value: bool | None) -> None:
        if value is None:
            self.missing += 1
        else:
            self.asked += 1
            self.passed += value

    @property
    def pct(self) -> float | None:
        return pct(self.passed, self.asked)

    def cell(self) -> str:
        if not self.asked:
            return NA if self.missing else "-"
        return f"{self.passed:>3}/{self.asked:<3} {self.pct:5.1f}%"

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "asked": self.asked, "n/a": self.missing, "pct": self.pct}


def count(answers: Sequence[Answer], column: str) -> Count:
    total = Count()
    for a in answers:
        total.add(getattr(a, column))
    return total


def _rows(
    people: Sequence[Person], answers: Sequence[Answer], kind: str
) -> list[tuple[str, list[Answer]]]:
    mine = [a for a in answers if a.question.type == kind]
    rows = [(p.name, [a for a in mine if a.question.person == p.name]) for p in people]
    return [*rows, ("all", mine)]


def question_table(
    people: Sequence[Person], answers: Sequence[Answer], kind: str, columns: dict[str, str]
) -> str:
    """One table: a row per person and a total, a column per scored call, then the goals."""
    rows = _rows(people, answers, kind)
    head = f"{'person':<10}" + "".join(f"{title:>26}" for title in columns)
    lines = [head, "-" * len(head)]
    for name, mine in rows:
        lines.append(
            f"{name:<10}" + "".join(f"{count(mine, c).cell():>26}" for c in columns.values())
        )
    verdicts = [GOALS[f"{kind} {c}"].verdict(count(rows[-1][1], c).pct) for c in columns.values()]
    goals = [
        f"≥{GOALS[f'{kind} {c}'].pct:g}%: {v}"
        for c, v in zip(columns.values(), verdicts, strict=True)
    ]
    lines.append(f"{'goal':<10}" + "".join(f"{g:>26}" for g in goals))
    return "\n".join(lines)


def changes_table(people: Sequence[Person], answers: Sequence[Answer]) -> str:
    """Recall of the expected changes and the spurious ones (plans and what-ifs listed as done)."""
    head = f"{'person':<10}{'questions':>11}{'changes found':>18}{'recall':>9}{'spurious':>10}"
    lines = [head, "-" * len(head)]
    for name, mine in _rows(people, answers, "changes"):
        done = [a for a in mine if a.recall is not None]
        expected = sum(len(a.question.expected) for a in done)
        if not done and mine:
            lines.append(f"{name:<10}{len(mine):>11}{NA:>37}")
            continue
        found = sum(a.found for a in done)
        recall = pct(found, expected)
        shown = f"{recall:7.1f}%" if recall is not None else "-"
        spurious = sum(a.spurious for a in done)
        lines.append(
            f"{name:<10}{len(mine):>11}{f'{found}/{expected}':>18}{shown:>9}{spurious:>10}"
        )
    return "\n".join(lines)


def acks_line(acks: dict[str, Acks]) -> str:
    counted = [a.count for a in acks.values() if a.count is not None]
    if not counted:
        return f"acknowledgements stored as memories: {NA}"
    total = sum(counted)
    per = ", ".join(
        f"{name} {a.count if a.count is not None else 'n/a'}" for name, a in acks.items()
    )
    verdict = "goal met" if total == 0 else "goal not met"
    return f"acknowledgements stored as memories: {total} ({per}); goal 0: {verdict}"


def lme_table(result: Result | None) -> str:
    if result is None:
        return "LongMemEval: skipped (--no-lme)"
    if result.note:
        return f"LongMemEval: {result.note}"
    title = f"LongMemEval (S): newest evidence session first in retrieve's top 10 ({result.seconds:.0f} s)"
    head = f"{'type':<22}{'scored':>7}{'newest first':>18}{'newest in top 10':>18}{'one date':>10}"
    lines = [title, head, "-" * len(head)]
    for name, t in result.tallies.items():
        first = f"{t.newest_first}/{t.scored} {pct(t.newest_first, t.scored) or 0:.1f}%"
        found = f"{t.newest_found}/{t.scored}"
        lines.append(f"{name:<22}{t.scored:>7}{first:>18}{found:>18}{t.single:>10}")
    if result.stopped:
        lines.append(f"(stopped early: {result.stopped})")
    return "\n".join(lines)


def imports_line(imports: Sequence[Imported]) -> str:
    def one(i: Imported) -> str:
        if i.code:
            return f"{i.person} failed (exit {i.code})"
        return f"{i.person} {i.conversations} conv. → {i.facts} facts in {i.seconds:.1f} s"

    return "imports: " + ", ".join(one(i) for i in imports)


def figures(
    answers: Sequence[Answer], acks: dict[str, Acks], result: Result | None
) -> dict[str, Any]:
    """The headline figures, each with its goal and verdict."""
    current = [a for a in answers if a.question.type == "current"]
    as_of = [a for a in answers if a.question.type == "as_of"]
    changes = [a for a in answers if a.question.type == "changes" and a.recall is not None]
    out: dict[str, Any] = {}
    for key, subset, column in (
        ("current retrieve", current, "retrieve"),
        ("current context", current, "context"),
        ("as_of retrieve", as_of, "retrieve"),
    ):
        c = count(subset, column)
        out[key] = {**c.as_dict(), "goal_pct": GOALS[key].pct, "verdict": GOALS[key].verdict(c.pct)}
    expected = sum(len(a.question.expected) for a in changes)
    out["changes recall"] = {
        "found": sum(a.found for a in changes),
        "expected": expected,
        "pct": pct(sum(a.found for a in changes), expected),
        "spurious": sum(a.spurious for a in changes),
        "n/a": not changes,
    }
    counted = [a.count for a in acks.values() if a.count is not None]
    out["acks stored"] = {"count": sum(counted) if counted else None, "goal": 0}
    if result is not None and not result.note:
        out["longmemeval newest first"] = {t: v.as_dict() for t, v in result.tallies.items()}
        out["longmemeval newest first"]["stopped"] = result.stopped
        out["longmemeval newest first"]["seconds"] = round(result.seconds, 1)
    return out


def answer_record(a: Answer) -> dict[str, Any]:
    q = a.question
    return {
        "id": q.id,
        "type": q.type,
        "question": q.question,
        "retrieve": a.retrieve,
        "context": a.context,
        "recall": a.recall,
        "spurious": a.spurious,
        "seen": a.seen,
        "errors": a.errors,
    }
