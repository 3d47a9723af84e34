"""Reading pages that the server refuses as too large: restore, pull and `sync check` halve
their page until it fits (sqld and Turso cap one response; sealed memories are ≥ 8 KiB each).

A dedicated sqld with a 128 KB response cap makes a page of a couple of hundred memories too large."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import START, Clock
from tests.sync.helpers import init_engine, policy, seed_memory
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.warm import NewFact
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.restore.check import check
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import SqlError


@pytest.fixture(scope="module")
def capped_sqld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqldServer]:
    server = SqldServer(
        tmp_path_factory.mktemp("capped-sqld"), extra_args=("--max-response-size", "128KB")
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def add_facts(mem: Memory, n: int, start: int = 0) -> set[str]:
    facts = [
        NewFact(f"fact {i}: the otter project milestone {i} is due", "projects/otter", 0.6)
        for i in range(start, start + n)
    ]
    return {o.id for o in mem.store_many(facts)}


def memory_ids(mem: Memory) -> set[str]:
    return {
        str(r[0])
        for r in mem.db.query("SELECT id FROM memories WHERE agent_id = ?", (mem.agent_id,))
    }


def test_a_page_too_large_for_the_server_is_halved_until_it_fits(
    tmp_path: Path, agent_id: str, capped_sqld: SqldServer
) -> None:
    clock = Clock(START)
    with Memory(tmp_path / "laptop", agent_id, clock=clock) as mem:
        seed_memory(mem)
        add_facts(mem, 200)
        engine, key = init_engine(mem, capped_sqld.url, capped_sqld.token)
        with engine:
            assert engine.push(policy()).pushed
            # the server really refuses a page of everything
            with pytest.raises(SqlError) as refused:
                engine.remote(engine.require_ready()).client.execute(
                    *store.records_after(engine.require_ready().tag, 0, 1000)
                )
            assert refused.value.code == "RESPONSE_TOO_LARGE"

            phone = tmp_path / "phone"
            result = restore(phone, agent_id, capped_sqld.url, capped_sqld.token, recovery_key=key)
            assert result.memories == len(memory_ids(mem))
            with Memory(phone, agent_id, clock=clock) as restored:
                assert memory_ids(restored) == memory_ids(mem)

            new = add_facts(mem, 150, start=1000)
            assert engine.push(policy()).pushed
            with Memory(phone, agent_id, clock=clock) as restored, SyncEngine(restored) as other:
                pulled = other.pull(policy())
                assert pulled.memories >= len(new) and pulled.pages > 1
                assert memory_ids(restored) == memory_ids(mem)

            report = check(engine, read_data=True)
            assert report.exit_code == 0, report
