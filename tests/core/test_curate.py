"""Curation by hand: pin, promote, demote, edit, forget and undo, paged listing, history."""

from __future__ import annotations

import itertools

import pytest

from tests.conftest import Clock
from tiermem.core import curate
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.warm import NewFact


def test_pinned_memory_survives_expiry_and_size_eviction(mem: Memory, clock: Clock) -> None:
    kept = mem.store("the server root password lives in the vault", "ops", 0.1).id
    gone = mem.store("lunch was pasta", "casual", 0.1).id
    curate.set_pinned(mem, kept, True)
    clock.advance(60)
    report = mem.consolidate("quick")
    assert {m.id for m in report.evicted} == {gone}
    assert mem.get(kept).tier == "warm"
    curate.set_pinned(mem, kept, False)
    assert {m.id for m in mem.consolidate("quick").evicted} == {kept}


def test_pinning_an_archived_memory_brings_it_back_to_warm(mem: Memory) -> None:
    fid = mem.store("an old fact", "misc", 0.5).id
    curate.lower_tier(mem, fid)
    assert mem.get(fid).tier == "cold"
    assert curate.set_pinned(mem, fid, True) == "warm"
    assert curate.get_listed(mem, fid).pinned


def test_promote_and_demote_walk_the_tiers(mem: Memory) -> None:
    fid = mem.store("deploys happen on tuesdays", "ops", 0.4).id
    assert curate.lower_tier(mem, fid) == "cold"
    assert curate.lower_tier(mem, fid) == "frozen"
    with pytest.raises(InvalidInput, match="already frozen"):
        curate.lower_tier(mem, fid)
    assert curate.raise_tier(mem, fid) == "warm"
    assert curate.raise_tier(mem, fid) == "hot"
    lessons = mem.hot().critical_lessons
    assert [(x.text, x.source_id) for x in lessons] == [("deploys happen on tuesdays", fid)]
    assert lessons[0].importance == pytest.approx(mem.cfg.scoring.hot_threshold)
    with pytest.raises(InvalidInput, match="already a lesson"):
        curate.raise_tier(mem, fid)
    assert curate.lower_tier(mem, fid) == "warm"
    assert mem.hot().critical_lessons == []
    assert mem.get(fid).tier == "warm"


def test_edit_changes_text_category_importance_and_keeps_the_id(mem: Memory) -> None:
    fid = mem.store("meeting with Sarah on friday", "work", 0.5).id
    other = mem.store("meeting with Luna on monday", "work", 0.5).id
    mem.retrieve("sarah")
    edited = curate.edit(
        mem, fid, text="meeting with Sarah on thursday", category="work/meetings", importance=0.9
    )
    assert edited.id == fid and edited.category == "work/meetings" and edited.importance == 0.9
    assert "work/meetings" in mem.tree().nodes
    assert len(curate.access_history(mem, edited.id)) == 1
    assert [h.memory.id for h in mem.retrieve("thursday", reinforce=False).hits] == [edited.id]
    assert mem.retrieve("friday", reinforce=False).hits == []
    with pytest.raises(InvalidInput, match="already stored"):
        curate.edit(mem, other, text="Meeting with sarah on Thursday")
    with pytest.raises(InvalidInput, match="importance"):
        curate.edit(mem, other, importance=1.5)


def test_forget_leaves_retrieval_and_undo_restores_it_whole(mem: Memory, clock: Clock) -> None:
    fid = mem.store("the wifi password is hunter2", "home", 0.8, urls=["http://router"]).id
    mem.retrieve("wifi password")
    clock.advance(1)
    mem.retrieve("wifi")
    curate.set_pinned(mem, fid, True)
    before = curate.get_listed(mem, fid)
    history = curate.access_history(mem, fid)
    assert len(history) == 2 and history[0] > history[1]

    assert curate.move_to_forgotten(mem, fid).id == fid
    with pytest.raises(NotFound):
        mem.get(fid)
    assert mem.retrieve("wifi", reinforce=False).hits == []
    assert curate.forgotten_count(mem) == 1
    last = curate.last_forgotten(mem)
    assert last is not None and last.id == fid

    restored = curate.undo_forget(mem)
    assert restored == before.record
    assert curate.get_listed(mem, fid) == before
    assert curate.access_history(mem, fid) == history
    assert [h.memory.id for h in mem.retrieve("wifi", reinforce=False).hits] == [fid]
    with pytest.raises(NotFound, match="nothing to undo"):
        curate.undo_forget(mem)


def test_undo_refuses_a_fact_stored_again_and_reuses_no_taken_row(mem: Memory) -> None:
    first = mem.store("fact one", "a").id
    curate.move_to_forgotten(mem, first)
    mem.store("fact one", "a")
    with pytest.raises(InvalidInput, match="stored again"):
        curate.undo_forget(mem)
    mem.db.execute("DELETE FROM forgotten WHERE agent_id = ?", (mem.agent_id,))
    second = mem.store("fact two", "a").id
    curate.move_to_forgotten(mem, second)  # the newest row: its row id is free again
    third = mem.store("fact three", "a").id  # takes that row id
    curate.move_to_forgotten(mem, first)
    assert curate.undo_forget(mem).id == first  # the most recent forget comes back first
    assert curate.undo_forget(mem).id == second
    assert {x.record.id for x in curate.list_memories(mem)} == {first, second, third}
    assert len({x.seq for x in curate.list_memories(mem)}) == 3


def test_listing_pages_newest_first_with_filters(mem: Memory) -> None:
    ids = [
        o.id
        for o in mem.store_many(NewFact(f"fact {i}", "a/b" if i % 2 else "c") for i in range(7))
    ]
    curate.lower_tier(mem, ids[0])
    page1 = curate.list_memories(mem, limit=3)
    page2 = curate.list_memories(mem, limit=3, before_seq=page1[-1].seq)
    page3 = curate.list_memories(mem, limit=3, before_seq=page2[-1].seq)
    assert [x.record.id for x in page1 + page2 + page3] == ids[::-1]
    assert [x.record.id for x in curate.list_memories(mem, category="a")] == ids[1::2][::-1]
    assert [x.record.id for x in curate.list_memories(mem, tier="cold")] == [ids[0]]
    assert curate.count_memories(mem) == 7
    assert curate.count_memories(mem, tier="warm", category="c") == 3
    with pytest.raises(InvalidInput, match="unknown tier"):
        curate.list_memories(mem, tier="lukewarm")


def test_listing_and_agents_stay_per_agent(open_memory) -> None:
    a = open_memory("alice")
    b = open_memory("bob")
    a.store("alice fact", "x")
    b.store("bob fact", "x")
    assert [x.record.text for x in curate.list_memories(a)] == ["alice fact"]
    assert curate.count_memories(b) == 1
    assert {"alice", "bob"} <= set(curate.list_agents(a.db))


def test_score_parts_multiply_and_the_curve_decays(mem: Memory, clock: Clock) -> None:
    fid = mem.store("a decaying fact", "x", 0.8).id
    mem.retrieve("decaying")
    clock.advance(10)
    record = mem.get(fid)
    parts = curate.score_parts(record, clock(), mem.cfg.scoring)
    assert parts.score == pytest.approx(parts.importance * parts.decay * parts.reinforcement)
    assert parts.age_days == pytest.approx(10) and parts.access_count == 1
    assert parts.score == pytest.approx(record.score(clock(), mem.cfg.scoring))
    curve = curate.decay_curve(record, clock(), mem.cfg.scoring, days=60, points=7)
    assert curve[0] == pytest.approx(parts.score)
    assert all(x > y for x, y in itertools.pairwise(curve))
