"""Consolidation modes do exactly what the memory model lists for each."""

from __future__ import annotations

import pytest

from tiermem.core.config import Config, WarmConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.warm import NewFact


def tiers(mem: Memory) -> dict[str, str]:
    return {m.text: m.tier for chunk in mem.memories.iter_all() for m in chunk}


def test_quick_promotes_high_scores_into_hot_lessons(mem: Memory) -> None:
    mem.store("Never deploy on Fridays", "lessons/ops", 0.9)
    mem.store("Lunch was pasta", "daily", 0.2)
    report = mem.consolidate("quick")
    assert [m.text for m in report.promoted] == ["Never deploy on Fridays"]
    lessons = mem.hot().critical_lessons
    assert [x.text for x in lessons] == ["Never deploy on Fridays"]
    assert lessons[0].source_id == report.promoted[0].id
    assert mem.consolidate("quick").promoted == []  # not promoted twice
    assert "Never deploy on Fridays" in mem.home.memory_md("default").read_text()


def test_quick_archives_expired_facts_by_score(mem: Memory, clock) -> None:
    mem.store_many(
        [
            NewFact("medium fact", "c", 0.5),  # after 31 d: 0.5·e^-1.03 ≈ 0.18 → cold
            NewFact("tiny fact", "c", 0.1),  # after 31 d: ≈ 0.036 → frozen
            NewFact("important fact", "c", 1.0),  # after 31 d: ≈ 0.36 → stays warm
        ]
    )
    clock.advance(29)
    assert mem.consolidate("quick").evicted == []  # young facts stay, whatever their score
    clock.advance(2)
    report = mem.consolidate("quick")
    assert {m.text: m.to_tier for m in report.evicted} == {
        "medium fact": "cold",
        "tiny fact": "frozen",
    }
    assert tiers(mem) == {"medium fact": "cold", "tiny fact": "frozen", "important fact": "warm"}


def test_quick_evicts_lowest_scores_when_warm_is_over_size(open_memory) -> None:
    mem = open_memory(config=Config(warm=WarmConfig(max_bytes=200)))
    mem.store_many(
        [NewFact(f"fact number {i:02d} " + "x" * 30, "c", 0.35 + i / 100) for i in range(10)]
    )
    report = mem.consolidate("quick")
    assert mem.memories.warm_bytes() <= 200
    evicted = [m.text[:14] for m in report.evicted]
    assert evicted == [f"fact number {i:02d}" for i in range(len(evicted))]  # lowest first
    assert all(m.reason == "warm over size limit" for m in report.evicted)


def test_daily_prunes_the_tree(mem: Memory, clock) -> None:
    mem.tree_add("stale/topic", "")
    clock.advance(61)
    assert mem.consolidate("quick").tree_pruned == []
    assert mem.consolidate("daily").tree_pruned == ["stale", "stale/topic"]


def test_monthly_deletes_frozen_older_than_retention(mem: Memory, clock) -> None:
    mem.store("ancient trivia", "c", 0.06)
    mem.store("kept cold", "c", 0.9)
    clock.advance(40)
    mem.consolidate("quick")
    assert tiers(mem)["ancient trivia"] == "frozen"
    clock.advance(365.25 * 10)
    assert mem.consolidate("daily").deleted_frozen == 0
    report = mem.consolidate("monthly")
    assert report.deleted_frozen == 1
    assert tiers(mem) == {"kept cold": "frozen"} or "ancient trivia" not in tiers(mem)


def test_monthly_rebuilds_tree_for_warm_categories(mem: Memory) -> None:
    mem.store("fact", "projects/new", 0.5)
    mem.tree_remove  # noqa: B018 - the node exists; remove it behind the engine's back
    mem.db.execute("DELETE FROM tree_nodes WHERE agent_id = 'default'")
    report = mem.consolidate("monthly")
    assert report.tree_added == ["projects", "projects/new"]


def test_full_rescores_archive_and_reports(mem: Memory, clock) -> None:
    fact = mem.store("often recalled fact", "c", 0.6)
    clock.advance(40)
    mem.consolidate("quick")
    assert mem.get(fact.id).tier == "cold"
    for _ in range(20):  # reinforcement lifts the score back over the warm threshold
        mem.retrieve("often recalled", tier="cold")
    report = mem.consolidate("full")
    assert any(m.id == fact.id and m.to_tier == "warm" for m in report.moves)
    assert mem.get(fact.id).tier == "warm"
    assert report.after is not None and report.before.cold_count == 1
    assert report.after.cold_count == 0 and report.analysis


def test_consolidation_is_atomic(mem: Memory, clock, monkeypatch) -> None:
    mem.store("will expire", "c", 0.3)
    clock.advance(40)

    def boom(now: float) -> list[str]:
        raise RuntimeError("crash in the middle")

    monkeypatch.setattr(mem.trees, "prune", boom)
    with pytest.raises(RuntimeError):
        mem.consolidate("daily")
    assert tiers(mem) == {"will expire": "warm"}  # the archive step was rolled back


def test_unknown_mode(mem: Memory) -> None:
    with pytest.raises(InvalidInput, match="unknown consolidation mode"):
        mem.consolidate("weekly")
