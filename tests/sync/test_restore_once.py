"""A restore reads the vault once, on a real sqld with JWT auth: the manifests and checkpoint
once, each writer's newest version of every record, no index of every row; the home is usable
before the memories are checked, and a resumed restore still checks what an earlier run
stored."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.sync.helpers import policy, tag_of
from tests.sync.sqld import SqldServer
from tests.sync.test_full_restore import Source, add_facts, critical, memories, source
from tiermem.core.engine import Memory
from tiermem.core.errors import RecordDeleted
from tiermem.sync import records
from tiermem.sync.restore import RestoreProgress, prune, restore, restore_pending
from tiermem.sync.vault.hrana import HranaClient

__all__ = ["source"]  # the fixture, used by name


class Counted(httpx.HTTPTransport):
    """Counts the bytes a restore downloads."""

    def __init__(self) -> None:
        super().__init__()
        self.down = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        body = response.read()
        self.down += len(body)
        return httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )


def envelope_bytes(client: HranaClient, tag: bytes, newest_only: bool = False) -> int:
    """The envelope bytes of the vault's rows (or of each writer's newest version of each
    record)."""
    newest = (
        " AND NOT EXISTS (SELECT 1 FROM records n WHERE n.record_id = r.record_id AND "
        "n.agent_tag = r.agent_tag AND n.device_id = r.device_id AND n.version > r.version)"
    )
    rows = client.execute(
        "SELECT sum(length(envelope)) FROM records r WHERE agent_tag = ?"
        + (newest if newest_only else ""),
        (tag,),
    ).rows
    return int(str(rows[0][0]))


def edited(src: Source, rounds: int) -> None:
    """Every memory changed `rounds` times, a push after each round: old versions pile up."""
    mem, engine, _, clock = src
    ids = [str(r[0]) for r in memories(mem)]
    for i in range(rounds):
        clock.now += 60
        with mem.db.transaction():
            mem.memories.move(ids, "cold" if i % 2 == 0 else "warm", mem.now())
        assert engine.push(policy()).pushed


def test_a_restore_downloads_each_record_once_however_long_its_history(
    tmp_path: Path, source: Source, sqld: SqldServer, client: HranaClient
) -> None:
    mem, _, key, _ = source
    edited(source, 4)  # five versions of every memory on the server
    stored = envelope_bytes(client, tag_of(mem))
    wire = Counted()
    result = restore(
        tmp_path / "new", mem.agent_id, sqld.url, sqld.token, recovery_key=key, transport=wire
    )
    with Memory(tmp_path / "new", mem.agent_id) as restored:
        assert memories(restored) == memories(mem)
    # five versions of each memory are on the server; the newest alone crosses the wire (in
    # Hrana's JSON: base64 and about 250 bytes a row), with the compact manifests once
    newest = envelope_bytes(client, tag_of(mem), newest_only=True)
    assert stored > 2.5 * newest and wire.down < 2 * newest, (wire.down, newest, stored)
    assert result.rows < 130  # one row per record (and a manifest), not one per version


def test_a_deleted_memory_record_leaves_the_home_usable_with_only_verified_memories(
    tmp_path: Path, source: Source, sqld: SqldServer, client: HranaClient
) -> None:
    mem, engine, key, _ = source
    victim = str(memories(mem)[7][0])
    rid = records.record_id(engine.id_key(), records.MEMORY_TABLE, victim)
    client.execute("DELETE FROM records WHERE record_id = ?", (rid,))
    target = tmp_path / "new"
    with pytest.raises(RecordDeleted, match="stays unfinished") as info:
        restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key)
    assert info.value.exit_code == 46
    with Memory(target, mem.agent_id) as half:
        others = [m for m in memories(mem) if m[0] != victim]
        assert memories(half) == others and critical(half) == critical(mem)  # each checked
    salvaged = restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, salvage=True)
    assert [p["kind"] for p in salvaged.problems] == ["deletion"]
    with Memory(target, mem.agent_id) as restored:
        assert {r[0] for r in memories(restored)} == {r[0] for r in memories(mem)} - {victim}


def test_a_resumed_restore_checks_what_the_interrupted_run_stored(
    tmp_path: Path, source: Source, sqld: SqldServer, client: HranaClient
) -> None:
    mem, engine, key, _ = source
    add_facts(mem, 30, start=900)
    assert engine.push(policy()).pushed
    target = tmp_path / "new"
    stored: list[int] = []

    class Interrupted(Exception):
        pass

    def interrupt(p: RestoreProgress) -> None:
        if p.phase == "memories":
            stored.append(p.rows)
            if p.rows >= 40:
                raise Interrupted

    with pytest.raises(Interrupted):
        restore(
            target,
            mem.agent_id,
            sqld.url,
            sqld.token,
            recovery_key=key,
            page_rows=20,
            progress=interrupt,
        )
    assert restore_pending(target, mem.agent_id)
    # a clean resume checks the rows stored before without taking them for deleted ones …
    result = restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, page_rows=20)
    assert result.resumed and result.problems == ()
    with Memory(target, mem.agent_id) as restored:
        assert memories(restored) == memories(mem)


def test_a_record_deleted_while_a_restore_was_interrupted_is_found_on_resume(
    tmp_path: Path, source: Source, sqld: SqldServer, client: HranaClient
) -> None:
    mem, engine, key, _ = source
    target = tmp_path / "new"

    class Interrupted(Exception):
        pass

    def interrupt(p: RestoreProgress) -> None:
        if p.phase == "memories" and p.rows >= 40:
            raise Interrupted

    with pytest.raises(Interrupted):
        restore(
            target,
            mem.agent_id,
            sqld.url,
            sqld.token,
            recovery_key=key,
            page_rows=20,
            progress=interrupt,
        )
    with Memory(target, mem.agent_id) as half:  # a memory the first run already staged
        (staged,) = half.db.query("SELECT id FROM restore_staging ORDER BY id LIMIT 1")[0]
    rid = records.record_id(engine.id_key(), records.MEMORY_TABLE, str(staged))
    client.execute("DELETE FROM records WHERE record_id = ?", (rid,))
    with pytest.raises(RecordDeleted):
        restore(target, mem.agent_id, sqld.url, sqld.token, recovery_key=key, page_rows=20)


def test_a_pruned_vault_restores_with_its_checkpoint_read_once(
    tmp_path: Path, source: Source, sqld: SqldServer, client: HranaClient
) -> None:
    mem, engine, key, _ = source
    edited(source, 2)
    pruned = prune(engine, keep_versions=1, policy=policy())
    assert pruned.deleted >= 120 and pruned.compacted == 3
    wire = Counted()
    restore(tmp_path / "new", mem.agent_id, sqld.url, sqld.token, recovery_key=key, transport=wire)
    with Memory(tmp_path / "new", mem.agent_id) as restored:
        assert memories(restored) == memories(mem)
    stored = envelope_bytes(client, tag_of(mem))
    assert wire.down < stored * 1.7  # Hrana's JSON of what is there (base64 and about 250
    # bytes a row of 1 KiB here), and little else
