"""Critical state: canonical dumps, restore into another home, the outbox of changes."""

from __future__ import annotations

import pytest

from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput


def reasons(mem: Memory) -> list[str]:
    return [r[2] for r in snapshot.pending(mem.db, mem.agent_id)]


def test_every_critical_change_is_enqueued(mem: Memory, clock) -> None:
    assert reasons(mem) == []
    mem.add_lesson("lesson", 0.9)
    mem.tree_add("projects/x", "X")
    mem.store("fact in a known node", "projects/x", 0.2)  # no new node: nothing to push
    mem.store("fact in a new node", "owner/tea", 0.2)
    mem.store("important fact", "projects/x", 0.9)
    mem.consolidate("quick")  # promotes the important fact into hot lessons
    assert reasons(mem) == ["hot", "tree", "tree", "consolidation"]
    clock.advance(61)
    mem.tree_prune()  # nothing idle without warm memories: no change, no entry
    assert len(reasons(mem)) == 4


def test_acknowledge_keeps_later_rows(mem: Memory) -> None:
    mem.add_event("one")
    mem.add_event("two")
    rows = snapshot.pending(mem.db, mem.agent_id)
    snapshot.acknowledge(mem.db, mem.agent_id, rows[0][0])
    assert [r[0] for r in snapshot.pending(mem.db, mem.agent_id)] == [rows[1][0]]


def test_outbox_is_per_agent(open_memory) -> None:
    a, b = open_memory("a"), open_memory("b")
    a.add_event("only a")
    assert reasons(b) == [] and reasons(a) == ["hot"]


def test_dump_load_round_trip(open_memory, tmp_path, clock, driver) -> None:
    source = open_memory("phone")
    source.update_hot("identity", {"agent_name": "Claw"})
    source.add_lesson("Always test on testnet", 0.9, "blockchain")
    source.add_project("EvoClaw", "framework", "active")
    source.tree_add("projects/evoclaw/bsc", "BSC integration")
    state = snapshot.dump(source)
    with Memory(tmp_path / "other", "phone", clock=clock, driver=driver) as target:
        snapshot.load(target, state)
        snapshot.load(target, state)  # restoring twice is harmless
        assert snapshot.canonical(snapshot.dump(target)) == snapshot.canonical(state)
        assert "Always test on testnet" in target.home.memory_md("phone").read_text()
        assert snapshot.pending(target.db, "phone") == []


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"format": 9},
        {"format": 1, "hot": {}, "tree": [{"path": "x"}]},
        {"format": 1, "hot": {"identity": 5}, "tree": []},
    ],
)
def test_bad_state_is_refused_and_changes_nothing(mem: Memory, state) -> None:
    mem.add_lesson("keep", 0.9)
    before = snapshot.canonical(snapshot.dump(mem))
    with pytest.raises(InvalidInput):
        snapshot.load(mem, state)
    assert snapshot.canonical(snapshot.dump(mem)) == before


def test_tree_breaking_limits_is_refused(mem: Memory) -> None:
    state = snapshot.dump(mem)
    state["tree"] = [
        {"path": f"n{i}", "description": "", "created_at": 0.0, "last_activity": 0.0}
        for i in range(60)
    ]
    with pytest.raises(InvalidInput, match="limits"):
        snapshot.load(mem, state)
    assert mem.tree().nodes == {}
