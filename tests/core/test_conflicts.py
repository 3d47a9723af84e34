"""Per-field clocks of the critical state (core.clocks) and the local conflicts table
(core.conflicts): stamping at the time of the change, tombstones, record/list/resolve."""

from __future__ import annotations

import pytest

from tiermem.core import clocks, snapshot
from tiermem.core.conflicts import (
    conflict_id,
    get_conflict,
    list_conflicts,
    record_conflict,
    resolve_conflict,
)
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.hot import item_id

DEVICE = "ab" * 16


def stamps(mem: Memory) -> dict[tuple[str, str], tuple[str, str]]:
    table, _ = clocks.read(mem.db, mem.agent_id)
    return {(item, f): v for item, fields in table.items() for f, v in fields.items()}


def wall(stamp: str) -> float:
    return int(stamp.partition(".")[0]) / 1000


def test_a_change_is_stamped_with_the_time_it_happened(mem: Memory, clock) -> None:
    mem.update_hot("identity", {"name": "Claw", "tz": "UTC"})
    t_identity = clock.now
    clock.advance(1)
    lesson, _ = mem.add_lesson("test on testnet", 0.9)
    t_lesson = clock.now
    clock.advance(1)
    mem.tree_add("projects/evo", "Evo")
    t_tree = clock.now
    clock.advance(1)
    mem.update_hot("identity", {"tz": "CET"})
    s = stamps(mem)
    assert wall(s["identity", "name"][0]) == t_identity
    assert wall(s["identity", "tz"][0]) == clock.now  # changed again: restamped
    assert wall(s[f"lesson/{lesson.id}", "text"][0]) == t_lesson
    assert wall(s[f"lesson/{lesson.id}", clocks.ALIVE][0]) == t_lesson
    assert wall(s["tree/projects/evo", "description"][0]) == t_tree
    assert wall(s["tree/projects", clocks.ALIVE][0]) == t_tree
    assert {v[1] for v in s.values()} == {clocks.LOCAL}


def test_deletions_leave_tombstones(mem: Memory, clock) -> None:
    mem.update_hot("owner_profile", {"tea": "oolong"})
    task, _ = mem.add_task("renew certificate")
    mem.tree_add("a/b", "B")
    clock.advance(1)
    mem.update_hot("owner_profile", {"tea": None})
    mem.remove_hot_item(task.id)
    mem.tree_remove("a")
    s = stamps(mem)
    rows = dict(
        ((i, f), d)
        for i, f, d in mem.db.query(
            "SELECT item, field, digest FROM crit_clocks WHERE agent_id = ?", (mem.agent_id,)
        )
    )
    assert rows["owner_profile", "tea"] == clocks.DEAD
    assert rows[f"task/{task.id}", clocks.ALIVE] == clocks.DEAD
    assert (f"task/{task.id}", "text") not in rows  # a dead item keeps only its tombstone
    assert rows["tree/a", clocks.ALIVE] == rows["tree/a/b", clocks.ALIVE] == clocks.DEAD
    assert wall(s["owner_profile", "tea"][0]) == clock.now


def test_old_tombstones_are_forgotten(mem: Memory, clock) -> None:
    task, _ = mem.add_task("a task done long ago")
    mem.update_hot("identity", {"old": "x"})
    mem.remove_hot_item(task.id)
    mem.update_hot("identity", {"old": None})
    clock.advance(clocks.TOMBSTONE_DAYS - 1)
    mem.add_event("still remembered")
    assert (f"task/{task.id}", clocks.ALIVE) in stamps(mem)
    clock.advance(2)
    mem.add_event("much later")
    s = stamps(mem)
    assert (f"task/{task.id}", clocks.ALIVE) not in s and ("identity", "old") not in s
    assert ("event/" + item_id("event", "much later"), clocks.ALIVE) in s


