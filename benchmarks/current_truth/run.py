"""Ask tiermem through its public CLI, in subprocesses, as a user's agent would.

Every call is `tiermem --home H --agent-id PERSON ... --json`. An option or command the CLI does
not have yet exits 2 (a usage error): that answer is None ("n/a"), never a crash.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.current_truth.dataset import Person, Question, has
from benchmarks.current_truth.scoring import (
    acks_stored,
    changes_found,
    context_pass,
    entries_of,
    rank_pass,
    spurious_changes,
)

USAGE = 2  # click's exit code for an unknown option or command
TIMEOUT = 120


def tiermem_command() -> list[str]:
    """The venv's `tiermem` beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "tiermem"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("tiermem")
    return [found] if found else [sys.executable, "-m", "tiermem"]


@dataclass
class Call:
    """One CLI call: its exit code, its JSON (None when it printed none) and its error text."""

    code: int
    data: Any
    error: str
    seconds: float

    @property
    def missing(self) -> bool:
        """The CLI has no such option or command (yet)."""
        return self.code == USAGE


class Cli:
    """The tiermem CLI on one memory home, one agent per person."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.base = tiermem_command()
        self.env = {**os.environ, "TIERMEM_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
        self.calls = 0

    def __call__(self, agent: str, *args: str) -> Call:
        argv = [*self.base, "--home", str(self.home), "--agent-id", agent, *args]
        started = time.perf_counter()
        self.calls += 1
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, env=self.env, timeout=TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            return Call(-1, None, f"timed out after {TIMEOUT} s", TIMEOUT)
        seconds = time.perf_counter() - started
        return Call(done.returncode, _json_of(done.stdout), done.stderr.strip(), seconds)


def _json_of(stdout: str) -> Any:
    try:
        return json.loads(stdout)
    except json.JSONDecodeError:
        return None


@dataclass
class Imported:
    person: str
    code: int
    seconds: float
    conversations: int = 0
    facts: int = 0  # facts stored from the conversations, or notes' facts for OpenClaw
    error: str = ""


def import_person(cli: Cli, person: Person) -> Imported:
    """Import a person's export into their own agent (the agent is named after them)."""
    call = cli(person.name, "import", "--from", person.format, str(person.path), "--json")
    done = Imported(person.name, call.code, call.seconds)
    if call.code:
        done.error = call.error[-300:]
    elif isinstance(call.data, dict):
        done.conversations = int(call.data.get("conversations") or 0)
        done.facts = int(call.data.get("facts_from_conversations") or 0) + int(
            call.data.get("stored") or 0
        )
    return done


@dataclass
class Answer:
    """How one question went: each column True/False, or None when the CLI lacks it."""

    question: Question
    retrieve: bool | None = None
    context: bool | None = None
    recall: float | None = None  # changes: the fraction of expected changes found
    found: int = 0
    spurious: int = 0
    seen: list[str] = field(default_factory=list)  # what came back, for the JSON report
    errors: list[str] = field(default_factory=list)


def _texts(call: Call) -> list[str]:
    results = call.data.get("results", []) if isinstance(call.data, dict) else []
    return [str(r.get("text", "")) for r in results if isinstance(r, dict)]


def _failed(answer: Answer, what: str, call: Call) -> None:
    answer.errors.append(f"{what}: exit {call.code}: {call.error[-300:]}")


def ask(cli: Cli, person: Person, q: Question) -> Answer:
    """Ask one question the way its type says."""
    answer = Answer(q)
    if q.type == "current":
        _ask_current(cli, person, q, answer)
    elif q.type == "as_of":
        call = cli(
            person.name, "retrieve", q.question, "--as-of", str(q.as_of), "--limit", "3", "--json"
        )
        if not call.missing:
            answer.seen = _texts(call)
            answer.retrieve = call.code == 0 and rank_pass(answer.seen, q.current, q.superseded)
            if call.code:
                _failed(answer, "retrieve --as-of", call)
    else:
        _ask_changes(cli, person, q, answer)
    return answer


def _ask_current(cli: Cli, person: Person, q: Question, answer: Answer) -> None:
    call = cli(person.name, "retrieve", q.question, "--limit", "3", "--json")
    answer.seen = _texts(call)
    answer.retrieve = call.code == 0 and rank_pass(answer.seen, q.current, q.superseded)
    if call.code:
        _failed(answer, "retrieve", call)
    block = cli(person.name, "context", "--query", q.question, "--json")
    text = str(block.data.get("context", "")) if isinstance(block.data, dict) else ""
    answer.context = block.code == 0 and context_pass(text, q.current, q.superseded)
    if block.code:
        _failed(answer, "context", block)
    elif not answer.context:
        answer.seen.append("[context] " + " | ".join(_relevant_lines(text, q)))


def _relevant_lines(text: str, q: Question) -> list[str]:
    words = (*q.current, *q.superseded)
    return [line.strip()[:160] for line in text.splitlines() if has(line, words)][:4]


def _ask_changes(cli: Cli, person: Person, q: Question, answer: Answer) -> None:
    call = cli(person.name, "changes", "--since", str(q.since), "--json")
    if call.missing:
        return
    if call.code:
        _failed(answer, "changes", call)
        answer.recall = 0.0
        return
    entries = entries_of(call.data)
    answer.found = changes_found(entries, q.expected)
    answer.recall = answer.found / len(q.expected) if q.expected else 1.0
    answer.spurious = spurious_changes(entries, q.not_expected)
    answer.seen = [_change_line(e) for e in entries][:30]


def _change_line(entry: dict[str, Any]) -> str:
    old, new = entry.get("old") or {}, entry.get("new") or {}
    return (
        f"{entry.get('at', '')}: {str(old.get('text', ''))[:80]} → {str(new.get('text', '—'))[:80]}"
    )


@dataclass
class Acks:
    """Stored memories that repeat an assistant's acknowledgement, per person."""

    count: int | None
    examples: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def check_acks(cli: Cli, person: Person, scratch: Path) -> Acks:
    """Export the agent's memories and its hot memory, and count the acknowledgements in them."""
    out = scratch / f"{person.name}-export.json"
    export = cli(person.name, "export", "--format", "json", "-o", str(out))
    hot = cli(person.name, "hot", "--json")
    if export.code or not out.is_file():
        return Acks(None, errors=[f"export: exit {export.code}: {export.error[-300:]}"])
    data = json.loads(out.read_text(encoding="utf-8"))
    memories = [str(m.get("text", "")) for m in data.get("memories", [])]
    memories += hot_texts(hot.data.get("hot") if isinstance(hot.data, dict) else None)
    found = acks_stored(memories, person.acks)
    return Acks(len(found), found[:10])


def hot_texts(hot: Any) -> list[str]:
    """Every string held in hot memory (profile values, lessons, events, tasks, projects)."""
    if isinstance(hot, str):
        return [hot]
    if isinstance(hot, dict):
        return [t for v in hot.values() for t in hot_texts(v)]
    if isinstance(hot, list):
        return [t for v in hot for t in hot_texts(v)]
    return []
