"""Hypothesis: every invariant of the memory model holds after any sequence of operations.

Small limits make the machine hit every limit often; the code under test is limit-agnostic.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tiermem.core import hot as hotmod
from tiermem.core.config import (
    Config,
    DedupConfig,
    HotConfig,
    ScoringConfig,
    TreeConfig,
    WarmConfig,
)
from tiermem.core.engine import Memory
from tiermem.core.errors import LimitExceeded, TiermemError
from tiermem.core.scoring import DAY, score
from tiermem.core.warm import memory_id

from ..conftest import Clock

SMALL = Config(
    hot=HotConfig(max_bytes=900, max_lessons=4, max_events=3, max_pending_tasks=3),
    warm=WarmConfig(max_bytes=400, retention_days=5),
    tree=TreeConfig(max_nodes=8, max_depth=3, max_children=3, max_bytes=300, prune_idle_days=10),
)
AGENTS = ("desk", "phone")
words = st.sampled_from(
    ["alpha", "beta", "gamma", "deadline", "hackathon", "tea", "deploy", "testnet", "owner", "é"]
)
texts = st.lists(words, min_size=1, max_size=6).map(" ".join)
paths = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=5).map("/".join)


class MemoryMachine(RuleBasedStateMachine):
    @initialize()
    def open(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tiermem-prop-"))
        self.clock = Clock()
        self.mems = {a: Memory(self.dir, a, config=SMALL, clock=self.clock) for a in AGENTS}
        self.known: dict[str, set[str]] = {a: set() for a in AGENTS}

    def teardown(self) -> None:
        for mem in getattr(self, "mems", {}).values():
            mem.close()
        if hasattr(self, "dir"):
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(agent=st.sampled_from(AGENTS), text=texts, category=paths, importance=st.floats(0, 1))
    def store(self, agent: str, text: str, category: str, importance: float) -> None:
        out = self.mems[agent].store(text, category, importance)
        assert out.id == memory_id(agent, text)
        self.known[agent].add(out.id)

    @rule(agent=st.sampled_from(AGENTS), text=texts, importance=st.floats(0, 1))
    def lesson(self, agent: str, text: str, importance: float) -> None:
        with contextlib.suppress(LimitExceeded):  # refused when more important lessons fill hot
            self.mems[agent].add_lesson(text, importance)
        self.known[agent].add(memory_id(agent, text))  # hot limits may move it to warm

    @rule(agent=st.sampled_from(AGENTS), text=texts)
    def event_and_task(self, agent: str, text: str) -> None:
        with contextlib.suppress(LimitExceeded):  # refused when it cannot fit
            self.mems[agent].add_event(text)
        with contextlib.suppress(LimitExceeded):
            self.mems[agent].add_task(text)
        self.known[agent].add(memory_id(agent, text))  # hot limits may move them to warm

    @rule(agent=st.sampled_from(AGENTS), text=texts)
    def identity(self, agent: str, text: str) -> None:
        # Refused when too large: the state must then be unchanged (checked by invariants).
        with contextlib.suppress(TiermemError):
            self.mems[agent].update_hot("identity", {"note": text * 20})

    @rule(agent=st.sampled_from(AGENTS), path=paths, desc=texts)
    def tree_add(self, agent: str, path: str, desc: str) -> None:
        with contextlib.suppress(TiermemError):
            self.mems[agent].tree_add(path, desc)

    @rule(agent=st.sampled_from(AGENTS), path=paths)
    def tree_remove(self, agent: str, path: str) -> None:
        with contextlib.suppress(TiermemError):
            self.mems[agent].tree_remove(path)

    @rule(days=st.floats(0, 20))
    def time_passes(self, days: float) -> None:
        self.clock.advance(days)

    @rule(
        agent=st.sampled_from(AGENTS), mode=st.sampled_from(["quick", "daily", "monthly", "full"])
    )
    def consolidate(self, agent: str, mode: str) -> None:
        mem = self.mems[agent]
        mem.consolidate(mode)
        assert mem.memories.warm_bytes() <= SMALL.warm.max_bytes
        now = self.clock.now
        for m in mem.memories.in_tier("warm"):
            expired = now - m.created_at > SMALL.warm.retention_days * DAY
            assert not (expired and m.score(now, SMALL.scoring) < SMALL.scoring.warm_threshold)

    @rule(agent=st.sampled_from(AGENTS), query=texts, budget=st.none() | st.integers(1, 40))
    def retrieve(self, agent: str, query: str, budget: int | None) -> None:
        result = self.mems[agent].retrieve(query, budget=budget)
        assert {h.memory.id for h in result.hits} <= self.known[agent]  # never another agent's
        if budget is not None:
            assert result.tokens <= budget
        scores = [h.explanation.score for h in result.hits]
        if budget is None:
            assert scores == sorted(scores, reverse=True)

    @invariant()
    def limits_hold(self) -> None:
        if not hasattr(self, "mems"):
            return
        for agent, mem in self.mems.items():
            tree = mem.tree()
            assert tree.check() == []
            state = mem.hot()
            assert hotmod.size_bytes(state) <= SMALL.hot.max_bytes
            assert len(state.critical_lessons) <= SMALL.hot.max_lessons
            assert len(state.active_context.events) <= SMALL.hot.max_events
            assert len(state.active_context.tasks) <= SMALL.hot.max_pending_tasks
            stored = {m.id for c in mem.memories.iter_all() for m in c}
            assert stored <= self.known[agent]
            if state.updated_at:
                assert mem.home.memory_md(agent).read_text() == hotmod.render_markdown(state)


MemoryMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
TestMemoryMachine = MemoryMachine.TestCase


@given(
    importance=st.floats(0, 1),
    age=st.floats(0, 3650),
    more_age=st.floats(0, 100),
    accesses=st.integers(0, 1000),
)
def test_score_decays_with_age_and_grows_with_access(
    importance: float, age: float, more_age: float, accesses: int
) -> None:
    cfg = ScoringConfig()
    now = 1e9
    s = score(importance, now - age * DAY, accesses, now, cfg)
    assert 0 <= s <= importance * (1 + 0.1 * accesses)
    assert score(importance, now - (age + more_age) * DAY, accesses, now, cfg) <= s
    assert score(importance, now - age * DAY, accesses + 1, now, cfg) >= s
    assert math.isclose(s, importance * math.exp(-age / 30) * (1 + 0.1 * accesses), abs_tol=1e-12)


@settings(max_examples=20, deadline=None)
@given(facts=st.lists(texts, min_size=1, max_size=15), order=st.randoms())
def test_store_order_does_not_change_ids_or_count(tmp_path_factory, facts, order) -> None:
    shuffled = list(facts)
    order.shuffle(shuffled)
    results = []
    for batch in (facts, shuffled):
        home = tmp_path_factory.mktemp("h")
        # Content-addressed ids; near-duplicate merging (on by default) is order-dependent by
        # nature — which of two near-duplicates is kept — so it is off for this property.
        exact_only = Config(dedup=DedupConfig(near=False))
        with Memory(home, config=exact_only) as mem:
            for text in batch:
                mem.store(text, "c")
            results.append({m.id for c in mem.memories.iter_all() for m in c})
    assert results[0] == results[1] == {memory_id("default", t) for t in facts}
