"""Hot limits refuse, never destroy: what they push out moves to warm memory, pinned and
critical lessons stay, and an item that cannot fit is refused with nothing changed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.core import curate, hygiene
from tiermem.core import hot as hotmod
from tiermem.core.config import HotConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import LimitExceeded


def run_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TIERMEM_DRIVER"}
    return subprocess.run(
        [sys.executable, "-m", "tiermem.tui", "--home", str(home), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def found_anywhere(mem: Memory, text: str) -> bool:
    hits = mem.retrieve(text, tier="all", reinforce=False).hits
    return any(h.memory.text == text for h in hits)


def test_over_limit_lesson_is_refused_with_exit_5_and_nothing_changes(mem: Memory) -> None:
    mem.add_task("Ship the release notes")
    mem.add_lesson("Never deploy on Fridays", 0.6)
    before = mem.hot()
    markdown = mem.home.memory_md(mem.agent_id).read_text()
    proc = run_cli(mem.home.root, "hot", "--add-lesson", "x" * 6000)
    assert proc.returncode == 5, proc.stderr
    assert "lesson not added" in proc.stderr and "nothing changed" in proc.stderr
    assert "moved to warm" not in proc.stdout
    assert mem.hot() == before
    assert mem.home.memory_md(mem.agent_id).read_text() == markdown
    assert mem.memories.counts()["warm"] == 0


def test_cli_says_what_moved_to_warm_and_retrieve_finds_it(mem: Memory, clock) -> None:
    for i in range(10):
        clock.advance(0.01)
        mem.add_task(f"pending chore number {i}")
    clock.advance(0.01)
    proc = run_cli(mem.home.root, "hot", "--add-task", "one more chore")
    assert proc.returncode == 0, proc.stderr
    assert "moved to warm: task: pending chore number 0" in proc.stdout
    proc = run_cli(mem.home.root, "retrieve", "pending chore number 0", "--tier", "all")
    assert proc.returncode == 0, proc.stderr
    assert "pending chore number 0" in proc.stdout


def test_pinned_lesson_survives_20_more_lessons(mem: Memory) -> None:
    lesson, _ = mem.add_lesson("Keep the staging keys offline", 0.1)
    hygiene.pin(mem, lesson.id)
    moved: list[str] = []
    for i in range(20):
        moved += mem.add_lesson(f"ordinary lesson {i}", 0.5)[1]
    texts = [x.text for x in mem.hot().critical_lessons]
    assert "Keep the staging keys offline" in texts and len(texts) == 20
    assert len(moved) == 1 and moved[0].startswith("lesson: ordinary lesson")
    assert found_anywhere(mem, moved[0].removeprefix("lesson: "))


def test_pruned_items_are_found_by_retrieve_all_afterwards(mem: Memory, clock) -> None:
    pruned: list[str] = []
    for i in range(25):
        clock.advance(0.01)
        pruned += mem.add_lesson(f"lesson about topic {i}", importance=0.3 + i / 100)[1]
        pruned += mem.add_event(f"event about topic {i}")[1]
        pruned += mem.add_task(f"task about topic {i}")[1]
    mem.add_project("Apollo", "the moon project", "active")
    assert len(pruned) == 5 + 15 + 15
    for label in pruned:
        text = label.split(": ", 1)[1]
        assert found_anywhere(mem, text), label
    categories = {m.category for c in mem.memories.iter_all() for m in c}
    assert {"events", "tasks", "general"} <= categories


def test_size_pruning_moves_events_tasks_and_projects_to_warm(mem: Memory, clock) -> None:
    mem.add_project("Zephyr", "an old project " + "p" * 300, "paused")
    clock.advance(0.01)
    mem.add_event("a short event")
    mem.add_task("a short task")
    moved = mem.update_hot("identity", {"bio": "b" * 4550})
    assert moved == ["event: a short event", "task: a short task"]  # events, then tasks
    assert found_anywhere(mem, "a short event") and found_anywhere(mem, "a short task")
    assert mem.update_hot("identity", {"bio": "b" * 4900}) == ["project: Zephyr"]
    record = [m for c in mem.memories.iter_all() for m in c if "Zephyr" in m.text]
    assert record[0].category == "projects/zephyr"
    assert record[0].text.startswith("Project Zephyr (paused): an old project")


def test_lesson_promoted_from_a_memory_goes_back_to_it(mem: Memory) -> None:
    stored = mem.store("Rotate the signing key every quarter", "security", 0.5)
    assert curate.raise_tier(mem, stored.id) == "hot"
    warm_before = mem.memories.counts()["warm"]
    for i in range(20):
        mem.add_lesson(f"more important lesson {i}", 0.8)
    assert all(x.source_id != stored.id for x in mem.hot().critical_lessons)
    assert mem.memories.counts()["warm"] == warm_before  # no copy: the memory was still there
    assert mem.get(stored.id).tier == "warm"


def test_critical_lesson_is_never_moved_out(mem: Memory) -> None:
    mem.add_lesson("Never store secrets in the repo", 0.95)
    for i in range(20):
        mem.add_lesson(f"routine lesson {i}", 0.5 + i / 100)
    texts = [x.text for x in mem.hot().critical_lessons]
    assert "Never store secrets in the repo" in texts


@pytest.mark.parametrize("how", ["pinned", "critical"])
def test_all_pinned_or_critical_slots_refuse_a_new_lesson(mem: Memory, how: str) -> None:
    for i in range(20):
        lesson, _ = mem.add_lesson(f"guarded lesson {i}", 0.95 if how == "critical" else 0.4)
        if how == "pinned":
            hygiene.pin(mem, lesson.id)
    before = mem.hot()
    with pytest.raises(LimitExceeded, match="pinned or critical"):
        mem.add_lesson("one lesson too many", 0.99)
    assert mem.hot() == before
    assert not found_anywhere(mem, "one lesson too many")


def test_less_important_lesson_into_a_full_hot_memory_is_refused(mem: Memory) -> None:
    for i in range(20):
        mem.add_lesson(f"weighty lesson {i}", 0.8)
    before = mem.hot()
    with pytest.raises(LimitExceeded, match="more important lessons"):
        mem.add_lesson("a minor lesson", 0.1)
    assert mem.hot() == before and mem.memories.counts()["warm"] == 0


def test_empty_hot_memory_says_updated_never(mem: Memory) -> None:
    assert mem.memory_md().endswith("*Updated never*\n")
    assert "1970" not in mem.memory_md()
    mem.add_event("first event")
    assert "*Updated 2026-01-01 00:00 UTC*" in mem.memory_md()


def test_enforce_limits_refuses_to_move_a_protected_lesson() -> None:
    cfg = HotConfig(max_bytes=5120, max_lessons=1, max_events=1, max_pending_tasks=1)
    state = hotmod.HotState()
    keep = hotmod.HotStore.add_lesson(state, "keep", 0.2, "c", 1.0)
    newer = hotmod.HotStore.add_lesson(state, "newer", 0.5, "c", 2.0)
    with pytest.raises(LimitExceeded, match="pinned or critical"):
        hotmod.enforce_limits(state, cfg, protected={keep.id}, must_fit={newer.id})
