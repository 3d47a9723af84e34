"""A read is not a change (no write lock, no upload mark, counted per device), and a memory
keeps its id through every edit (CLI, MCP-facing core, TUI), its text's alias with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Clock, MemoryFactory
from tiermem.core import curate, hygiene, reinforce
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.remember import Entry, remember
from tiermem.tui.cli import run


def syncing(mem: Memory) -> Memory:
    """The agent set up to sync, as far as change tracking goes (its settings row)."""
    mem.db.execute(
        "INSERT INTO sync_state (agent_id, status, url, device_id, epoch, secret_ref, "
        "secret_store, device_wrap, recovery_wrap, created_at) VALUES "
        "(?, 'ready', 'http://127.0.0.1:9', '00', 1, 'ref', 'file', x'00', x'00', 0)",
        (mem.agent_id,),
    )
    return mem


def dirty(mem: Memory) -> set[str]:
    rows = mem.db.query("SELECT id FROM sync_dirty WHERE agent_id = ?", (mem.agent_id,))
    return {str(r[0]) for r in rows}


def test_a_read_does_not_mark_a_memory_for_upload(mem: Memory) -> None:
    syncing(mem)
    fid = mem.store("the staging database listens on port 6543", "ops/db", 0.6).id
    mem.db.execute("DELETE FROM sync_dirty")  # as after a push
    assert [h.memory.id for h in mem.retrieve("staging database").hits] == [fid]
    mem.flush_reinforcement()
    assert dirty(mem) == set()
    assert mem.memories.get(fid).access_count == 1
    assert reinforce.counters(mem.db, mem.agent_id, fid) == {
        reinforce.LOCAL: (1, mem.get(fid).last_access)
    }
    curate.edit(mem, fid, importance=0.9)  # a real change is marked
    assert dirty(mem) == {fid}


def test_storing_a_known_fact_again_counts_a_read_not_a_change(mem: Memory) -> None:
    syncing(mem)
    fid = mem.store("the staging database listens on port 6543", "ops/db", 0.6).id
    mem.db.execute("DELETE FROM sync_dirty")
    assert mem.store("The staging database listens on port 6543", "ops/db", 0.5).id == fid
    assert dirty(mem) == set() and mem.get(fid).access_count == 1
    mem.store("the staging database listens on port 6543", "ops/db", 0.8)  # higher importance
    assert dirty(mem) == {fid}


def test_a_read_takes_no_write_lock(tmp_path: Path, clock: Clock, driver: str) -> None:
    home = tmp_path / "home"
    with Memory(home, clock=clock, driver=driver) as mem:
        fid = mem.store("the wifi password is in the blue notebook", "home", 0.5).id
    other = Database(home / "tiermem.db", driver)
    try:
        other.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
        with Memory(home, clock=clock, driver=driver) as mem:
            mem.db.execute("PRAGMA busy_timeout = 0")  # any write attempt fails at once
            result = mem.retrieve("wifi password")
            assert [h.memory.id for h in result.hits] == [fid]
            assert mem.get(fid).access_count == 1  # this process sees its own read
            other.execute("COMMIT")
    finally:
        other.close()
    with Memory(home, clock=clock, driver=driver) as mem:
        assert mem.get(fid).access_count == 1  # written when the first one closed


def test_reads_wait_for_a_rolled_back_write(mem: Memory) -> None:
    fid = mem.store("the vpn needs the hardware token", "ops", 0.5).id
    mem.retrieve("vpn token")
    with pytest.raises(InvalidInput), mem.db.transaction():
        raise InvalidInput("refused")
    mem.flush_reinforcement()
    assert mem.memories.get(fid).access_count == 1
    assert len(curate.access_history(mem, fid)) == 1


def test_editing_keeps_the_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    with Memory(home) as mem:
        fid = remember(mem, Entry("standup moved to 9:30", "work", tags=["team"])).outcome.id
        hygiene.track(mem, "s1", [fid])
    args = ["--home", str(home), "--json"]
    assert (
        run([*args, "edit", fid, "--text", "standup moved to 10:00", "--url", "https://meet"]) == 0
    )
    edited = json.loads(capsys.readouterr().out)
    assert edited["id"] == fid and edited["metadata"]["urls"] == ["https://meet"]
    assert run([*args, "get", fid]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "standup moved to 10:00"
    with Memory(home) as mem:
        assert hygiene.extras_for(mem, [fid])[fid][0] == ("team",)  # tags follow
        assert hygiene.sessions_of(mem, fid)  # so do the sessions that recalled it
    assert run([*args, "edit", fid]) == 3  # nothing to change
    assert "nothing to change" in capsys.readouterr().out
    assert run([*args, "edit", "0123456789abcdef", "--text", "x"]) == 4


def test_storing_the_text_before_or_after_an_edit_finds_the_edited_memory(mem: Memory) -> None:
    fid = mem.store("the printer is on the second floor", "office", 0.5).id
    curate.edit(mem, fid, text="the printer is on the third floor")
    again = mem.store("the printer is on the second floor", "office", 0.5)
    assert again.id == fid and not again.created  # a replay of the old text
    edited = mem.store("The printer is on the THIRD floor", "office", 0.5)
    assert edited.id == fid and not edited.created
    assert sum(mem.memories.counts().values()) == 1
    other = mem.store("the scanner is on the first floor", "office", 0.5).id
    with pytest.raises(InvalidInput, match="already stored"):
        curate.edit(mem, other, text="the printer is on the third floor")
    curate.edit(mem, other, text="the printer is on the second floor")  # nobody has it now
    assert mem.store("the printer is on the second floor", "office", 0.5).id == other


def test_an_edit_survives_a_forget_and_undo_with_its_id(open_memory: MemoryFactory) -> None:
    mem = open_memory()
    fid = mem.store("the boiler is serviced in october", "home", 0.5).id
    mem.retrieve("boiler serviced")
    curate.edit(mem, fid, text="the boiler is serviced in november")
    curate.move_to_forgotten(mem, fid)
    assert curate.undo_forget(mem).id == fid
    record = mem.get(fid)
    assert record.text == "the boiler is serviced in november" and record.access_count == 1


def test_an_agent_that_does_not_sync_keeps_no_upload_marks(mem: Memory) -> None:
    fid = mem.store("the staging database listens on port 6543", "ops/db", 0.6).id
    other = mem.store("the backups run nightly", "ops/db", 0.4).id
    assert [h.memory.id for h in mem.retrieve("staging database").hits] == [fid]
    mem.flush_reinforcement()
    curate.edit(mem, fid, importance=0.9)
    mem.memories.delete([other])
    assert dirty(mem) == set()
    assert mem.db.scalar("SELECT count(*) FROM reinforce_dirty") == 0
    assert mem.get(fid).access_count == 1 and mem.get(fid).importance == 0.9