def test_stamps_increase_even_when_the_clock_goes_back(mem: Memory, clock) -> None:
    mem.add_event("one")
    first = max(v[0] for v in stamps(mem).values())
    clock.now -= 3600
    mem.add_event("two")
    second = max(v[0] for v in stamps(mem).values())
    assert second > first and wall(second) == wall(first)  # the counter moved on


def test_nothing_changed_means_no_new_stamp(mem: Memory) -> None:
    mem.add_lesson("keep", 0.9)
    before = stamps(mem)
    assert clocks.stamp(mem.db, mem.agent_id, mem.now() + 100) is None
    mem.store("fact in a new node", "topics/x", 0.2)
    mem.retrieve("fact")  # touches tree activity: not a clocked field
    after = stamps(mem)
    assert {k: v for k, v in after.items() if k in before} == before


def test_next_stamp_is_an_hlc_tick() -> None:
    assert clocks.next_stamp(None, 5) == clocks.stamp_text(5, 0)
    assert clocks.next_stamp(clocks.stamp_text(9, 3), 5) == clocks.stamp_text(9, 4)
    assert clocks.next_stamp(clocks.stamp_text(9, 999_999), 5) == clocks.stamp_text(10, 0)
    assert clocks.next_stamp(clocks.stamp_text(9, 3), 12) == clocks.stamp_text(12, 0)


def test_document_round_trips_through_load(open_memory, tmp_path, clock, driver) -> None:
    source = open_memory("claw")
    source.update_hot("identity", {"name": "Claw"})
    source.add_lesson("always test", 0.9)
    source.tree_add("projects/evo", "Evo")
    record_conflict(
        source.db, "claw", "identity", "name", "Claw", "Old", "v2", "v1", DEVICE, clock.now
    )
    with source.db.transaction():
        clocks.stamp(source.db, "claw", source.now())
    doc = snapshot.document(source, DEVICE)
    hot, nodes = snapshot.parse(doc)
    table = snapshot.clock_table(doc, hot, nodes)
    assert all(v.endswith(DEVICE) for fields in table.values() for v in fields.values())
    assert isinstance(doc["clocks"]["tree/projects/evo"], str)  # written once: one version
    with Memory(tmp_path / "other", "claw", clock=clock, driver=driver) as target:
        snapshot.load(target, doc)
        assert snapshot.document(target, "cd" * 16) == doc  # other device: same versions
        assert [c.lost_value for c in list_conflicts(target.db, "claw")] == ["Old"]


def test_a_document_with_a_bad_clock_is_refused(mem: Memory) -> None:
    doc = snapshot.document(mem, DEVICE)
    doc["clocks"] = {"identity": {"name": "yesterday"}}
    with pytest.raises(InvalidInput):
        snapshot.load(mem, doc)


# -- the conflicts table ---------------------------------------------------------------------


def record(mem: Memory, item: str, field: str, kept: object, lost: object, n: int = 1) -> str:
    return record_conflict(
        mem.db,
        mem.agent_id,
        item,
        field,
        kept,
        lost,
        f"k{n}",
        f"l{n}",
        DEVICE,
        mem.now(),
        reason="changed on two devices",
    )


def test_record_is_idempotent_and_listed_newest_first(mem: Memory, clock) -> None:
    first = record(mem, "identity", "name", "D", "P", 1)
    assert record(mem, "identity", "name", "D", "P", 1) == first
    clock.advance(1)
    second = record(mem, "owner_profile", "tea", None, "oolong", 2)
    assert [c.id for c in list_conflicts(mem.db, mem.agent_id)] == [second, first]
    assert first == conflict_id("identity", "name", "k1", "l1")
    c = get_conflict(mem.db, mem.agent_id, second[:6])
    assert (c.kept_value, c.lost_value, c.lost_device) == (None, "oolong", DEVICE)
    assert "(deleted)" in c.describe() and not c.resolved


