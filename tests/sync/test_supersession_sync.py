"""Facts that change travel with their memories on the real sqld: a supersession made on one
device holds on the other and after a restore, and a newer fact that arrives before the
older one it replaces (another device kept it offline) still ends current on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Clock
from tests.sync.helpers import init_engine, policy
from tests.sync.sqld import SqldServer
from tiermem.core import supersession
from tiermem.core.engine import Memory
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore

Device = tuple[Memory, SyncEngine]


@pytest.fixture
def two(
    tmp_path: Path, sqld: SqldServer, agent_id: str
) -> Iterator[tuple[Device, Device, bytes, Clock]]:
    clock = Clock()
    mem_a = Memory(tmp_path / "desktop", agent_id, clock=clock)
    engine_a, key = init_engine(mem_a, sqld.url, sqld.token)
    engine_a.push(policy())
    restore(tmp_path / "phone", agent_id, sqld.url, sqld.token, recovery_key=key, policy=policy())
    mem_b = Memory(tmp_path / "phone", agent_id, clock=clock)
    engine_b = SyncEngine(mem_b, timeout=10.0)
    try:
        yield (mem_a, engine_a), (mem_b, engine_b), key, clock
    finally:
        for engine, mem in ((engine_a, mem_a), (engine_b, mem_b)):
            engine.close()
            mem.close()


def _where_i_live(mem: Memory) -> list[str]:
    return [h.memory.text for h in mem.retrieve("where do I live", reinforce=False).hits]


def test_a_supersession_reaches_the_other_device_and_a_restore(
    two: tuple[Device, Device, bytes, Clock], tmp_path: Path, sqld: SqldServer
) -> None:
    (mem_a, engine_a), (mem_b, engine_b), key, clock = two
    old = mem_a.store("I live in Lisbon, close to the river.", "owner").id
    clock.advance(40)
    new = mem_a.store("I moved to Porto last weekend.", "owner").id
    assert mem_a.get(old).superseded_by == new
    engine_a.push(policy())
    engine_b.pull(policy())
    assert mem_b.get(old).superseded_by == new and mem_b.get(old).superseded_at is not None
    assert _where_i_live(mem_b)[0].startswith("I moved to Porto")
    assert not engine_b.has_work()  # applied, not a change to send back
    restore(
        tmp_path / "tablet", mem_a.agent_id, sqld.url, sqld.token, recovery_key=key, policy=policy()
    )
    with Memory(tmp_path / "tablet", mem_a.agent_id, clock=clock) as mem_c:
        assert mem_c.get(old).superseded_by == new
        assert mem_c.get(old).superseded_at == mem_a.get(old).superseded_at
        assert _where_i_live(mem_c)[0].startswith("I moved to Porto")


def test_the_newer_fact_arriving_first_still_ends_current_on_both(
    two: tuple[Device, Device, bytes, Clock],
) -> None:
    (mem_a, engine_a), (mem_b, engine_b), _key, clock = two
    old = mem_a.store("I live in Lisbon, close to the river.", "owner").id  # not pushed yet
    clock.advance(40)
    new = mem_b.store("I moved to Porto last weekend.", "owner").id
    engine_b.push(policy())
    engine_a.pull(policy())  # the newer fact arrives where the older one waits to be pushed
    assert mem_a.get(old).superseded_by == new
    engine_a.push(policy())
    engine_b.pull(policy())
    assert mem_b.get(old).superseded_by == new
    for mem in (mem_a, mem_b):
        assert _where_i_live(mem)[0].startswith("I moved to Porto")
    engine_a.pull(policy())
    engine_b.pull(policy())
    assert not engine_a.has_work() and not engine_b.has_work()


def test_an_undo_on_one_device_reaches_the_other(
    two: tuple[Device, Device, bytes, Clock],
) -> None:
    (mem_a, engine_a), (mem_b, engine_b), _key, clock = two
    old = mem_a.store("My manager is Priya Shah.", "people").id
    clock.advance(10)
    new = mem_a.store("My new manager is Diego Alvarez.", "people").id
    engine_a.push(policy())
    engine_b.pull(policy())
    assert mem_b.get(old).superseded_by == new
    supersession.unsupersede(mem_b, old)  # a wrong one, undone on the phone
    engine_b.push(policy())
    engine_a.pull(policy())
    assert mem_a.get(old).superseded_at is None and mem_a.get(old).superseded_by == ""
