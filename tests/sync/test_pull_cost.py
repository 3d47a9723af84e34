"""What a pull costs the server, against the real sqld with JWT auth: an idle pull writes
nothing, and a pull after many critical-state pushes of another device downloads that device's
newest version, not the chain."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.sync.helpers import conversation_end, init_engine, policy, seed_memory
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.vault.hrana import HranaClient


class Counting(httpx.BaseTransport):
    """httpx's transport, keeping each request's body and the bytes of each response."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.bodies: list[bytes] = []
        self.down = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.read())
        response = self.inner.handle_request(request)
        content = response.read()
        self.down += len(content)
        return httpx.Response(response.status_code, headers=response.headers, content=content)

    def close(self) -> None:
        self.inner.close()

    def writes(self) -> list[bytes]:
        marks = (b'"INSERT ', b'"UPDATE ', b'"DELETE ')
        return [b for b in self.bodies if any(m in b for m in marks)]


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


@dataclass
class Pair:
    a: Memory
    ea: SyncEngine
    b: Memory
    eb: SyncEngine
    wire: Counting
    clock: Clock
    key: bytes


@pytest.fixture
def pair(tmp_path: Path, sqld: SqldServer, agent_id: str) -> Iterator[Pair]:
    a = Memory(tmp_path / "a", agent_id)
    seed_memory(a)
    ea, key = init_engine(a, sqld.url, sqld.token)
    assert ea.push(policy()).pushed
    restore(tmp_path / "b", agent_id, sqld.url, sqld.token, recovery_key=key, policy=policy())
    clock = Clock(3600.0 * 500_000 + 60)  # a minute into a clock hour
    b = Memory(tmp_path / "b", agent_id, clock=clock)
    wire = Counting()
    eb = SyncEngine(b, timeout=10.0, transport=wire)
    try:
        yield Pair(a, ea, b, eb, wire, clock, key)
    finally:
        for closing in (eb, b, ea, a):
            closing.close()


def last_seen(sqld: SqldServer, engine: SyncEngine) -> float | None:
    device = engine.require_ready().device_id
    with HranaClient(sqld.url, sqld.token) as c:
        value = c.execute("SELECT last_seen FROM devices WHERE device_id = ?", (device,)).rows
    return None if value[0][0] is None else float(str(value[0][0]))


def test_idle_pulls_write_nothing_and_last_seen_moves_once_an_hour(
    pair: Pair, sqld: SqldServer
) -> None:
    pair.b.store("the phone joined the vault", "devices")
    assert pair.eb.push(policy()).pushed  # registers the device, with its LAST SEEN
    first = last_seen(sqld, pair.eb)
    assert first == pair.clock.at
    pair.wire.bodies.clear()
    for _ in range(3):  # idle pulls later in the same hour
        pair.clock.at += 600
        pair.eb.pull(policy())
    assert pair.wire.writes() == []
    assert last_seen(sqld, pair.eb) == first
    pair.clock.at += 3600  # the next hour's first pull says the device is still there
    pair.eb.pull(policy())
    assert last_seen(sqld, pair.eb) == pair.clock.at
    assert len(pair.wire.writes()) == 1


def test_a_pull_after_many_critical_pushes_fetches_each_writer_newest_state_once(
    pair: Pair,
) -> None:
    pair.eb.pull(policy())
    conversation_end(pair.a, 0)
    assert pair.ea.push(policy()).pushed
    before = pair.wire.down
    pair.eb.pull(policy())
    one = pair.wire.down - before  # what one critical version costs to pull
    for n in range(1, 13):
        conversation_end(pair.a, n)
        assert pair.ea.push(policy()).pushed
    before = pair.wire.down
    result = pair.eb.pull(policy())
    assert result.critical == 1
    assert pair.wire.down - before <= 2 * one
    assert pair.b.hot().identity["conversations"] == 12  # the newest state arrived whole
    assert "conversation 12 ended" in pair.b.memory_md()


def test_a_pull_merges_the_newest_state_of_every_writer_not_only_the_newest_one(
    pair: Pair, tmp_path: Path, sqld: SqldServer, agent_id: str
) -> None:
    restore(tmp_path / "c", agent_id, sqld.url, sqld.token, recovery_key=pair.key, policy=policy())
    with Memory(tmp_path / "c", agent_id) as c, SyncEngine(c, timeout=10.0) as ec:
        pair.eb.pull(policy())
        c.add_task("water the office ficus")  # C's change, then A's newer one
        assert ec.push(policy()).pushed
        pair.a.add_task("book the room for the retro")
        assert pair.ea.push(policy()).pushed
        assert pair.eb.pull(policy()).critical == 2
    tasks = {t.text for t in pair.b.hot().active_context.tasks}
    assert {"water the office ficus", "book the room for the retro"} <= tasks
