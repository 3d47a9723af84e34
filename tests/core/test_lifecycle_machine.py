"""Hypothesis state machine over the public API: memory is never lost, never resurrected and
never created by mistake.

Store, edit, pin, unpin, forget, unforget, hot edits at and over the limits, retrieve,
consolidate and time passing, in any order. After every step: nothing stored or pinned is gone
without an explicit forget (a hot lesson may be pruned only with the write reporting it), a
forgotten memory stays gone until it is unforgotten (or its text
is stored again on purpose), nothing exists that was not stored, ids never change, the limits
hold. A hot edit over a limit may be refused (`LimitExceeded`) or prune; both are fine as long
as the limits hold.

The default suite runs a few examples; `-m fuzz` runs TIERMEM_LIFECYCLE_EXAMPLES (100).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from tiermem.core import curate
from tiermem.core import hot as hotmod
from tiermem.core.config import Config, HotConfig, TreeConfig, WarmConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, LimitExceeded, NotFound
from tiermem.core.warm import normalize_text

from ..conftest import Clock

SMALL = Config(
    hot=HotConfig(max_bytes=900, max_lessons=4, max_events=3, max_pending_tasks=3),
    warm=WarmConfig(max_bytes=600, retention_days=5),
    tree=TreeConfig(max_nodes=8, max_depth=3, max_children=3, max_bytes=300, prune_idle_days=10),
)
words = st.sampled_from(
    ["alpha", "beta", "gamma", "deadline", "hackathon", "tea", "deploy", "testnet", "owner", "é"]
)
texts = st.lists(words, min_size=1, max_size=6).map(" ".join) | st.builds(
    "{} {}".format, words, st.integers(0, 99)
)
paths = st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3).map("/".join)


class Lifecycle(RuleBasedStateMachine):
    memories = Bundle("memories")
    gone = Bundle("gone")

    @initialize()
    def open(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tiermem-life-"))
        self.clock = Clock()
        self.mem = Memory(self.dir, "desk", config=SMALL, clock=self.clock)
        self.live: dict[str, str] = {}  # id → the text it must have
        self.forgotten: set[str] = set()
        self.pinned: set[str] = set()
        self.lessons: dict[str, str] = {}  # hot lessons acknowledged and not reported pruned

    def teardown(self) -> None:
        if hasattr(self, "mem"):
            self.mem.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(target=memories, text=texts, category=paths, importance=st.floats(0, 1))
    def store(self, text: str, category: str, importance: float) -> str:
        out = self.mem.store(text, category, importance)
        if out.created:
            assert out.id not in self.live
            self.live[out.id] = " ".join(text.split())
            self.forgotten.discard(out.id)  # its text stored again on purpose
        else:
            assert out.id in self.live  # a known memory, never a forgotten one
        return out.id

    @rule(memory=memories, text=texts)
    def edit(self, memory: str, text: str) -> None:
        if memory not in self.live:
            return
        try:
            edited = curate.edit(self.mem, memory, text=text)
        except InvalidInput:
            others = [normalize_text(t) for i, t in self.live.items() if i != memory]
            assert normalize_text(text) in others  # refused only for another memory's text
            return
        assert edited.id == memory
        self.live[memory] = edited.text

    @rule(memory=memories, pin=st.booleans())
    def pin(self, memory: str, pin: bool) -> None:
        if memory not in self.live:
            return
        curate.set_pinned(self.mem, memory, pin)
        (self.pinned.add if pin else self.pinned.discard)(memory)

    @rule(target=gone, memory=consumes(memories))
    def forget(self, memory: str) -> str:
        if memory not in self.live:
            return memory
        assert curate.move_to_forgotten(self.mem, memory).id == memory
        del self.live[memory]
        self.pinned.discard(memory)
        self.forgotten.add(memory)
        return memory

    @rule(target=memories, memory=consumes(gone))
    def unforget(self, memory: str) -> str:
        if memory not in self.forgotten:
            return memory
        back = curate.undo_forget(self.mem, memory)
        assert back.id == memory
        self.forgotten.discard(memory)
        self.live[memory] = back.text
        return memory

    def reported(self, pruned: list[str]) -> None:
        """Lessons a write reported as pruned (a recorded move) are no longer promised in hot
        memory; what it moved to warm memory is a warm fact from now on, and only what it
        reported may appear there."""
        for memory_id, text in list(self.lessons.items()):
            if f"lesson: {text}" in pruned:
                del self.lessons[memory_id]
        moved = [item.split(": ", 1)[1] for item in pruned if ": " in item]
        for chunk in self.mem.memories.iter_all():
            for m in chunk:
                if m.id not in self.live and any(text in m.text for text in moved):
                    self.live[m.id] = m.text  # a hot item the owner kept, now a warm fact,
                    self.forgotten.discard(m.id)  # even if a forgotten memory had its text

    @rule(text=texts, repeat=st.integers(1, 40), importance=st.floats(0, 1))
    def hot_lesson(self, text: str, repeat: int, importance: float) -> None:
        with contextlib.suppress(LimitExceeded, InvalidInput):
            lesson, pruned = self.mem.add_lesson(" ".join([text] * repeat), importance)
            self.lessons[lesson.id] = lesson.text
            self.reported(pruned)

    @rule(text=texts, repeat=st.integers(1, 60))
    def hot_identity(self, text: str, repeat: int) -> None:
        with contextlib.suppress(LimitExceeded, InvalidInput):
            self.reported(self.mem.update_hot("identity", {"note": " ".join([text] * repeat)}))

    @rule(text=texts)
    def hot_event_and_task(self, text: str) -> None:
        with contextlib.suppress(LimitExceeded, InvalidInput):
            self.reported(self.mem.add_event(text)[1])
            self.reported(self.mem.add_task(text)[1])

    @rule(query=texts)
    def retrieve(self, query: str) -> None:
        hits = {h.memory.id for h in self.mem.retrieve(query).hits}
        assert hits <= set(self.live)

    @rule(mode=st.sampled_from(["quick", "daily", "monthly", "full"]))
    def consolidate(self, mode: str) -> None:
        self.reported(self.mem.consolidate(mode).hot_pruned)
        assert self.mem.memories.warm_bytes() <= SMALL.warm.max_bytes or self.pinned

    @rule(days=st.floats(0, 20))
    def time_passes(self, days: float) -> None:
        self.clock.advance(days)

    @invariant()
    def nothing_lost_resurrected_or_made_up(self) -> None:
        if not hasattr(self, "mem"):
            return
        stored = {m.id: m for chunk in self.mem.memories.iter_all() for m in chunk}
        assert set(stored) == set(self.live)  # ids never change; nothing extra, nothing lost
        for memory_id, text in self.live.items():
            assert stored[memory_id].text == text
        for memory_id in self.forgotten:
            with pytest.raises(NotFound):
                self.mem.get(memory_id)
        for memory_id in self.pinned:
            listed = curate.get_listed(self.mem, memory_id)
            assert listed.pinned and listed.record.tier == "warm"

    @invariant()
    def acknowledged_lessons_stay(self) -> None:
        if not hasattr(self, "mem"):
            return
        present = {lesson.id for lesson in self.mem.hot().critical_lessons}
        assert set(self.lessons) <= present

    @invariant()
    def limits_hold(self) -> None:
        if not hasattr(self, "mem"):
            return
        state = self.mem.hot()
        assert hotmod.size_bytes(state) <= SMALL.hot.max_bytes
        assert len(state.critical_lessons) <= SMALL.hot.max_lessons
        assert len(state.active_context.events) <= SMALL.hot.max_events
        assert len(state.active_context.tasks) <= SMALL.hot.max_pending_tasks
        assert self.mem.tree().check() == []


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


class TestLifecycle(Lifecycle.TestCase):  # type: ignore[misc,valid-type]
    settings = _settings(8)


@pytest.mark.fuzz
class TestLifecycleLong(Lifecycle.TestCase):  # type: ignore[misc,valid-type]
    settings = _settings(int(os.environ.get("TIERMEM_LIFECYCLE_EXAMPLES", "") or 100))
