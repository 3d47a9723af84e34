"""Agent isolation: randomized operations across 5 agents of one home never leak a row.

Every text an agent writes carries its own marker (`<agent>mark`), so a leak is visible
anywhere: after every step each agent's retrieval, memories, hot state, tree, MEMORY file,
export and every row of every table with an `agent_id` column hold only that agent's markers.
The default suite runs a few examples; `-m fuzz` runs TIERMEM_ISOLATION_EXAMPLES (100 × 40 steps).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.reliability.conftest import Record, env_int
from tiermem.core import curate
from tiermem.core.config import Config, HotConfig, TreeConfig, WarmConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import TiermemError
from tiermem.core.interchange import export_json

from ..conftest import Clock

AGENTS = ("ada", "bob", "cyd", "dee", "eve")
SMALL = Config(
    hot=HotConfig(max_bytes=1500, max_lessons=4, max_events=3, max_pending_tasks=3),
    warm=WarmConfig(max_bytes=600, retention_days=3),
    tree=TreeConfig(max_nodes=10, max_depth=3, max_children=4, max_bytes=500, prune_idle_days=5),
)
agents = st.sampled_from(AGENTS)
words = st.lists(
    st.sampled_from(["tea", "deploy", "zebra", "testnet", "owner", "plan"]), min_size=1, max_size=4
).map(" ".join)
paths = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3).map("/".join)


def marked(agent: str, text: str) -> str:
    return f"{agent}mark {text}"


def foreign_marks(agent: str, text: str) -> list[str]:
    return [f"{other}mark" for other in AGENTS if other != agent and f"{other}mark" in text]


class Isolation(RuleBasedStateMachine):
    @initialize()
    def open(self) -> None:
        shm = Path("/dev/shm")  # in RAM where there is one: many thousands of fsyncs
        self.dir = Path(tempfile.mkdtemp(prefix="tiermem-iso-", dir=shm if shm.is_dir() else None))
        self.clock = Clock()
        self.mems = {a: Memory(self.dir, a, config=SMALL, clock=self.clock) for a in AGENTS}

    def teardown(self) -> None:
        for mem in getattr(self, "mems", {}).values():
            mem.close()
        if hasattr(self, "dir"):
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(agent=agents, text=words, category=paths, importance=st.floats(0, 1))
    def store(self, agent: str, text: str, category: str, importance: float) -> None:
        self.mems[agent].store(marked(agent, text), category, importance)

    @rule(agent=agents, text=words)
    def hot_edits(self, agent: str, text: str) -> None:
        mem = self.mems[agent]
        mem.add_lesson(marked(agent, text), 0.8)
        mem.add_event(marked(agent, text))
        mem.add_task(marked(agent, "task " + text))
        mem.update_hot("identity", {"name": marked(agent, text)})

    @rule(agent=agents, path=paths, text=words)
    def tree_add(self, agent: str, path: str, text: str) -> None:
        with contextlib.suppress(TiermemError):
            self.mems[agent].tree_add(path, marked(agent, text))

    @rule(agent=agents, path=paths)
    def tree_remove(self, agent: str, path: str) -> None:
        with contextlib.suppress(TiermemError):
            self.mems[agent].tree_remove(path)

    @rule(agent=agents, query=words)
    def retrieve(self, agent: str, query: str) -> None:
        for hit in self.mems[agent].retrieve(query, tier="all").hits:
            assert hit.memory.text.startswith(f"{agent}mark"), (agent, hit.memory.text)

    @rule(agent=agents, other=agents)
    def cross_lookups(self, agent: str, other: str) -> None:
        """Another agent's memory id is not found, not forgettable, not pinnable."""
        theirs = [m.id for chunk in self.mems[other].memories.iter_all() for m in chunk]
        if agent == other or not theirs:
            return
        mem = self.mems[agent]
        assert mem.memories.get_many(theirs[:5]) == []
        with contextlib.suppress(TiermemError):
            curate.move_to_forgotten(mem, theirs[0])
            raise AssertionError(f"{agent} forgot {other}'s memory")

    @rule(agent=agents, index=st.integers(0, 50))
    def forget_own(self, agent: str, index: int) -> None:
        mine = [m.id for chunk in self.mems[agent].memories.iter_all() for m in chunk]
        if mine:
            curate.move_to_forgotten(self.mems[agent], mine[index % len(mine)])

    @rule(agent=agents, mode=st.sampled_from(["quick", "daily", "monthly", "full"]))
    def consolidate(self, agent: str, mode: str) -> None:
        self.mems[agent].consolidate(mode)

    @rule(days=st.floats(0, 10))
    def time_passes(self, days: float) -> None:
        self.clock.advance(days)

    @invariant()
    def nothing_leaks(self) -> None:
        if not hasattr(self, "mems"):
            return
        db = self.mems[AGENTS[0]].db
        tables = [
            r[0]
            for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")
            if "agent_id" in {c[1] for c in db.query(f"PRAGMA table_info({r[0]})")}
        ]
        for table in tables:
            for row in db.query(f'SELECT * FROM "{table}"'):
                columns = [c[1] for c in db.query(f"PRAGMA table_info({table})")]
                owner = row[columns.index("agent_id")]
                if owner in AGENTS:
                    leaked = foreign_marks(owner, " ".join(str(v) for v in row))
                    assert not leaked, f"{table}: a row of {owner} holds {leaked}"
        for agent, mem in self.mems.items():
            views = [
                mem.memory_md(),
                mem.context_block(),
                "".join(export_json(mem)),
                mem.home.memory_md(agent).read_text() if mem.home.memory_md(agent).exists() else "",
            ]
            for view in views:
                assert not foreign_marks(agent, view), (agent, foreign_marks(agent, view))
            assert mem.trees.load().check() == []


def run_machine(examples: int, steps: int) -> None:
    Isolation.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    Isolation.TestCase("runTest").runTest()


def test_isolation_quick() -> None:
    run_machine(5, 25)


@pytest.mark.fuzz
def test_isolation_five_agents(figures: Record) -> None:
    examples = env_int("TIERMEM_ISOLATION_EXAMPLES", 100)
    run_machine(examples, 40)
    figures(f"{examples} runs × 40 random steps over 5 agents: 0 rows leaked")
