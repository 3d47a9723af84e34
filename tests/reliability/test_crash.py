"""Crash consistency: SIGKILL a writer at seeded random moments, reopen, check everything.

A child process (`crash_child.py`, the shipped libSQL driver) runs a mixed workload — stores,
retrievals that reinforce, consolidations, tree edits, hot edits, each hot/tree edit writing the
sync outbox — and acknowledges every operation after it returned (its transaction committed).
The parent kills it at a random moment (sometimes while it is still opening and migrating),
then reopens the home the way the next writer would (reading MEMORY.md back first) and checks:

- `PRAGMA integrity_check`, the FTS index, foreign keys;
- every domain invariant (hot and tree limits, one row per memory, ...);
- every acknowledged write is there: stored memories, reinforcements (access counts never go
  back), the identity counter, the newest events, tree nodes added and removed, outbox rows;
- MEMORY.md is the rendering of the hot state.

The default suite kills 5 times; `-m crash` kills TIERMEM_CRASH_KILLS times (200).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import Record, env_int
from tests.reliability.invariants import domain_problems, storage_problems
from tiermem.core import hot as hotmod
from tiermem.core.db import Database
from tiermem.core.engine import Memory

CHILD = Path(__file__).with_name("crash_child.py")
LAST_EVENTS = 5  # ≤ 1 unacknowledged event + these 5 stay within the 10 events kept


@dataclass
class Model:
    """What the acknowledgements promise."""

    stored: dict[str, str] = field(default_factory=dict)
    reinforced: Counter[str] = field(default_factory=Counter)
    counter: int = 0
    counter_maybe: int | None = None
    events: list[str] = field(default_factory=list)
    tree_present: set[str] = field(default_factory=set)
    tree_absent: set[str] = field(default_factory=set)
    critical: int = 0
    acks: int = 0

    def apply(self, op: dict[str, Any]) -> None:
        self.acks += 1
        kind, result = op["kind"], op["result"]
        if kind == "store":
            self.stored[result] = op["text"]
        elif kind == "retrieve":
            self.reinforced.update(result)
        elif kind == "identity":
            self.counter = op["counter"]
            self.critical += 1
        elif kind == "event" and result == "ok":
            self.events.append(op["text"])
            self.critical += 1
        elif kind == "complete" and result != "none":
            self.events.append(result)
            self.critical += 1
        elif kind in ("lesson", "task") and result == "ok":
            self.critical += 1
        elif kind == "tree_add" and result == "ok":
            self.tree_present.add(op["path"])
            self.critical += 1
        elif kind == "tree_remove" and result == "ok":
            self.tree_present.discard(op["path"])
            self.tree_absent.add(op["path"])
            self.critical += 1

    def in_flight(self, op: dict[str, Any]) -> None:
        """The operation begun and not acknowledged: it may or may not have happened."""
        if op["kind"] == "identity":
            self.counter_maybe = op["counter"]
        elif op["kind"] == "tree_remove":
            self.tree_present.discard(op["path"])


@dataclass
class Kill:
    acks: list[dict[str, Any]]
    begun: dict[str, Any] | None
    ready: bool
    stderr: str
    returncode: int


def run_and_kill(home: Path, seed: int, round_no: int, rng: random.Random) -> Kill:
    env = {k: v for k, v in os.environ.items() if k != "TIERMEM_DRIVER"}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(home), str(seed), str(round_no)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[bytes] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(b'{"ready"'):
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if rng.random() < 0.15:  # anywhere in start-up, opening and migrating included
            time.sleep(rng.uniform(0.0, 0.5))
        else:
            ready.wait(60)
            time.sleep(rng.uniform(0.01, 0.6))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        reader.join(60)
        stderr = proc.stderr.read().decode(errors="replace")
        proc.stdout.close()
        proc.stderr.close()
    acks: list[dict[str, Any]] = []
    begun = None
    for raw in lines:
        if not raw.endswith(b"\n"):
            continue  # cut by the kill
        message = json.loads(raw)
        if "begin" in message:
            begun = message["begin"]
        elif "ack" in message:
            acks.append(message["ack"])
            begun = None
    return Kill(acks, begun, ready.is_set(), stderr, proc.returncode)


def check_home(home: Path, model: Model) -> list[str]:
    """Every problem found after a kill (empty: nothing corrupted, nothing acknowledged lost)."""
    db = Database(home / "tiermem.db")
    try:
        problems = storage_problems(db)
    finally:
        db.close()
    with Memory(home, "default") as mem:
        mem.read_back_memory_md()  # what the next writer does first
        problems += domain_problems(mem)
        ids = list(model.stored)
        found = {
            m.id: m
            for start in range(0, len(ids), 500)
            for m in mem.memories.get_many(ids[start : start + 500])
        }
        missing = [model.stored[i] for i in ids if i not in found]
        if missing:
            problems.append(f"{len(missing)} acknowledged stores lost, e.g. {missing[:3]}")
        for memory_id, count in model.reinforced.items():
            if memory_id in found and found[memory_id].access_count < count:
                problems.append(
                    f"{memory_id}: access count {found[memory_id].access_count} < {count} "
                    "acknowledged reinforcements"
                )
        state = mem.hot()
        counter = int(state.identity.get("counter", 0))
        if counter not in (model.counter, model.counter_maybe):
            problems.append(f"identity counter {counter}, acknowledged {model.counter}")
        model.counter, model.counter_maybe = counter, None
        events = {e.text for e in state.active_context.events}
        lost_events = [e for e in model.events[-LAST_EVENTS:] if e not in events]
        if lost_events:
            problems.append(f"acknowledged events lost: {lost_events}")
        nodes = set(mem.trees.load().nodes)
        if model.tree_present - nodes:
            problems.append(f"acknowledged tree nodes lost: {sorted(model.tree_present - nodes)}")
        if model.tree_absent & nodes:
            problems.append(f"removed tree nodes are back: {sorted(model.tree_absent & nodes)}")
        outbox = int(mem.db.scalar("SELECT count(*) FROM outbox WHERE agent_id = 'default'"))
        if outbox < model.critical:
            problems.append(f"outbox holds {outbox} rows for {model.critical} acknowledged edits")
        path = mem.home.memory_md("default")
        if state.updated_at and not path.exists():
            problems.append("MEMORY.md is missing")
        elif state.updated_at and path.read_text(encoding="utf-8") != hotmod.render_markdown(state):
            problems.append("MEMORY.md is not the rendering of the hot state")
    return problems


def crash_run(tmp_path: Path, seed: int, kills: int, figures: Record) -> None:
    rng = random.Random(seed)
    home = tmp_path / "home"
    model = Model()
    started = time.monotonic()
    early = corrupted = lost = 0
    for round_no in range(kills):
        kill = run_and_kill(home, seed, round_no, rng)
        context = f"seed={seed} kill={round_no}"
        assert kill.returncode == -signal.SIGKILL, (
            f"{context}: child ended by itself\n{kill.stderr}"
        )
        assert "Traceback" not in kill.stderr, f"{context}\n{kill.stderr}"
        early += not kill.ready
        for op in kill.acks:
            model.apply(op)
        if kill.begun is not None:
            model.in_flight(kill.begun)
        if not (home / "tiermem.db").exists():
            continue  # killed before the database file was created
        problems = check_home(home, model)
        corrupted += any(p.startswith(("integrity", "fts", "foreign")) for p in problems)
        lost += any("lost" in p for p in problems)
        assert problems == [], f"{context}: {problems}"
    seconds = time.monotonic() - started
    figures(
        f"{kills} kills: {corrupted} corruptions, {lost} lost acknowledged writes; "
        f"{model.acks} acknowledged operations ({len(model.stored)} stores, "
        f"{sum(model.reinforced.values())} reinforcements, {model.critical} hot/tree edits), "
        f"{early} kills during start-up; {seconds:.0f} s"
    )


def test_crash_bounded(tmp_path: Path, seed: int, figures: Record) -> None:
    crash_run(tmp_path, seed, 5, figures)


@pytest.mark.crash
def test_crash_kills(tmp_path: Path, seed: int, figures: Record) -> None:
    crash_run(tmp_path, seed, env_int("TIERMEM_CRASH_KILLS", 200), figures)


def test_a_kill_before_memory_md_is_rewritten_does_not_undo_the_commit(tmp_path: Path) -> None:
    """The window the kill loop hits rarely, made certain: the hot edit (or the promotion of a
    consolidation) committed, the process died before rewriting MEMORY.md. The next writer
    reads MEMORY.md back first; the stale file must not be taken for a hand edit."""
    home = tmp_path / "home"
    with Memory(home) as mem:
        mem.update_hot("identity", {"counter": 1})
        stale = mem.home.memory_md("default").read_text(encoding="utf-8")
        mem.update_hot("identity", {"counter": 2})
        mem.store("Always run the zebra testnet checks before a deploy", "ops", 1.0)
        mem.home.memory_md("default").write_text(stale, encoding="utf-8")  # never rewritten
    with Memory(home) as mem:
        report = mem.read_back_memory_md()
        assert not report.edited and mem.hot().identity == {"counter": 2}
        assert mem.home.memory_md("default").read_text() == hotmod.render_markdown(mem.hot())
        before = mem.home.memory_md("default").read_text(encoding="utf-8")
        promoted = mem.consolidate("quick").promoted
        assert promoted, "the fact should be promoted into a hot lesson"
        mem.home.memory_md("default").write_text(before, encoding="utf-8")  # killed again
    with Memory(home) as mem:
        mem.add_event("the next writer")
        lessons = [lesson.text for lesson in mem.hot().critical_lessons]
        assert promoted[0].text in lessons, "the promotion was undone by a stale MEMORY.md"
