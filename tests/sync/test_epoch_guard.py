"""The epoch guard in push (real sqld): a device that missed a key rotation never commits data
sealed under the old key (which the removed device holds). Its push fails at the guard,
adopts the new epoch, seals again and resends: nothing is lost, manifests stay gap-free, and
the removed device's push and daemon stop with exit 54 without committing anything."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.sync import faultproxy
from tests.sync.devicekit import first_device, join_with_recovery
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import policy
from tests.sync.helpers import settings as sync_settings
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto, records
from tiermem.sync.daemon import Daemon
from tiermem.sync.devices import epochs
from tiermem.sync.devices.membership import add_device_with_recovery, remove_device
from tiermem.sync.engine import SyncEngine
from tiermem.sync.manifest import decode_manifest
from tiermem.sync.restore.check import check
from tiermem.sync.vault.hrana import HranaClient, HranaError
from tiermem.tui.cli import run

PATIENCE = 60.0
TABLES = ("critical", "memory", "manifest", "metrics")


def _rows(client: HranaClient, tag: bytes, after: int = 0) -> list[records.RemoteRow]:
    rows = client.execute(
        "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
        "WHERE agent_tag = ? AND seq > ? ORDER BY seq",
        (tag, after),
    ).rows
    return [records.remote_row(row) for row in rows]  # type-checked, as a pull checks them


def _last_seq(client: HranaClient, tag: bytes) -> int:
    rows = _rows(client, tag)
    return rows[-1].seq if rows else 0


def _opens_as(key: bytes, agent_id: str, row: records.RemoteRow) -> str | None:
    """The table `row` opens as under `key`, or None when the key opens it as nothing."""
    for table in TABLES:
        context = crypto.RecordContext(agent_id, table, row.record_id, row.version, row.device_id)
        try:
            crypto.open_record(key, context, row.envelope)
            return table
        except (crypto.TamperedData, crypto.WrongKey):
            continue
    return None


def _manifest_numbers(engine: SyncEngine, client: HranaClient) -> list[int]:
    """The `n` of every manifest this engine's device has on the server, in commit order."""
    s = sync_settings(engine)
    device_hex = s.device_id.hex()
    rid = records.record_id(engine.id_key(), records.MANIFEST_TABLE, device_hex)
    out = []
    for row in _rows(client, s.tag):
        if row.record_id != rid:
            continue
        key = engine.epoch_key(row.epoch)
        plain = records.open_row(key, engine.agent_id, records.MANIFEST_TABLE, row)
        out.append(decode_manifest(plain, device_hex).n)
    return out


def _assert_clean(engine: SyncEngine, client: HranaClient) -> None:
    report = check(engine, read_data=True, policy=policy())
    assert report.ok, report.problems
    assert report.exit_code == 0
    numbers = _manifest_numbers(engine, client)
    assert sorted(numbers) == list(range(1, len(numbers) + 1))  # no gap, no duplicate
    assert engine.status().manifest_n == len(numbers)


def _texts(mem: Memory, query: str) -> set[str]:
    return {h.memory.text for h in mem.retrieve(query).hits}


@dataclass(frozen=True)
class Vault:
    mem_a: Memory
    engine_a: SyncEngine
    recovery: bytes
    b: Path
    c: Path
    lost_id: str
    tag: bytes


@contextmanager
def _vault(
    tmp_path: Path, agent_id: str, sqld: SqldServer, b_url: str | None = None
) -> Iterator[Vault]:
    """Devices A, B (through `b_url`, e.g. a fault proxy) and C, all synced at epoch 1."""
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("before the removal: the heron nests by the weir", "wildlife/heron")
        engine_a.push(policy())
        with Memory(tmp_path / "b", agent_id) as mem_b:
            add_device_with_recovery(
                mem_b, b_url or sqld.url, sqld.token, recovery, "laptop", policy=policy()
            )
        lost_id = join_with_recovery(tmp_path / "c", agent_id, sqld, recovery, "phone").device_id
        for home in ("b", "c"):
            with Memory(tmp_path / home, agent_id) as mem, SyncEngine(mem) as engine:
                engine.sync(policy())
                assert "before the removal: the heron nests by the weir" in _texts(mem, "heron")
        tag = sync_settings(engine_a).tag
        yield Vault(mem_a, engine_a, recovery, tmp_path / "b", tmp_path / "c", lost_id, tag)


