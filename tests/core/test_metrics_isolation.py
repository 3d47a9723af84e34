"""Metrics per day, and isolation between agents sharing one home."""

from __future__ import annotations

from tiermem.core.engine import Memory


def test_daily_counters_and_gauges(mem: Memory, clock) -> None:
    mem.store("Hackathon deadline is Feb 15", "projects", 0.9)
    mem.store("Owner likes tea", "owner", 0.5)
    mem.retrieve("hackathon")
    mem.retrieve("nothing matches this")
    today = mem.snapshot_metrics()
    assert today.retrievals == 2 and today.stores == 2
    assert today.warm_count == 2 and today.warm_bytes > 0
    assert today.tree_nodes == 2 and today.tree_bytes > 0 and today.tree_tokens > 0
    assert today.hot_bytes > 0 and today.hot_tokens > 0
    assert today.flat_tokens == sum(m.tokens for c in mem.memories.iter_all() for m in c)
    first_hit_tokens = today.context_tokens
    assert today.tokens_saved == 2 * (today.flat_tokens - today.tree_tokens) - first_hit_tokens
    clock.advance(1)
    mem.store("a third fact", "owner", 0.5)
    mem.consolidate("quick")
    history = mem.metrics_history(7)
    assert [d.retrievals for d in history] == [2, 0]
    assert history[-1].stores == 1 and history[-1].promotions == 1


def test_evictions_are_counted(mem: Memory, clock) -> None:
    mem.store("fades away", "c", 0.2)
    clock.advance(31)
    mem.consolidate("quick")
    assert mem.snapshot_metrics().evictions == 1


def test_agents_never_see_each_other(open_memory, clock) -> None:
    desktop, phone = open_memory("desktop"), open_memory("phone")
    desktop.store("Desktop secret plan", "projects/secret", 0.9)
    desktop.add_lesson("desktop lesson")
    phone.store("Phone grocery list", "owner/shopping", 0.2)
    assert phone.retrieve("secret plan").hits == []
    assert desktop.retrieve("grocery").hits == []
    assert "projects" not in phone.tree().nodes
    assert phone.hot().critical_lessons == []
    clock.advance(40)
    report = phone.consolidate("full")
    assert [m.text for m in report.moves] == ["Phone grocery list"]
    assert desktop.memories.counts()["warm"] == 1
    assert desktop.metrics_history(2)[0].stores == 1  # day 0, before the clock moved
    assert phone.metrics_history(1)[-1].warm_count == 0


def test_same_text_in_two_agents_is_two_memories(open_memory) -> None:
    a, b = open_memory("a"), open_memory("b")
    assert a.store("shared fact", "c").created and b.store("shared fact", "c").created
    assert a.retrieve("shared").hits[0].memory.id != b.retrieve("shared").hits[0].memory.id
