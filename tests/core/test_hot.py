"""Hot memory: limits hold after every change, pruning order, MEMORY.md regenerated."""

from __future__ import annotations

import pytest

from tiermem.core import hot as hotmod
from tiermem.core.config import HotConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, LimitExceeded, NotFound


def test_lessons_keep_the_20_most_important(mem: Memory) -> None:
    for i in range(25):
        mem.add_lesson(f"lesson number {i}", importance=i / 100)
    lessons = mem.hot().critical_lessons
    assert len(lessons) == 20
    assert min(x.importance for x in lessons) == 0.05  # 0.00..0.04 were dropped


def test_events_keep_the_last_10(mem: Memory, clock) -> None:
    for i in range(13):
        clock.advance(0.01)
        mem.add_event(f"event {i}")
    events = [e.text for e in mem.hot().active_context.events]
    assert events == [f"event {i}" for i in range(3, 13)]


def test_pending_tasks_capped_at_10(mem: Memory, clock) -> None:
    for i in range(12):
        clock.advance(0.01)
        mem.add_task(f"task {i}")
    tasks = [t.text for t in mem.hot().active_context.tasks]
    assert tasks == [f"task {i}" for i in range(2, 12)]


def test_completed_task_becomes_event(mem: Memory) -> None:
    task, _ = mem.add_task("Deploy to BSC testnet")
    mem.complete_task(task.id)
    state = mem.hot()
    assert state.active_context.tasks == []
    assert state.active_context.events[-1].text == "Done: Deploy to BSC testnet"
    with pytest.raises(NotFound):
        mem.complete_task("no such task")


def test_adding_the_same_item_twice_changes_nothing(mem: Memory) -> None:
    mem.add_lesson("Always test on testnet first", 0.9, "blockchain")
    mem.add_lesson("always  test on testnet FIRST", 0.8, "blockchain")
    mem.add_event("Hackathon deadline Feb 15")
    mem.add_event("Hackathon deadline Feb 15")
    state = mem.hot()
    assert len(state.critical_lessons) == 1 and state.critical_lessons[0].importance == 0.9
    assert len(state.active_context.events) == 1


def test_projects_upsert_by_name(mem: Memory) -> None:
    mem.add_project("EvoClaw", "Self-evolving agent framework", "Active")
    mem.add_project("evoclaw", status="BSC integration for hackathon")
    projects = mem.hot().active_context.projects
    assert len(projects) == 1
    assert projects[0].description == "Self-evolving agent framework"
    assert projects[0].status == "BSC integration for hackathon"


def test_update_identity_merges_and_removes(mem: Memory) -> None:
    mem.update_hot("identity", {"agent_name": "Claw", "owner_name": "Bowen"})
    mem.update_hot("identity", {"owner_name": None, "trust_level": 0.95})
    assert mem.hot().identity == {"agent_name": "Claw", "trust_level": 0.95}
    with pytest.raises(InvalidInput):
        mem.update_hot("nonsense", {})


def test_size_limit_prunes_progressively(mem: Memory) -> None:
    for i in range(10):
        mem.add_event(f"event {i} " + "x" * 150)
    for i in range(20):
        mem.add_lesson(f"lesson {i} " + "y" * 150, importance=0.5 + i / 100)
    state = mem.hot()
    assert hotmod.size_bytes(state) <= 5120
    assert state.active_context.events == []  # events go first
    assert len(state.critical_lessons) > 0


def test_identity_too_large_is_refused_and_nothing_changes(mem: Memory) -> None:
    mem.add_lesson("keep me", 0.9)
    before = mem.hot()
    with pytest.raises(LimitExceeded):
        mem.update_hot("identity", {"bio": "z" * 6000})
    assert mem.hot() == before


def test_memory_md_regenerated_on_change(mem: Memory) -> None:
    path = mem.home.memory_md("default")
    mem.add_lesson("Never force-push main", 0.9, "git")
    assert "Never force-push main" in path.read_text()
    mem.add_project("EvoClaw", "agent framework", "active")
    assert "EvoClaw" in path.read_text()
    assert len(path.read_bytes()) <= 5120


def test_memory_md_per_agent(open_memory) -> None:
    other = open_memory("phone")
    other.add_event("phone event")
    assert other.home.memory_md("phone").name == "MEMORY-phone.md"
    assert "phone event" in other.home.memory_md("phone").read_text()


def test_importance_out_of_range(mem: Memory) -> None:
    with pytest.raises(InvalidInput):
        mem.add_lesson("bad", importance=1.5)
    with pytest.raises(InvalidInput):
        mem.add_event("   ")


def test_enforce_limits_is_pure_on_small_config() -> None:
    cfg = HotConfig(max_bytes=5120, max_lessons=2, max_events=1, max_pending_tasks=1)
    state = hotmod.HotState()
    for i in range(3):
        hotmod.HotStore.add_lesson(state, f"l{i}", 0.1 * (i + 1), "c", float(i))
        hotmod.HotStore.add_event(state, f"e{i}", float(i))
        hotmod.HotStore.add_task(state, f"t{i}", float(i))
    pruned = hotmod.enforce_limits(state, cfg)
    assert [x.text for x in state.critical_lessons] == ["l2", "l1"]
    assert [e.text for e in state.active_context.events] == ["e2"]
    assert [t.text for t in state.active_context.tasks] == ["t2"]
    assert len(pruned) == 5