def test_conflicts_are_per_agent(open_memory) -> None:
    a, b = open_memory("a"), open_memory("b")
    record(a, "identity", "name", "x", "y")
    assert list_conflicts(b.db, "b") == [] and len(list_conflicts(a.db, "a")) == 1


def test_taking_the_kept_value_closes_and_queues_a_push(mem: Memory) -> None:
    mem.update_hot("identity", {"name": "D"})
    cid = record(mem, "identity", "name", "D", "P")
    rows = len(snapshot.pending(mem.db, mem.agent_id))
    closed = resolve_conflict(mem.db, mem.agent_id, cid, "kept")
    assert closed.resolved and closed.resolution == "kept"
    assert mem.hot().identity == {"name": "D"}
    assert list_conflicts(mem.db, mem.agent_id) == []
    assert [c.id for c in list_conflicts(mem.db, mem.agent_id, include_resolved=True)] == [cid]
    assert len(snapshot.pending(mem.db, mem.agent_id)) == rows + 1
    with pytest.raises(InvalidInput, match="already resolved"):
        resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)


def test_taking_the_lost_value_applies_it_as_a_new_change(mem: Memory, clock) -> None:
    mem.update_hot("identity", {"name": "D"})
    before = stamps(mem)["identity", "name"][0]
    cid = record(mem, "identity", "name", "D", "P")
    clock.advance(1)
    resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)
    assert mem.hot().identity == {"name": "P"}
    assert stamps(mem)["identity", "name"][0] > before
    assert "P" in mem.home.memory_md(mem.agent_id).read_text()


def test_taking_a_lost_item_brings_it_back_and_a_lost_delete_removes(mem: Memory) -> None:
    lesson_id = item_id("lesson", "always test")
    lost = {
        "text": "always test",
        "category": "qa",
        "importance": 0.8,
        "timestamp": 1.0,
        "source_id": "",
    }
    cid = record(mem, f"lesson/{lesson_id}", clocks.ALIVE, None, lost)
    resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)
    [lesson] = mem.hot().critical_lessons
    assert (lesson.id, lesson.category, lesson.importance) == (lesson_id, "qa", 0.8)
    cid = record(mem, f"lesson/{lesson_id}", clocks.ALIVE, lost, None, 2)
    resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)
    assert mem.hot().critical_lessons == []


def test_taking_lost_tree_values(mem: Memory) -> None:
    mem.tree_add("projects/evo", "Evo")
    cid = record(mem, "tree/projects/evo", "description", "Evo", "EvoClaw framework")
    resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)
    assert mem.tree().nodes["projects/evo"].description == "EvoClaw framework"
    cid = record(mem, "tree/projects/evo", clocks.ALIVE, {"description": "x"}, None, 2)
    resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)
    assert "projects/evo" not in mem.tree().nodes
    cid = record(mem, "tree/topics/new", clocks.ALIVE, None, {"description": "New"}, 3)
    resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)
    assert mem.tree().nodes["topics/new"].description == "New"


def test_a_field_of_a_vanished_item_cannot_be_taken(mem: Memory) -> None:
    cid = record(mem, "task/0123456789ab", "status", "done", "doing")
    with pytest.raises(InvalidInput, match="no longer exists"):
        resolve_conflict(mem.db, mem.agent_id, cid, "lost", mem=mem)
    assert not get_conflict(mem.db, mem.agent_id, cid).resolved


@pytest.mark.parametrize(
    ("ident", "take", "error"),
    [
        ("ffffffff", "kept", NotFound),
        ("ab", "kept", InvalidInput),
        ("{cid}", "both", InvalidInput),
        ("{cid}", "lost", InvalidInput),  # without mem=
    ],
)
def test_bad_resolutions_are_refused(mem: Memory, ident: str, take: str, error: type) -> None:
    cid = record(mem, "identity", "name", "D", "P")
    with pytest.raises(error):
        resolve_conflict(mem.db, mem.agent_id, ident.format(cid=cid), take)
    assert not get_conflict(mem.db, mem.agent_id, cid).resolved
