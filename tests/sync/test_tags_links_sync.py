"""Tags, expiry and links travel with their memory on the real sqld: push/pull both ways,
a full restore, records of an older tiermem without them, and no upload marks without sync."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync.helpers import desktop_and_phone, policy
from tests.sync.sqld import SqldServer
from tiermem.core import curate, hygiene, links
from tiermem.core.engine import Memory
from tiermem.sync import memory_record
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore

EXPIRY = 2_000_000_000.0


class Device:
    def __init__(self, mem: Memory, engine: SyncEngine) -> None:
        self.mem, self.engine = mem, engine

    def tags(self, memory_id: str) -> tuple[tuple[str, ...], float | None]:
        return hygiene.extras_for(self.mem, [memory_id]).get(memory_id, ((), None))

    def links(self, memory_id: str) -> list[str]:
        return links.linked(self.mem, [memory_id]).get(memory_id, [])


@pytest.fixture
def pair(tmp_path: Path, sqld: SqldServer, agent_id: str) -> Iterator[tuple[Device, Device, bytes]]:
    with desktop_and_phone(tmp_path, sqld.url, sqld.token, agent_id) as (a, b, key):
        yield Device(*a), Device(*b), key


def _store(dev: Device, text: str) -> str:
    return dev.mem.store(text, "home", 0.5).id


def test_tags_expiry_and_links_reach_the_other_device_and_a_restore(
    pair: tuple[Device, Device, bytes], tmp_path: Path, sqld: SqldServer
) -> None:
    a, b, key = pair
    x = _store(a, "the boiler is serviced every october")
    y = _store(a, "the boiler installer is called heatwise")
    hygiene.set_extras(a.mem, x, ["house", "boiler"], EXPIRY)
    links.link(a.mem, x, y)
    a.engine.push(policy())
    b.engine.pull(policy())
    assert b.tags(x) == (("house", "boiler"), EXPIRY)
    assert b.links(x) == [y] and b.links(y) == [x]
    assert not b.engine.has_work()  # applied, not a change to send back
    tablet = tmp_path / "tablet"
    restore(tablet, a.mem.agent_id, sqld.url, sqld.token, recovery_key=key, policy=policy())
    with Memory(tablet, a.mem.agent_id) as mem_c:
        c = Device(mem_c, SyncEngine(mem_c, timeout=10.0))
        assert c.tags(x) == (("house", "boiler"), EXPIRY)
        assert c.links(x) == [y] and c.links(y) == [x]
        assert not c.engine.has_work()
        c.engine.close()


def test_removing_a_tag_and_a_link_on_the_other_device_reaches_the_first(
    pair: tuple[Device, Device, bytes],
) -> None:
    a, b, _ = pair
    x = _store(a, "the spare key is under the blue pot")
    y = _store(a, "the blue pot is by the back door")
    hygiene.set_extras(a.mem, x, ["keys", "garden"], None)
    links.link(a.mem, x, y)
    a.engine.push(policy())
    b.engine.pull(policy())
    with b.mem.db.transaction():
        b.mem.db.execute(
            "UPDATE memory_extras SET tags = 'keys' WHERE agent_id = ? AND id = ?",
            (b.mem.agent_id, x),
        )
    assert links.unlink(b.mem, x, y)
    b.engine.push(policy())
    a.engine.pull(policy())
    assert a.tags(x) == (("keys",), None)
    assert a.links(x) == [] and a.links(y) == []
    assert a.mem.get(y).text == "the blue pot is by the back door"
    assert not a.engine.has_work()


def test_a_record_of_an_older_tiermem_applies_and_leaves_no_tags(
    pair: tuple[Device, Device, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, _ = pair
    x = _store(a, "the router password is on the fridge")
    hygiene.set_extras(a.mem, x, ["wifi"], None)
    a.engine.push(policy())
    b.engine.pull(policy())
    assert b.tags(x) == (("wifi",), None)
    sealed: list[bytes] = []
    real = memory_record.encode_memory

    def older(item: object, changed: object = None, reinforced: object = None, *_: object) -> bytes:
        body = real(item, changed, reinforced)  # type: ignore[arg-type]
        sealed.append(body)
        return body

    monkeypatch.setattr(memory_record, "encode_memory", older)
    curate.edit(a.mem, x, importance=0.9)
    a.engine.push(policy())
    assert sealed and all("tags" not in json.loads(body) for body in sealed)
    b.engine.pull(policy())
    assert b.mem.get(x).importance == 0.9
    assert b.tags(x) == ((), None)


def test_a_tag_change_without_sync_marks_nothing(tmp_path: Path, agent_id: str) -> None:
    with Memory(tmp_path / "home", agent_id) as mem:
        x = mem.store("the bins go out on tuesday", "home", 0.5).id
        y = mem.store("the recycling goes out every other week", "home", 0.5).id
        hygiene.set_extras(mem, x, ["bins"], EXPIRY)
        links.link(mem, x, y)
        assert mem.db.scalar("SELECT count(*) FROM sync_dirty") == 0


@pytest.mark.parametrize("first", ["linker", "editor"])
def test_a_link_and_a_concurrent_edit_end_the_same_on_both_devices(
    pair: tuple[Device, Device, bytes], first: str
) -> None:
    a, b, _ = pair
    x = _store(a, "the dentist is on harbour street")
    y = _store(a, "the dentist appointment is every six months")
    a.engine.push(policy())
    b.engine.pull(policy())
    links.link(a.mem, x, y)  # a links, b edits x without knowing the link
    curate.edit(b.mem, x, importance=0.8)
    pushers = [a, b] if first == "linker" else [b, a]
    for dev in pushers:
        dev.engine.push(policy())
    for _ in range(2):
        for dev in (a, b):
            dev.engine.sync(policy())
    assert a.links(x) == b.links(x) and a.links(y) == b.links(y)
    assert a.mem.get(x).importance == b.mem.get(x).importance
    assert not a.engine.has_work() and not b.engine.has_work()
