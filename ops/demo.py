"""`tiermem demo`: a realistic demo agent, so a first look at the TUI shows a life.

The dataset (`assets/demo/`, package `tiermem.assets.demo`) is five months of one assistant's
memories over a sensible tree, its hot state (identity, profile, projects, lessons, events,
tasks), the questions it was asked and a few sync conflicts. `build_demo` replays it day by day
through the public facade under a clock that starts months before `now`: stores, retrievals
(which reinforce what they find), hot edits, the nightly consolidation and a metrics snapshot
per day. So tiers, scores, access counts, the tree's activity and the metrics history all come
from the real engine, not from fixtures. The same dataset and `now` give the same home.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiermem.core import agents, clocks, curate, episodes, graph
from tiermem.core.conflicts import record_conflict
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.scoring import DAY
from tiermem.core.warm import NewFact, memory_id

DEMO_AGENT = "demo"
DATASET = Path(__file__).resolve().parent.parent / "assets" / "demo"
"""`assets/demo` in a checkout, `tiermem/assets/demo` in an installed wheel."""
HOUR = 3600.0


@dataclass(frozen=True)
class DemoFact:
    day: int
    """Days before the build's `now` (0 = today)."""
    fact: NewFact


@dataclass(frozen=True)
class Dataset:
    days: int
    tree: list[tuple[str, str]]
    hot: dict[str, Any]
    pinned: list[str]
    queries: list[str]
    conflicts: list[dict[str, Any]]
    facts: list[DemoFact]
    episodes: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    """Day → the conversation of that day (role, text), kept as an episode."""


@dataclass
class DemoReport:
    home: Path
    agent_id: str
    days: int
    stored: int = 0
    retrievals: int = 0
    tiers: dict[str, int] = field(default_factory=dict)
    tree_nodes: int = 0
    conflicts: int = 0
    seconds: float = 0.0


