"""Reads on two devices against the real sqld: a forget on one device is never undone by a
read on the other, in any order of pushes and pulls, and reads are summed on both, never
written over an edit."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync.helpers import desktop_and_phone, policy
from tests.sync.sqld import SqldServer
from tiermem.core import curate, reinforce
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.tui.cli import run

WORDS = [f"quokka{a}{b}" for a, b in itertools.product("abcdefghijklmnopqrstuvwxyz", "xyz")]


class Device:
    def __init__(self, mem: Memory, engine: SyncEngine, key: bytes = b"") -> None:
        self.mem, self.engine, self.key = mem, engine, key

    def run(self, step: str) -> None:
        if step == "push":
            self.engine.push(policy())
        else:
            self.engine.pull(policy())

    def counted(self, memory_id: str) -> int:
        return reinforce.counted(self.mem.db, self.mem.agent_id, memory_id)


@pytest.fixture
def pair(tmp_path: Path, sqld: SqldServer, agent_id: str) -> Iterator[tuple[Device, Device]]:
    with desktop_and_phone(tmp_path, sqld.url, sqld.token, agent_id) as (a, b, key):
        yield Device(*a, key), Device(*b, key)


def test_forget_wins_over_a_concurrent_read(
    pair: tuple[Device, Device], tmp_path: Path, sqld: SqldServer
) -> None:
    a, b = pair
    devices = {"a": a, "b": b}
    steps = [(d, s) for d in "ab" for s in ("push", "pull")]
    orders = list(itertools.permutations(steps))
    ids = [
        a.mem.store(f"the locker code for {w} is {1000 + n}", "home", 0.5).id
        for n, w in enumerate(WORDS[:24])
    ]
    assert len(set(ids)) == 24
    for dev in (a, b, a):
        dev.engine.sync(policy())
    for fid, word, order in zip(ids, WORDS[:24], orders, strict=True):
        curate.move_to_forgotten(a.mem, fid)
        assert [h.memory.id for h in b.mem.retrieve(word).hits] == [fid]
        for device, step in order * 2:
            devices[device].run(step)
        for dev in (a, b):
            with pytest.raises(NotFound):
                dev.mem.get(fid)
            assert dev.mem.retrieve(word, reinforce=False).hits == []
            assert dev.counted(fid) == 1, order  # the read is counted on both devices
    assert not a.engine.has_work() and not b.engine.has_work()
    tablet = tmp_path / "tablet"  # a device restored later: forgotten there too
    restore(tablet, a.mem.agent_id, sqld.url, sqld.token, recovery_key=a.key, policy=policy())
    with Memory(tablet, a.mem.agent_id) as mem:
        assert mem.memories.get_many(ids) == []
        assert all(reinforce.counted(mem.db, mem.agent_id, fid) == 1 for fid in ids)
    assert curate.undo_forget(a.mem, ids[0]).access_count == 1  # an undo keeps the read


def test_reads_on_two_devices_are_summed_and_never_undo_an_edit(
    pair: tuple[Device, Device], tmp_path: Path, sqld: SqldServer
) -> None:
    a, b = pair
    fid = a.mem.store("the team offsite is in lisbon", "work/events", 0.5).id
    a.engine.sync(policy())
    b.engine.sync(policy())
    a.mem.retrieve("offsite lisbon")
    a.mem.retrieve("team offsite")
    curate.edit(a.mem, fid, text="the team offsite is in porto")
    b.mem.retrieve("offsite lisbon")
    for dev in (b, a, b):
        dev.engine.sync(policy())
    for dev in (a, b):
        record = dev.mem.get(fid)
        assert record.text == "the team offsite is in porto"
        assert record.access_count == 3 and dev.counted(fid) == 3
    assert not a.engine.has_work() and not b.engine.has_work()
    tablet = tmp_path / "tablet"  # a device restored later gets the reads too
    restore(tablet, a.mem.agent_id, sqld.url, sqld.token, recovery_key=a.key, policy=policy())
    with Memory(tablet, a.mem.agent_id) as mem:
        assert mem.get(fid).access_count == 3 and mem.get(fid).text.endswith("porto")


def test_a_read_is_not_pushed_as_a_new_version(pair: tuple[Device, Device]) -> None:
    a, b = pair
    fid = a.mem.store("the garage door opener is in the car", "home", 0.5).id
    a.engine.sync(policy())
    b.engine.sync(policy())
    version = b.mem.db.scalar("SELECT version FROM sync_versions WHERE id = ?", (fid,))
    b.mem.retrieve("garage door opener")
    assert b.engine.push(policy()).memories == 1  # its counters travel
    assert b.mem.db.scalar("SELECT version FROM sync_versions WHERE id = ?", (fid,)) == version
    assert b.engine.push(policy()).note == "nothing to push"  # and only once


def test_a_read_that_counts_tokens_creates_no_version(pair: tuple[Device, Device]) -> None:
    """`tiermem store` leaves a memory's token count to the first read that needs it. That read
    storing the count on another device is not a change to upload: it must not outrank the
    owner's concurrent forget."""
    a, b = pair
    fid = a.mem.store("the bike lock code is 4711", "home", 0.5, count_tokens=False).id
    for dev in (a, b, a):
        dev.engine.sync(policy())
    curate.move_to_forgotten(a.mem, fid)
    assert [h.memory.id for h in b.mem.retrieve("bike lock").hits] == [fid]  # counts it
    b.mem.flush_reinforcement()  # what closing the read's Memory does
    stored = b.mem.db.scalar("SELECT tokens FROM memories WHERE id = ?", (fid,))
    assert stored is not None and int(stored) > 0
    assert not b.mem.db.query("SELECT id FROM sync_dirty WHERE agent_id = ?", (b.mem.agent_id,))
    for device, step in [(b, "push"), (a, "push"), (b, "pull"), (a, "pull")]:
        device.run(step)
    for dev in (a, b):
        with pytest.raises(NotFound):
            dev.mem.get(fid)


def test_a_memory_forgotten_on_one_device_is_archived_on_the_other_and_can_come_back_there(
    pair: tuple[Device, Device], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    text = "the spare key is under the blue pot"
    fid = a.mem.store(text, "home", 0.5).id
    for dev in (a, b):
        dev.engine.sync(policy())
    curate.move_to_forgotten(a.mem, fid)
    for dev in (a, b):
        dev.engine.sync(policy())
    assert b.mem.retrieve("spare key blue pot", reinforce=False).hits == []
    assert curate.last_forgotten(b.mem) == curate.last_forgotten(a.mem) != None  # noqa: E711
    home = ["--home", str(b.mem.home.root), "--agent-id", b.mem.agent_id]
    # brought back on the device that did not forget it
    assert run([*home, "unforget", fid]) == 0, capsys.readouterr().err
    for dev in (b, a):
        dev.engine.sync(policy())
    for dev in (a, b):
        assert dev.mem.get(fid).text == text
        assert curate.forgotten_count(dev.mem) == 0  # back on both, in neither archive
        assert [h.memory.id for h in dev.mem.retrieve("spare key", reinforce=False).hits] == [fid]
    assert not a.engine.has_work() and not b.engine.has_work()
