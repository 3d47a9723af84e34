"""The sync engine against a real sqld: init, push (one request, idempotent, retried), status."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import (
    CHEAP_KDF,
    FakeSleep,
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
from tiermem.core.warm import NewFact
from tiermem.sync import crypto, hlc
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.state import AlreadyInitialised, NotInitialised
from tiermem.sync.vault.hrana import AuthFailed, HranaClient, RequestRejected, ServerUnavailable
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.store import RECORDS_PER_APPEND


@pytest.fixture
def mem(tmp_path: Path, agent_id: str) -> Iterator[Memory]:
    with Memory(tmp_path / "home", agent_id) as m:
        yield m


def test_init_creates_tables_wraps_and_device_then_push_sends_the_state(
    mem: Memory, sqld: SqldServer, client: HranaClient
) -> None:
    seed_memory(mem)
    engine, _ = init_engine(mem, sqld.url, sqld.token, passphrase="correct horse battery")
    s = settings(engine)
    assert s.status == "ready" and s.registered and s.epoch == 1
    kinds = client.execute(
        "SELECT kind FROM key_wraps WHERE agent_tag = ? ORDER BY kind", (s.tag,)
    ).rows
    assert kinds == (("device",), ("passphrase",), ("recovery",))
    devices = client.execute("SELECT device_id FROM devices WHERE agent_tag = ?", (s.tag,)).rows
    assert devices == ((s.device_id,),)
    assert engine.has_work()  # init queued the current state
    result = engine.push(policy())
    assert result.pushed and result.requests == 1 and result.attempts == 1
    # The critical state (padded to the snapshot bucket) and the push's manifest.
    envelope = crypto.ENVELOPE_HEADER_LEN + 16
    assert result.bytes == 2 * envelope + crypto.SNAPSHOT_BUCKET + crypto.MIN_BUCKET
    assert result.records == 2 and result.memories == 0
    assert not engine.has_work()
    ((version, device, plaintext),) = remote_versions(client, engine)
    assert device == s.device_id and version == result.version
    assert plaintext == dump_bytes(mem)
    engine.close()


def test_one_http_request_per_push_and_nothing_when_nothing_changed(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    engine.push(policy())
    for n in range(5):
        conversation_end(mem, n)
        before = len(fault_proxy.log)
        result = engine.push(policy())
        assert len(fault_proxy.log) - before == 1 == result.requests
        assert result.pushed and result.changes == 2
    before = len(fault_proxy.log)
    assert engine.push(policy()).note == "nothing to push"
    assert len(fault_proxy.log) == before
    # A change that leaves the state as it was is acknowledged without a request.
    snapshot.enqueue(mem.db, mem.agent_id, "conversation-end", mem.now())
    quiet = engine.push(policy())
    assert not quiet.pushed and quiet.changes == 1 and quiet.note == "already up to date"
    assert len(fault_proxy.log) == before and not engine.has_work()
    versions = remote_versions(client, engine)
    assert len(versions) == 6
    assert [v for v, _, _ in versions] == sorted(v for v, _, _ in versions)
    assert versions[-1][2] == dump_bytes(mem)
    engine.close()


def test_versions_are_increasing_hlcs_even_when_the_clock_stands_still(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    frozen = 1_767_225_600.0
    with Memory(tmp_path / "h", agent_id, clock=lambda: frozen) as mem:
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        pushed = []
        for n in range(3):
            conversation_end(mem, n)
            pushed.append(engine.push(policy()).version)
        clocks = [hlc.parse(str(v)) for v in pushed]
        assert [c.wall_ms for c in clocks] == [int(frozen * 1000)] * 3
        assert [c.counter for c in clocks] == [0, 1, 2]
        assert {c.device for c in clocks} == {settings(engine).device_id.hex()}
        engine.close()


def test_lost_response_after_commit_is_resent_byte_for_byte(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    fault_proxy.script(faultproxy.DROP_AFTER_COMMIT)
    with pytest.raises(Exception) as info:
        engine.push(policy(max_attempts=1))
    assert info.value.__class__.__name__ == "TransportFailure"
    inflight = settings(engine).inflight
    assert inflight is not None and engine.has_work()
    assert len(remote_versions(client, engine)) == 1  # it landed
    result = engine.push(policy())
    assert result.pushed and result.resent and result.version == inflight.version
    assert len(remote_versions(client, engine)) == 1  # and the retry changed nothing
    assert settings(engine).inflight is None and not engine.has_work()
    engine.close()


def test_a_changed_state_goes_with_the_push_in_flight_in_one_request(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    """A sealed push is never dropped or renumbered (its manifest counter must have no gap):
    the next push resends it byte for byte and adds the newer state in the same request."""
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    fault_proxy.script(faultproxy.status(503))
    with pytest.raises(ServerUnavailable):
        engine.push(policy(max_attempts=1))
    first = settings(engine).inflight
    assert first is not None
    conversation_end(mem, 1)
    before = len(fault_proxy.log)
    result = engine.push(policy())
    assert result.resent and result.version is not None and result.version > first.version
    assert len(fault_proxy.log) - before == 1 == result.requests
    versions = remote_versions(client, engine)  # the 503 never reached sqld: both land now
    assert [v for v, _, _ in versions] == [first.version, result.version]
    assert versions[-1][2] == dump_bytes(mem)
    assert settings(engine).inflight is None and not engine.has_work()
    engine.close()


def test_retry_schedule_through_faults_uses_the_fake_clock(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    fault_proxy.script(
        faultproxy.status(503),
        faultproxy.status(502),
        faultproxy.status(429, retry_after="7"),
        faultproxy.RESET,
        faultproxy.DROP_AFTER_COMMIT,
        faultproxy.status(500),
    )
    sleep = FakeSleep()
    result = engine.push(RetryPolicy(max_attempts=None, sleep=sleep, jitter=lambda cap: cap))
    assert result.pushed and result.attempts == 7 and result.requests == 7
    # Full caps (jitter disabled): 5, 10, 20 (Retry-After 7 is below it), 40, 40, 40.
    assert sleep.waits == [5.0, 10.0, 20.0, 40.0, 40.0, 40.0]
    assert len(remote_versions(client, engine)) == 1
    status = engine.status()
    assert status.last_error is None and status.pending == 0
    engine.close()


def test_retry_after_is_a_floor_for_the_jittered_wait(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy
) -> None:
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    fault_proxy.script(faultproxy.status(429, retry_after="30"), faultproxy.status(503))
    sleep = FakeSleep()
    engine.push(RetryPolicy(max_attempts=None, sleep=sleep, jitter=lambda cap: 0.0))
    assert sleep.waits == [30.0, 0.0]
    engine.close()


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (faultproxy.status(400), RequestRejected),
        (faultproxy.status(401), AuthFailed),
        (faultproxy.status(403), AuthFailed),
    ],
)
def test_client_errors_are_not_retried_and_keep_the_outbox(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, fault: faultproxy.Fault, error: type
) -> None:
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    fault_proxy.script(fault)
    sleep = FakeSleep()
    before = len(fault_proxy.log)
    with pytest.raises(error):
        engine.push(RetryPolicy(max_attempts=None, sleep=sleep))
    assert sleep.waits == [] and len(fault_proxy.log) - before == 1
    status = engine.status()
    assert status.pending == 1 and status.last_error and str(fault.status) in status.last_error
    assert engine.push(policy()).pushed  # the next push gets through
    engine.close()


def test_bad_token_is_an_auth_failure_without_retry(
    mem: Memory, sqld: SqldServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, _ = init_engine(mem, sqld.url, sqld.token)
    conversation_end(mem, 1)
    engine.use_token("not-a-jwt")
    sleep = FakeSleep()
    with pytest.raises(AuthFailed):
        engine.push(RetryPolicy(max_attempts=None, sleep=sleep))
    assert sleep.waits == []
    read_only = sqld.mint({"a": "ro"})
    engine.use_token(read_only)
    with pytest.raises(AuthFailed) as info:
        engine.push(policy())
    assert info.value.status == 403
    assert engine.status().pending > 0
    engine.close()
    # A token from the environment beats the stored one (scripts and CI).
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", "garbage")
    with SyncEngine(mem) as fresh, pytest.raises(AuthFailed):
        fresh.push(policy())
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    with SyncEngine(mem) as fresh:
        assert fresh.push(policy()).pushed


def test_offline_is_normal_the_outbox_keeps_everything(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    engine.push(policy())
    fault_proxy.weights = {faultproxy.RESET: 1.0}
    for n in range(10):
        conversation_end(mem, n)
        with pytest.raises(Exception, match="network error"):
            engine.push(policy(max_attempts=3))
    status = engine.status()
    assert status.pending == 20 and status.last_error and "network error" in status.last_error
    fault_proxy.weights = {}
    result = engine.push(policy())
    assert result.pushed and result.changes == 20 and result.requests == 1
    versions = remote_versions(client, engine)
    assert versions[-1][2] == dump_bytes(mem)
    engine.close()


def test_init_twice_and_a_second_vault_beside_others_are_refused(
    tmp_path: Path, mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy
) -> None:
    engine, _ = init_engine(mem, sqld.url, sqld.token)
    with pytest.raises(AlreadyInitialised, match="already set up"):
        engine.init(sqld.url, sqld.token, crypto.generate_recovery_key())
    with Memory(tmp_path / "other", mem.agent_id) as other, SyncEngine(other) as second:
        with pytest.raises(AlreadyInitialised, match="other vault") as info:
            second.init(sqld.url, sqld.token, crypto.generate_recovery_key(), kdf=CHEAP_KDF)
        assert info.value.exit_code == 23
        assert "sync add-device" in str(info.value) and "--new-vault" in str(info.value)
        assert second.pending_init()  # kept: `init --new-vault` finishes it with the same key
        second.abandon_init()
        assert second.settings() is None
        assert not (other.home.root / "secrets").exists() or not any(
            (other.home.root / "secrets").iterdir()
        )
    engine.close()


def test_init_whose_answer_was_lost_still_completes(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    # The look for other vaults (two reads) passes; the registration commits, its answer lost.
    fault_proxy.script(faultproxy.PASS, faultproxy.PASS, faultproxy.DROP_AFTER_COMMIT)
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
    assert settings(engine).status == "ready"
    rows = client.execute(
        "SELECT count(*) FROM key_wraps WHERE agent_tag = ?", (settings(engine).tag,)
    ).rows
    assert rows == ((2,),)  # recovery + device, once each
    engine.close()


def test_interrupted_init_is_resumed_with_the_same_keys(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    fault_proxy.script(faultproxy.status(401))
    engine = SyncEngine(mem)
    with pytest.raises(AuthFailed):
        engine.init(fault_proxy.url, "wrong", crypto.generate_recovery_key(), kdf=CHEAP_KDF)
    assert engine.pending_init()
    with pytest.raises(NotInitialised, match="did not finish"):
        engine.push(policy())
    first = settings(engine)
    result = engine.resume_init(sqld.url, sqld.token, policy=policy(), new_vault=True)
    assert result.resumed and result.device_id == first.device_id.hex()
    assert settings(engine).url == sqld.url and engine.push(policy()).pushed
    engine.close()


def test_push_before_init_is_a_clear_error(mem: Memory) -> None:
    with SyncEngine(mem) as engine, pytest.raises(NotInitialised) as info:
        engine.push(policy())
    assert info.value.exit_code == 22 and "sync init" in str(info.value)


def test_status_reports_settings_without_secrets(
    mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy
) -> None:
    with SyncEngine(mem) as engine:
        assert not engine.status().initialised
    engine, _ = init_engine(mem, fault_proxy.url, sqld.token, passphrase="correct horse battery")
    fault_proxy.script(faultproxy.status(503))
    with pytest.raises(ServerUnavailable):
        engine.push(policy(max_attempts=1))
    status = engine.status()
    assert status.initialised and status.url == fault_proxy.url and status.passphrase
    assert status.pending == 1 and status.inflight_version is not None
    assert status.token_source == "file" and status.secret_store == "file"
    assert sqld.token not in repr(status)
    engine.push(policy())
    status = engine.status()
    assert status.pushes == 1 and status.last_push_version and status.last_error is None
    engine.close()


def test_secrets_file_is_private_and_holds_no_recovery_key(mem: Memory, sqld: SqldServer) -> None:
    engine, key = init_engine(mem, sqld.url, sqld.token)
    (path,) = (mem.home.root / "secrets").iterdir()
    assert path.stat().st_mode & 0o777 == 0o600
    assert (mem.home.root / "secrets").stat().st_mode & 0o777 == 0o700
    text = path.read_text()
    assert sqld.token in text and key.hex() not in text
    assert crypto.format_recovery_key(key) not in text
    db_bytes = b"".join(p.read_bytes() for p in mem.home.root.glob("tiermem.db*"))
    assert key not in db_bytes and sqld.token.encode() not in db_bytes
    engine.close()


def test_no_secret_reaches_a_log_record(
    tmp_path: Path, mem: Memory, sqld: SqldServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seed_memory(mem)
    engine, key = init_engine(mem, sqld.url, sqld.token, passphrase="correct horse battery")
    engine.push(policy())
    engine.use_token("bad-token-sentinel")
    with pytest.raises(AuthFailed) as info:
        conversation_end(mem, 1)
        engine.push(policy())
    restore(tmp_path / "t", mem.agent_id, sqld.url, sqld.token, recovery_key=key)
    engine.close()
    assert caplog.records, "expected httpx to log its requests"
    logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
    secrets = [sqld.token, "bad-token-sentinel", "correct horse battery", key.hex()]
    secrets.append(crypto.format_recovery_key(key))
    assert not [s for s in secrets if s in logged]
    assert not [s for s in secrets if s in str(info.value)]


def test_memories_and_reads_from_before_init_are_sent_by_the_first_push(
    mem: Memory, sqld: SqldServer
) -> None:
    ids = {mem.store(f"fact number {i} from before sync", "notes", 0.5).id for i in range(3)}
    assert len(mem.retrieve("fact number 1").hits) == 3
    mem.flush_reinforcement()
    assert mem.db.scalar("SELECT count(*) FROM sync_dirty") == 0  # nothing tracked yet
    engine, _ = init_engine(mem, sqld.url, sqld.token)
    queued = {r[0] for r in mem.db.query("SELECT id FROM sync_dirty")}
    assert queued == ids
    result = engine.push(policy())
    assert result.pushed and result.memories == 6  # the three memories and their reads
    assert not engine.has_work()
    engine.close()


def test_a_push_of_more_records_than_one_insert_holds_lands_every_record(
    tmp_path: Path, mem: Memory, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    n = 2 * RECORDS_PER_APPEND + 50  # three INSERT statements, the last one partly filled
    mem.store_many(NewFact(f"fact {i} of a large first push", "notes", 0.5) for i in range(n))
    engine, key = init_engine(mem, fault_proxy.url, sqld.token)
    before = len(fault_proxy.log)
    result = engine.push(policy())
    assert result.pushed and result.requests == 1 == len(fault_proxy.log) - before
    assert (
        result.memories == n and result.records == n + 3
    )  # + the critical state, the metrics, the manifest
    s = settings(engine)
    on_server = client.execute("SELECT count(*) FROM records WHERE agent_tag = ?", (s.tag,))
    assert on_server.rows[0][0] == result.records
    engine.close()
    restore(tmp_path / "restored", mem.agent_id, sqld.url, sqld.token, recovery_key=key)
    with Memory(tmp_path / "restored", mem.agent_id) as restored:
        texts = {r[0] for r in restored.db.query("SELECT text FROM memories")}
    assert texts == {f"fact {i} of a large first push" for i in range(n)}