def test_a_device_that_missed_the_rotation_reseals_under_the_new_epoch(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with _vault(tmp_path, agent_id, sqld) as v:
        with Memory(v.c, agent_id) as mem_c, SyncEngine(mem_c) as engine_c:
            lost_key = engine_c.epoch_key(1)  # what the removed device holds
        rotated_at = _last_seq(client, v.tag)
        assert remove_device(v.engine_a, v.lost_id, v.recovery).new_epoch == 2
        with Memory(v.b, agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            assert sync_settings(engine_b).epoch == 1  # B has not noticed the rotation
            for n in range(3):
                mem_b.store(f"after the removal {n}: the heron moved upstream", "wildlife/heron")
            mem_b.add_lesson("never feed the heron bread", 0.9, "wildlife/heron")
            result = engine_b.push(policy())
            assert result.pushed and result.memories >= 3
            assert "key epoch 2 adopted" in result.note
            assert result.requests >= 2  # the failed batch, then the resealed one
            assert sync_settings(engine_b).epoch == 2
            assert engine_b.status().inflight_batches == 0
            b_id = sync_settings(engine_b).device_id
            new_key = engine_b.epoch_key(2)
            written = [r for r in _rows(client, v.tag, rotated_at) if r.device_id == b_id]
            assert written
            assert {r.epoch for r in written} == {2}
            assert {crypto.parse_envelope(r.envelope).epoch for r in written} == {2}
            assert {_opens_as(new_key, agent_id, r) for r in written} == set(TABLES)
            assert all(_opens_as(lost_key, agent_id, r) is None for r in written)
            _assert_clean(engine_b, client)
        v.engine_a.pull(policy())
        texts = _texts(v.mem_a, "heron")
        for n in range(3):
            assert f"after the removal {n}: the heron moved upstream" in texts
        assert "never feed the heron bread" in [
            lesson.text for lesson in v.mem_a.hot().critical_lessons
        ]
        _assert_clean(v.engine_a, client)


def test_the_removed_device_cannot_push_and_its_daemon_stops(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with _vault(tmp_path, agent_id, sqld) as v:
        remove_device(v.engine_a, v.lost_id, v.recovery)
        before = _rows(client, v.tag)
        with Memory(v.c, agent_id) as mem_c, SyncEngine(mem_c) as engine_c:
            mem_c.store("written on the lost phone after its removal", "misc")
            with pytest.raises(epochs.DeviceRevoked) as err:
                engine_c.push(policy())
            assert err.value.exit_code == 54
            status = engine_c.status()
            assert status.last_error is not None and "removed" in status.last_error
            assert engine_c.history(1)[0].kind == "error"
        assert _rows(client, v.tag) == before  # nothing committed

        capsys.readouterr()
        code = run(["--home", str(v.c), "--agent-id", agent_id, "sync", "push"])
        _, err_text = capsys.readouterr()
        assert code == 54
        lines = [line for line in err_text.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("tiermem: error: this device was removed")
        assert _rows(client, v.tag) == before

        # The daemon stops at once instead of retrying.
        events: list[dict[str, Any]] = []
        failure: list[BaseException] = []
        with Memory(v.c, agent_id) as mem_c:
            daemon = Daemon(mem_c, poll=0.05, report=events.append, error_pause=0.05)

            def go() -> None:
                try:
                    daemon.run()
                except BaseException as exc:
                    failure.append(exc)

            thread = threading.Thread(target=go)
            thread.start()
            thread.join(PATIENCE)
            if thread.is_alive():
                daemon.stop()
                thread.join(PATIENCE)
                pytest.fail(f"the daemon of a removed device kept running: {events}")
        assert len(failure) == 1 and isinstance(failure[0], epochs.DeviceRevoked)
        assert [e["event"] for e in events] == ["started", "stopped"]
        assert events[-1]["reason"] == "revoked"
        assert _rows(client, v.tag) == before

        # `tiermem daemon` exits 54 with the one-line message.
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from tiermem.tui.entry import main; main(sys.argv[1:])",
                "--home",
                str(v.c),
                "--agent-id",
                agent_id,
                "daemon",
                "--poll",
                "0.05",
            ],
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            env={**os.environ, "TIERMEM_SECRET_STORE": "file"},
        )
        assert proc.returncode == 54, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("tiermem: error:")]
        assert len(errors) == 1 and "this device was removed" in errors[0]
        assert "Traceback" not in proc.stderr
        assert _rows(client, v.tag) == before


def test_a_batch_committed_before_the_rotation_whose_answer_was_lost_is_confirmed(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, fault_proxy: FaultProxy
) -> None:
    with _vault(tmp_path, agent_id, sqld, b_url=fault_proxy.url) as v:
        with Memory(v.b, agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            mem_b.store("in flight: the otter holt is under the alder", "wildlife/otter")
            fault_proxy.script(faultproxy.DROP_AFTER_COMMIT)
            with pytest.raises(HranaError):
                engine_b.push(policy(max_attempts=1))
            assert engine_b.status().inflight_batches == 1
            n_in_flight = engine_b.status().manifest_n
            assert _manifest_numbers(engine_b, client)[-1] == n_in_flight  # it committed
        rotated_at = _last_seq(client, v.tag)
        remove_device(v.engine_a, v.lost_id, v.recovery)
        with Memory(v.b, agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            mem_b.store("after the rotation: the otters have kits", "wildlife/otter")
            result = engine_b.push(policy())
            assert result.pushed and sync_settings(engine_b).epoch == 2
            assert engine_b.status().inflight_batches == 0
            assert engine_b.status().manifest_n == n_in_flight + 1
            b_id = sync_settings(engine_b).device_id
            written = [r for r in _rows(client, v.tag, rotated_at) if r.device_id == b_id]
            assert written and {r.epoch for r in written} == {2}
            _assert_clean(engine_b, client)
        v.engine_a.pull(policy())
        texts = _texts(v.mem_a, "otter")
        assert "in flight: the otter holt is under the alder" in texts
        assert "after the rotation: the otters have kits" in texts
        _assert_clean(v.engine_a, client)


@pytest.mark.parametrize("adopted_by_pull", [False, True], ids=["unaware", "pulled-first"])
def test_a_batch_sealed_before_the_rotation_and_never_committed_is_sealed_again(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    fault_proxy: FaultProxy,
    adopted_by_pull: bool,
) -> None:
    with _vault(tmp_path, agent_id, sqld, b_url=fault_proxy.url) as v:
        with Memory(v.b, agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            mem_b.store("sealed under epoch 1: the kingfisher's bank", "wildlife/kingfisher")
            fault_proxy.script(faultproxy.RESET)
            with pytest.raises(HranaError):
                engine_b.push(policy(max_attempts=1))
            assert engine_b.status().inflight_batches == 1
            n_in_flight = engine_b.status().manifest_n
            assert n_in_flight not in _manifest_numbers(engine_b, client)
        rotated_at = _last_seq(client, v.tag)
        remove_device(v.engine_a, v.lost_id, v.recovery)
        v.mem_a.store("epoch 2 from A: the kingfisher fledged", "wildlife/kingfisher")
        v.engine_a.push(policy())
        with Memory(v.b, agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            if adopted_by_pull:
                # The pull adopts epoch 2 while the batch sealed under epoch 1 waits.
                engine_b.pull(policy())
                assert sync_settings(engine_b).epoch == 2
                assert engine_b.status().inflight_batches == 1
            result = engine_b.push(policy())
            assert result.pushed and sync_settings(engine_b).epoch == 2
            assert engine_b.status().inflight_batches == 0
            assert engine_b.status().manifest_n == n_in_flight  # the same number, sealed again
            b_id = sync_settings(engine_b).device_id
            written = [r for r in _rows(client, v.tag, rotated_at) if r.device_id == b_id]
            assert written and {r.epoch for r in written} == {2}
            _assert_clean(engine_b, client)
            engine_b.pull(policy())
            assert "epoch 2 from A: the kingfisher fledged" in _texts(mem_b, "kingfisher")
        v.engine_a.pull(policy())
        assert "sealed under epoch 1: the kingfisher's bank" in _texts(v.mem_a, "kingfisher")
        _assert_clean(v.engine_a, client)


def test_a_second_guard_failure_in_one_push_is_an_error_and_commits_nothing(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with _vault(tmp_path, agent_id, sqld) as v:
        remove_device(v.engine_a, v.lost_id, v.recovery)
        before = _rows(client, v.tag)
        with Memory(v.b, agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            mem_b.store("waits for the second try", "misc")
            # As if the key were rotated again between adopting an epoch and resending.
            monkeypatch.setattr(
                epochs, "refresh_epoch", lambda engine: engine.require_ready().epoch
            )
            with pytest.raises(epochs.RotationConflict) as err:
                engine_b.push(policy())
            assert err.value.exit_code == 55 and "run the push again" in str(err.value)
            assert _rows(client, v.tag) == before
            assert engine_b.status().inflight_batches == 0
            monkeypatch.undo()
            assert engine_b.push(policy()).pushed
            assert sync_settings(engine_b).epoch == 2
            _assert_clean(engine_b, client)
        v.engine_a.pull(policy())
        assert "waits for the second try" in _texts(v.mem_a, "second try")
