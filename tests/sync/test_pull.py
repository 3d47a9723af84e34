"""Incremental push of warm/cold rows and pull between devices, against the real sqld.

A second device joins the way a person does it: `restore` into a new home (it gets its own
device id and key), then both push and pull."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import init_engine, policy, seed_memory, tag_of
from tests.sync.sqld import SqldServer
from tiermem.core import curate
from tiermem.core.engine import Memory
from tiermem.core.warm import NewFact
from tiermem.sync import crypto, records
from tiermem.sync.engine import SyncEngine
from tiermem.sync.manifest import decode_manifest
from tiermem.sync.restore import restore
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import HranaClient


class Device:
    """One home with its engine."""

    def __init__(self, mem: Memory, engine: SyncEngine) -> None:
        self.mem, self.engine = mem, engine

    def close(self) -> None:
        self.engine.close()
        self.mem.close()


def join(home: Path, agent: str, url: str, token: str, key: bytes) -> Device:
    restore(home, agent, url, token, recovery_key=key, policy=policy())
    mem = Memory(home, agent)
    return Device(mem, SyncEngine(mem, timeout=10.0))


@pytest.fixture
def pair(tmp_path: Path, sqld: SqldServer, agent_id: str) -> Iterator[tuple[Device, Device]]:
    mem = Memory(tmp_path / "desktop", agent_id)
    seed_memory(mem)
    mem.store("the kettle on the desktop is blue", "home/kitchen", 0.6)
    engine, key = init_engine(mem, sqld.url, sqld.token)
    assert engine.push(policy()).pushed
    a = Device(mem, engine)
    b = join(tmp_path / "phone", agent_id, sqld.url, sqld.token, key)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def texts(mem: Memory) -> dict[str, tuple[str, str, int]]:
    rows = mem.db.query(
        "SELECT id, text, tier, access_count FROM memories WHERE agent_id = ?", (mem.agent_id,)
    )
    return {str(r[0]): (str(r[1]), str(r[2]), int(r[3])) for r in rows}


def search(mem: Memory, word: str) -> list[str]:
    rows = mem.db.query(
        "SELECT m.id FROM memories_fts f JOIN memories m ON m.seq = f.rowid "
        "WHERE memories_fts MATCH ? AND m.agent_id = ?",
        (word, mem.agent_id),
    )
    return [str(r[0]) for r in rows]


def test_a_fact_learned_on_one_device_is_recalled_on_the_other(
    pair: tuple[Device, Device],
) -> None:
    a, b = pair
    assert texts(b.mem) == texts(a.mem)  # the restore brought the archive
    stored = a.mem.store("the zanzibar gateway password rotates on fridays", "ops/net", 0.7)
    result = a.engine.push(policy())
    assert result.pushed and result.memories == 1 and result.requests == 1
    pulled = b.engine.pull(policy())
    assert pulled.memories == 1 and pulled.rejected == 0
    # Applying is not a local change: nothing goes back (no ping-pong).
    assert not b.engine.has_work()
    assert b.engine.push(policy()).note == "nothing to push"
    assert a.engine.pull(policy()).applied == 0
    assert search(b.mem, "zanzibar") == [stored.id]  # full-text search sees it
    assert [h.memory.id for h in b.mem.retrieve("zanzibar gateway").hits] == [stored.id]
    assert b.engine.has_work()  # recalling it counted a read: its counter syncs back


def test_deletions_tiers_and_access_counts_follow(pair: tuple[Device, Device]) -> None:
    a, b = pair
    ids = [a.mem.store(f"fact number {n} about walruses", "zoo", 0.5).id for n in range(5)]
    a.engine.push(policy())
    b.engine.pull(policy())
    with a.mem.db.transaction():
        a.mem.memories.move(ids[:2], "cold", a.mem.now())
        a.mem.memories.reinforce(ids[2:3], a.mem.now())
        a.mem.memories.delete(ids[3:4])
    pushed = a.engine.push(policy())
    assert pushed.memories == 4  # one record per changed row, a tombstone for the deleted one
    b.engine.pull(policy())
    assert texts(b.mem) == texts(a.mem)
    assert texts(b.mem)[ids[0]][1] == "cold" and ids[3] not in texts(b.mem)
    assert search(b.mem, "walruses") and ids[3] not in search(b.mem, "walruses")


def test_concurrent_changes_of_different_fields_both_stay_and_converge(
    pair: tuple[Device, Device],
) -> None:
    a, b = pair
    fid = a.mem.store("the meeting room is called narwhal", "office", 0.5).id
    a.engine.sync(policy())
    b.engine.sync(policy())
    with a.mem.db.transaction():
        a.mem.memories.move([fid], "cold", a.mem.now())
    a.engine.push(policy())
    # offline on the phone: an edit (not pushed yet) and a read
    curate.edit(b.mem, fid, text="the meeting room is called narwhal now")
    with b.mem.db.transaction():
        b.mem.memories.reinforce([fid], b.mem.now())
    b.engine.pull(policy())
    # the text edited here and the tier moved there: both kept
    assert texts(b.mem)[fid] == ("the meeting room is called narwhal now", "cold", 1)
    b.engine.push(policy())
    a.engine.pull(policy())
    assert texts(a.mem) == texts(b.mem)
    assert not a.engine.has_work() and not b.engine.has_work()


def test_a_read_elsewhere_does_not_undo_a_change_here(pair: tuple[Device, Device]) -> None:
    a, b = pair
    fid = a.mem.store("the meeting room is called narwhal", "office", 0.5).id
    a.engine.sync(policy())
    b.engine.sync(policy())
    with a.mem.db.transaction():
        a.mem.memories.move([fid], "cold", a.mem.now())
    a.engine.push(policy())
    with b.mem.db.transaction():  # offline on the phone: a read, not a change
        b.mem.memories.reinforce([fid], b.mem.now())
    b.engine.sync(policy())
    a.engine.pull(policy())
    assert (
        texts(a.mem)[fid] == texts(b.mem)[fid] == ("the meeting room is called narwhal", "cold", 1)
    )
    assert not a.engine.has_work() and not b.engine.has_work()


def test_a_hot_edit_reaches_the_other_device(pair: tuple[Device, Device]) -> None:
    a, b = pair
    a.mem.add_lesson("Never deploy the okapi service on a friday", 0.9, "ops")
    a.engine.push(policy())
    pulled = b.engine.pull(policy())
    assert pulled.critical == 1
    lessons = [x.text for x in b.mem.hot().critical_lessons]
    assert "Never deploy the okapi service on a friday" in lessons
    assert "okapi" in b.mem.home.memory_md(b.mem.agent_id).read_text()


def test_big_pushes_are_split_under_the_cap_with_gapless_manifests(
    tmp_path: Path, sqld: SqldServer, agent_id: str, client: HranaClient
) -> None:
    with Memory(tmp_path / "home", agent_id) as mem:
        for n in range(60):
            mem.store(f"archived note {n} " + "lorem ipsum " * 30, "archive", 0.4)
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        engine.batch_bytes = 8 * 1024
        result = engine.push(policy())
        assert result.memories == 60 and result.requests >= 5
        assert not engine.has_work()
        s = engine.require_ready()
        id_key = engine.id_key(s)
        key = engine.epoch_key(s.epoch, s)
        rid = records.record_id(id_key, records.MANIFEST_TABLE, s.device_id.hex())
        rows = client.execute(
            "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
            "WHERE record_id = ? ORDER BY seq",
            (rid,),
        ).rows
        manifests = [
            decode_manifest(
                records.open_row(key, agent_id, records.MANIFEST_TABLE, records.remote_row(r))
            )
            for r in rows
        ]
        assert [m.n for m in manifests] == list(range(1, result.requests + 1))
        listed = [e for m in manifests for e in m.records if e.table == records.MEMORY_TABLE]
        assert len(listed) == 60 == len({e.record_id for e in listed})
        every = client.execute(
            "SELECT hex(record_id), version, length(envelope) FROM records WHERE agent_tag = ?",
            (s.tag,),
        ).rows
        size = {(str(h).lower(), str(v)): int(str(n)) for h, v, n in every}
        for m in manifests:  # each request stays under the cap (or is one bigger record)
            sealed = sum(size[(e.record_id, e.version)] for e in m.records)
            assert sealed <= engine.batch_bytes or len(m.records) == 1
        engine.close()


def test_a_lost_answer_after_commit_is_resent_and_changes_nothing(
    pair: tuple[Device, Device], fault_proxy: FaultProxy, client: HranaClient, sqld: SqldServer
) -> None:
    a, _ = pair
    a.engine.close()
    engine = SyncEngine(a.mem, timeout=10.0)
    with a.mem.db.transaction():
        a.mem.db.execute("UPDATE sync_state SET url = ?", (fault_proxy.url,))
    for n in range(3):
        a.mem.store(f"pangolin fact {n}", "zoo", 0.5)
    before = count(client, a.mem)
    fault_proxy.script(faultproxy.DROP_AFTER_COMMIT)
    with pytest.raises(Exception) as info:
        engine.push(policy(max_attempts=1))
    assert info.value.__class__.__name__ == "TransportFailure"
    landed = count(client, a.mem)
    assert landed > before and engine.has_work()
    result = engine.push(policy())
    assert result.resent and count(client, a.mem) == landed
    assert not engine.has_work()
    engine.close()


def count(client: HranaClient, mem: Memory) -> int:
    (row,) = client.execute("SELECT count(*) FROM records WHERE agent_tag = ?", (tag_of(mem),)).rows
    assert isinstance(row[0], int)
    return row[0]


def test_a_forged_record_is_rejected_and_fetched_again_until_it_goes(
    pair: tuple[Device, Device], client: HranaClient
) -> None:
    a, b = pair
    s = a.engine.require_ready()
    rid = records.record_id(a.engine.id_key(s), records.MEMORY_TABLE, "0123456789abcdef")
    forged = crypto.seal_record(
        crypto.generate_vault_key(),
        s.epoch,
        records.context(a.mem.agent_id, records.MEMORY_TABLE, rid, "x", s.device_id),
        b"{}",
    )
    version = "000001000000000000.000000." + "ab" * 16
    client.execute(
        store.APPEND_RECORD,
        (s.tag, rid, version, s.epoch, s.device_id, forged),
    )
    before = texts(b.mem)
    pulled = b.engine.pull(policy())
    assert pulled.rejected == 1 and pulled.applied == 0 and texts(b.mem) == before
    assert b.engine.history(1)[0].kind == "error"
    again = b.engine.pull(policy())  # the cursor moved past it, the retry list did not
    assert again.rejected == 1 and texts(b.mem) == before
    client.execute("DELETE FROM records WHERE record_id = ? AND version = ?", (rid, version))
    gone = b.engine.pull(policy())
    assert gone.rejected == 0 and gone.gone == 1


def test_history_and_status(pair: tuple[Device, Device]) -> None:
    a, b = pair
    a.mem.store("the okra plant needs water on tuesdays", "garden", 0.5)
    assert a.engine.status().pending_memories == 1
    a.engine.push(policy())
    assert a.engine.status().pending_memories == 0
    b.engine.pull(policy())
    kinds = [e.kind for e in a.engine.history()]
    assert kinds[0] == "push"
    event = b.engine.history(1)[0]
    assert event.kind == "pull" and event.records >= 1  # the fact (and the grown tree)
    status = b.engine.status()
    assert status.last_pull_at is not None and status.pulls >= 1 and status.pull_cursor > 0


def test_an_interrupted_pull_keeps_its_pages_and_resumes(
    pair: tuple[Device, Device], fault_proxy: FaultProxy
) -> None:
    a, b = pair
    ids = {a.mem.store(f"lemur census entry {n}", "zoo", 0.5).id for n in range(30)}
    a.engine.push(policy())
    with b.mem.db.transaction():
        b.mem.db.execute("UPDATE sync_state SET url = ?", (fault_proxy.url,))
    b.engine.close()
    b.engine = SyncEngine(b.mem, timeout=10.0)
    fault_proxy.script(faultproxy.PASS, faultproxy.PASS, faultproxy.status(503))
    with pytest.raises(Exception) as info:
        b.engine.pull(policy(max_attempts=1), page_size=10)
    assert info.value.__class__.__name__ == "ServerUnavailable"
    kept = ids & set(texts(b.mem))
    assert 0 < len(kept) < 30 and b.engine.status().pull_cursor > 0  # two pages applied
    b.engine.pull(policy(), page_size=10)
    assert ids <= set(texts(b.mem)) and texts(b.mem) == texts(a.mem)


def test_the_prune_horizon_record_is_not_taken_for_damage(
    pair: tuple[Device, Device], client: HranaClient
) -> None:
    a, b = pair
    s = a.engine.require_ready()
    rid = records.record_id(a.engine.id_key(s), records.PRUNE_TABLE, records.PRUNE_KEY)
    version = "000001000000000000.000000." + s.device_id.hex()
    envelope = records.seal(
        a.engine.epoch_key(s.epoch, s),
        s.epoch,
        a.mem.agent_id,
        records.PRUNE_TABLE,
        rid,
        version,
        s.device_id,
        records.canonical({"format": 1, "horizon": version}),
    )
    client.execute(store.APPEND_RECORD, (s.tag, rid, version, s.epoch, s.device_id, envelope))
    pulled = b.engine.pull(policy())
    assert pulled.rejected == 0 and pulled.applied == 0


@pytest.mark.slow
def test_a_big_push_streams_instead_of_loading_the_archive(
    tmp_path: Path, sqld: SqldServer, agent_id: str
) -> None:
    """Peak Python memory during a push follows the batch cap, not the archive size."""
    with Memory(tmp_path / "home", agent_id) as mem:
        mem.store_many(
            NewFact(text=f"tide table entry {n} for the northern fjord", category="archive")
            for n in range(5000)
        )
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        engine.batch_bytes = 32 * 1024
        tracemalloc.start()
        try:
            result = engine.push(policy())
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        engine.close()
    assert result.memories == 5000 and result.requests >= 60
    assert peak < result.bytes / 2, (peak, result.bytes)
