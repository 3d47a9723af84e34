"""Answers that are true now: facts that change, measured through the public CLI.

    .venv/bin/python -m benchmarks.current_truth [--quick] [--json] [--out FILE]
        [--people ines,jess] [--lme N | --no-lme]

Imports each person of `benchmarks/current_truth/data/` into their own agent of a fresh
temporary home (`tiermem import --from FORMAT`), then asks every question in a subprocess:
`retrieve --limit 3` and `context --query` for what is true now, `retrieve --as-of DATE` for
what was true then, `changes --since DATE` for what changed, and exports the memories and hot
memory to count stored assistant acknowledgements. Then, on LongMemEval's knowledge-update and
temporal-reasoning questions, how often the newest evidence session outranks older evidence
(60 questions, half of each type, within a 7-minute budget; `--quick`: 30; `--lme 210`: all of
them). An option or command the CLI lacks shows as
"n/a (not available)". Prints a table per question type with goal met / not met and the load
average; `--json` prints the figures as one JSON document instead (tables go to stderr).
Always exits 0 once it has run: goals not met are figures, not failures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from benchmarks.current_truth import lme, report
from benchmarks.current_truth.dataset import Person, load_people
from benchmarks.current_truth.run import Acks, Answer, Cli, Imported, ask, check_acks, import_person

QUICK_LME = 30
DEFAULT_LME = 60
LME_BUDGET = 420.0  # seconds: keeps a default run under about 10 minutes on 2 cores


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.current_truth",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"LongMemEval on {QUICK_LME} questions"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--out", type=Path, help="also write the JSON to this file")
    parser.add_argument("--people", help="only these people (comma-separated)")
    parser.add_argument(
        "--lme",
        type=int,
        help=f"LongMemEval questions, half of each type (default {DEFAULT_LME}; 210 is all)",
    )
    parser.add_argument(
        "--lme-seconds", type=float, default=LME_BUDGET, help="stop LongMemEval after this long"
    )
    parser.add_argument("--no-lme", action="store_true", help="skip LongMemEval")
    return parser.parse_args(argv)


def ask_everyone(
    cli: Cli, people: list[Person], scratch: Path, say: Callable[[str], None]
) -> tuple[list[Imported], list[Answer], dict[str, Acks]]:
    """Import each person, ask their questions, and count the stored acknowledgements."""
    imports, answers, acks = [], [], {}
    for person in people:
        say(f"{person.name}: import --from {person.format}")
        imported = import_person(cli, person)
        imports.append(imported)
        if imported.code:
            say(f"{person.name}: import failed (exit {imported.code}): {imported.error}")
        say(f"{person.name}: {len(person.questions)} questions")
        answers += [ask(cli, person, q) for q in person.questions]
        acks[person.name] = check_acks(cli, person, scratch)
    return imports, answers, acks


def tables(
    people: list[Person],
    imports: list[Imported],
    answers: list[Answer],
    acks: dict[str, Acks],
    result: lme.Result | None,
) -> str:
    by_type = {
        t: sum(a.question.type == t for a in answers) for t in ("current", "as_of", "changes")
    }
    parts = [
        report.imports_line(imports),
        f"\ncurrent: what is true now ({by_type['current']} questions)",
        report.question_table(
            people,
            answers,
            "current",
            {"retrieve top 3": "retrieve", "context block": "context"},
        ),
        f"\nas_of: what was true on a date ({by_type['as_of']} questions)",
        report.question_table(people, answers, "as_of", {"retrieve --as-of top 3": "retrieve"}),
        f"\nchanges: what changed since a date ({by_type['changes']} questions)",
        report.changes_table(people, answers),
        "",
        report.acks_line(acks),
        "",
        report.lme_table(result),
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    names = args.people.split(",") if args.people else None
    people = load_people(names)
    started, load_before = time.time(), load()
    stream: TextIO = sys.stderr if args.json else sys.stdout

    def say(what: str) -> None:
        print(f"[{time.time() - started:6.1f} s, load {load()}] {what}", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="tiermem-current-truth-") as tmp:
        cli = Cli(Path(tmp) / "home")
        imports, answers, acks = ask_everyone(cli, people, Path(tmp), say)
    result = None
    if not args.no_lme:
        say("LongMemEval: newest evidence first")
        limit = args.lme or (QUICK_LME if args.quick else DEFAULT_LME)
        result = lme.run(limit, args.lme_seconds, say)
    load_after = load()
    print(tables(people, imports, answers, acks, result), file=stream)
    print(
        f"load average (1, 5, 15 min): {load_before} before, {load_after} after; "
        f"{os.cpu_count()} CPUs; {cli.calls} CLI calls in {time.time() - started:.0f} s",
        file=stream,
    )
    loads = (load_before, load_after)
    document = build_report(args, people, started, loads, imports, answers, acks, result)
    if args.json:
        print(json.dumps(document, indent=2, ensure_ascii=False))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        print(f"written to {args.out}", file=stream)
    return 0


def dataset_counts(people: list[Person]) -> dict[str, Any]:
    """What was asked: people, formats, questions per type, expected changes, acknowledgements."""
    questions = [q for p in people for q in p.questions]
    return {
        "people": [p.name for p in people],
        "formats": sorted({p.format for p in people}),
        "changes": sum(len(p.timeline) for p in people),
        "questions": {
            t: sum(q.type == t for q in questions) for t in ("current", "as_of", "changes")
        },
        "expected_changes": sum(len(q.expected) for q in questions),
        "acks": sum(len(p.acks) for p in people),
    }


def build_report(
    args: argparse.Namespace,
    people: list[Person],
    started: float,
    loads: tuple[str, str],
    imports: list[Imported],
    answers: list[Answer],
    acks: dict[str, Acks],
    result: lme.Result | None,
) -> dict[str, Any]:
    """The JSON document: headline figures, then every answer with what came back."""
    return {
        "benchmark": "current_truth",
        "started": started,
        "seconds": round(time.time() - started, 1),
        "mode": "quick" if args.quick else "full",
        "load_before": loads[0],
        "load_after": loads[1],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "dataset": dataset_counts(people),
        "figures": report.figures(answers, acks, result),
        "imports": [i.__dict__ for i in imports],
        "acks": {name: a.__dict__ for name, a in acks.items()},
        "answers": [report.answer_record(a) for a in answers],
    }


if __name__ == "__main__":
    sys.exit(main())