def load_dataset() -> Dataset:
    """The dataset shipped in the package (`tiermem.assets.demo`)."""
    agent = json.loads((DATASET / "agent.json").read_text(encoding="utf-8"))
    facts = []
    for line in (DATASET / "memories.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        fact = NewFact(
            text=row["text"],
            category=row["category"],
            importance=float(row["importance"]),
            urls=tuple(row.get("urls", ())),
            commands=tuple(row.get("commands", ())),
            paths=tuple(row.get("paths", ())),
            source="demo",
        )
        facts.append(DemoFact(int(row["day"]), fact))
    talks = {}
    for line in (DATASET / "episodes.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            talks[int(row["day"])] = [(str(r), str(t)) for r, t in row["messages"]]
    return Dataset(
        episodes=talks,
        days=int(agent["days"]),
        tree=[(str(p), str(d)) for p, d in agent["tree"]],
        hot=agent["hot"],
        pinned=list(agent["pinned"]),
        queries=list(agent["queries"]),
        conflicts=list(agent["conflicts"]),
        facts=sorted(facts, key=lambda f: -f.day),
    )


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _device(name: str) -> str:
    return hashlib.sha256(f"tiermem-demo-{name}".encode()).hexdigest()[:32]


def build_demo(
    home: Path | str | None,
    agent_id: str = DEMO_AGENT,
    *,
    now: float | None = None,
    driver: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> DemoReport:
    """Replay the dataset into `agent_id` of `home`, ending at `now` (default: the real time).

    Refuses an agent that already has memories: the demo never mixes into real ones."""
    started = time.perf_counter()
    data = load_dataset()
    end = time.time() if now is None else now
    clock = _Clock(end - data.days * DAY - 12 * HOUR)
    with Memory(home, agent_id, clock=clock, driver=driver) as mem:
        if _count(mem):
            raise InvalidInput(
                f"agent {agent_id!r} already has memories in {mem.home.root}: "
                "give the demo another --agent-id"
            )
        report = DemoReport(mem.home.root, agent_id, data.days)
        try:
            with mem.db.transaction():  # all or nothing: ctrl-C leaves no half-built agent
                _replay(mem, data, clock, end, report, progress)
        except BaseException:
            _discard(mem)
            raise
    report.seconds = time.perf_counter() - started
    return report


def _episode(mem: Memory, source: str, talk: list[tuple[str, str]], fact_ids: list[str]) -> None:
    """The day's conversation as an episode with its facts, and its entities in the graph."""
    draft = episodes.Draft(
        source=source,
        texts=[text for _, text in talk],
        participants=sorted({role for role, _ in talk}),
        fact_ids=fact_ids,
        started_at=mem.now(),
        ended_at=mem.now() + 20 * 60,
    )
    with mem.db.transaction():
        episode = episodes.write(mem, draft)
        graph.index_episode(mem, episode.id, "\n".join(draft.texts))


def _replay(
    mem: Memory,
    data: Dataset,
    clock: _Clock,
    end: float,
    report: DemoReport,
    progress: Callable[[int, int], None] | None,
) -> None:
    """The dataset, day by day, into `mem` (inside the caller's transaction)."""
    agent_id = mem.agent_id
    _setup(mem, data)
    by_day: dict[int, list[NewFact]] = {}
    for f in data.facts:
        by_day.setdefault(f.day, []).append(f.fact)
    events = {int(d): str(t) for d, t in data.hot["events"]}
    tasks = [
        (int(d), str(t), None if done is None else int(done)) for d, t, done in data.hot["tasks"]
    ]
    conflicts = {int(c["day"]): c for c in data.conflicts}
    query_at = 0
    for day in range(data.days, -1, -1):
        base = end - day * DAY
        clock.now = base - 10 * HOUR  # the morning: what was learned
        stored = [mem.store_many([fact])[0] for fact in by_day.get(day, [])]
        report.stored += sum(o.created for o in stored)
        if day in data.episodes:
            _episode(mem, f"demo:day-{day}", data.episodes[day], [o.id for o in stored])
        for d, text, _ in tasks:
            if d == day:
                mem.add_task(text)
        for d, text, done in tasks:
            if done == day and d > day:
                task = [t for t in mem.hot().active_context.tasks if t.text == text]
                if task:
                    mem.complete_task(task[0].id)
        if day in events:
            mem.add_event(events[day])
        clock.now = base - 7 * HOUR  # the afternoon: questions
        for _ in range(1 + (day * 7) % 3):
            mem.retrieve(data.queries[query_at % len(data.queries)])
            query_at += 1
            report.retrievals += 1
        if day in conflicts:
            report.conflicts += _conflict(mem, conflicts[day], base - 6 * HOUR)
        clock.now = base - 1 * HOUR  # the night: maintenance, then the day's metrics
        mem.consolidate("monthly" if day % 30 == 0 else "daily")
        mem.snapshot_metrics()
        if progress is not None:
            progress(data.days - day + 1, data.days + 1)
    clock.now = end
    for text in data.pinned:
        curate.set_pinned(mem, memory_id(agent_id, text), True)
    mem.snapshot_metrics()
    report.tiers = mem.gauges()
    report.tree_nodes = len(mem.tree().nodes)


def _discard(mem: Memory) -> None:
    """After an interrupted build: the agent the build created goes, with its MEMORY.md."""
    if mem.created_agent:
        with mem.db.transaction():
            agents.delete_agent(mem.db, mem.agent_id)
        agents.move_memory_md(mem.home, mem.agent_id, None)
    elif not _count(mem):
        mem.write_memory_md()  # the agent existed, empty: its MEMORY.md as it was


def _count(mem: Memory) -> int:
    return int(mem.db.scalar("SELECT count(*) FROM memories WHERE agent_id = ?", (mem.agent_id,)))


def _setup(mem: Memory, data: Dataset) -> None:
    """Day one: the tree and the hot state the owner set up."""
    for path, description in data.tree:
        mem.tree_add(path, description)
    hot = data.hot
    mem.update_hot("identity", dict(hot["identity"]))
    mem.update_hot("owner_profile", dict(hot["owner_profile"]))
    for name, description, status in hot["projects"]:
        mem.add_project(name, description, status)
    for text, importance, category in hot["lessons"]:
        mem.add_lesson(text, float(importance), category)


def _conflict(mem: Memory, spec: dict[str, Any], at: float) -> int:
    """A merge this laptop won against the phone: the phone's value is kept as a conflict."""
    item = str(spec["item"])
    kind, _, name = item.partition(":")
    if kind == "project":
        project = next(p for p in mem.hot().active_context.projects if p.name == name)
        item = f"project/{project.id}"
    elif kind == "tree":
        item = f"tree/{name}"
    ms = int(at * 1000)
    kept = clocks.version(clocks.stamp_text(ms, 0), _device("laptop"))
    lost = clocks.version(clocks.stamp_text(ms - 95_000, 0), _device("phone"))
    with mem.db.transaction():
        record_conflict(
            mem.db,
            mem.agent_id,
            item,
            str(spec["field"]),
            spec["kept"],
            spec["lost"],
            kept,
            lost,
            _device("phone"),
            at,
            reason=str(spec.get("reason", "")),
            resolved=bool(spec.get("resolved", False)),
        )
    return 1
