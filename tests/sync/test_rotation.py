"""Removing a device rotates the vault key (real sqld): the removed device cannot open what is
sealed after, the others read old and new records, the recovery key (and a passphrase given at
removal) still restore, a server cannot invent an epoch, and the chain wrap's crypto."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sync import faultproxy
from tests.sync.devicekit import first_device, join_with_recovery, open_with, pair
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import PASSPHRASE, init_engine, policy, tag_of
from tests.sync.helpers import settings as sync_settings
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.sync import crypto
from tiermem.sync.devices import epochs, rotation
from tiermem.sync.devices.membership import list_devices, remove_device
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore, wrapcheck
from tiermem.sync.state import wrap_id
from tiermem.sync.vault.hrana import HranaClient, SqlError


def _records(client: HranaClient, tag: bytes) -> list[tuple[bytes, str, int, bytes, bytes]]:
    rows = client.execute(
        "SELECT record_id, version, epoch, device_id, envelope FROM records WHERE agent_tag = ? "
        "ORDER BY seq",
        (tag,),
    ).rows
    out = []
    for rid, version, epoch, device, envelope in rows:
        assert isinstance(rid, bytes) and isinstance(version, str) and isinstance(epoch, int)
        assert isinstance(device, bytes) and isinstance(envelope, bytes)
        out.append((rid, version, epoch, device, envelope))
    return out


TABLES = ("critical", "memory", "manifest", "metrics")


def _opens(engine: SyncEngine, agent_id: str, row: tuple[bytes, str, int, bytes, bytes]) -> bool:
    """The row opens (with the key of its epoch, as `engine` knows it) as one of the tables."""
    rid, version, _, device, envelope = row
    for table in TABLES:
        context = crypto.RecordContext(agent_id, table, rid, version, device)
        try:
            open_with(engine, envelope, context)
            return True
        except crypto.TamperedData:
            continue
    return False


def test_remove_device_rotates_the_key_for_future_data_only(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the old secret: otters nest under the pier", "wildlife/otters")
        engine_a.push(policy())
        lost_id = pair(tmp_path / "lost", agent_id, sqld, engine_a, "lost phone")
        kept_id = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "laptop").device_id
        with Memory(tmp_path / "lost", agent_id) as mem_lost, SyncEngine(mem_lost) as lost:
            lost.pull(policy())  # it had the old data
            old_key_lost = lost.epoch_key(1)

            result = remove_device(engine_a, lost_id[:8], recovery)
            assert (result.old_epoch, result.new_epoch, result.removed) == (1, 2, lost_id)
            assert sorted(result.kept) == sorted([sync_settings(engine_a).device_id.hex(), kept_id])
            assert result.skipped == [] and result.passphrase == "none"
            assert "NOT protected" in result.note and "already downloaded" in result.note
            assert sync_settings(engine_a).epoch == 2
            assert wrapcheck.check_wraps(engine_a) == []

            listed = {d.device_id: d for d in list_devices(engine_a)}
            assert listed[lost_id].revoked and listed[lost_id].revoked_at is not None
            assert not listed[lost_id].verified and listed[kept_id].verified

            mem_a.store("the new secret: the otters moved to the marsh", "wildlife/otters")
            engine_a.push(policy())
            rows = _records(client, tag_of(mem_a))
            assert {r[2] for r in rows} == {1, 2}
            new_rows = [r for r in rows if r[2] == 2]
            assert new_rows
            # The removed device: no wrap of the new key, no way to adopt it, and its old key
            # opens none of the new records.
            assert client.execute(
                "SELECT count(*) FROM key_wraps WHERE wrap_id = ?",
                (wrap_id(tag_of(mem_a), 2, "device", bytes.fromhex(lost_id)),),
            ).rows == ((0,),)
            with pytest.raises(epochs.DeviceRevoked) as err:
                epochs.refresh_epoch(lost)
            assert err.value.exit_code == 54
            with pytest.raises(epochs.DeviceRevoked):
                lost.epoch_key(2)
            for rid, version, _, device, envelope in new_rows:
                for table in TABLES:
                    context = crypto.RecordContext(agent_id, table, rid, version, device)
                    with pytest.raises(crypto.TamperedData):
                        crypto.open_record(old_key_lost, context, envelope)

        # The device that stayed reads old and new records, and adopts the epoch by itself.
        with Memory(tmp_path / "b", agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            engine_b.pull(policy())
            assert sync_settings(engine_b).epoch == 2
            texts = {h.memory.text for h in mem_b.retrieve("otters").hits}
            assert "the old secret: otters nest under the pier" in texts
            assert "the new secret: the otters moved to the marsh" in texts
            rows = _records(client, tag_of(mem_a))
            assert all(_opens(engine_b, agent_id, row) for row in rows)
            mem_b.store("written after the rotation by the laptop", "misc")
            engine_b.push(policy())
            assert {r[2] for r in _records(client, tag_of(mem_a))[-2:]} == {2}

    # Restoring with the recovery key still works after the rotation.
    restored = restore(tmp_path / "restored", agent_id, sqld.url, sqld.token, recovery_key=recovery)
    assert restored.agent_id == agent_id
    with Memory(tmp_path / "restored", agent_id) as mem_r:
        texts = {h.memory.text for h in mem_r.retrieve("otters").hits}
        assert "the old secret: otters nest under the pier" in texts
        assert "the new secret: the otters moved to the marsh" in texts


def test_rotation_needs_the_right_recovery_key_and_refuses_odd_targets(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, recovery):
        other = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "b").device_id
        with pytest.raises(crypto.WrongKey):
            remove_device(engine, other, crypto.generate_recovery_key())
        with pytest.raises(InvalidInput, match="the device you are using"):
            remove_device(engine, sync_settings(engine).device_id, recovery)
        with pytest.raises(NotFound):
            remove_device(engine, bytes(16), recovery)
        assert client.execute(
            "SELECT max(epoch) FROM key_wraps WHERE agent_tag = ?", (sync_settings(engine).tag,)
        ).rows == ((1,),)
        remove_device(engine, other, recovery)
        with pytest.raises(NotFound, match="already removed"):
            remove_device(engine, other, recovery)


def test_the_passphrase_is_kept_when_given_and_dropped_otherwise(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (
        mem,
        engine,
        recovery,
    ):
        mem.add_lesson("the lighthouse lamp is serviced in october", 0.9, "sea/lighthouse")
        engine.push(policy())
        first = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "b").device_id
        second = join_with_recovery(tmp_path / "c", agent_id, sqld, recovery, "c").device_id
        with pytest.raises(crypto.WrongPassphrase):
            remove_device(engine, first, recovery, passphrase="not the passphrase at all")
        kept = remove_device(engine, first, recovery, passphrase=PASSPHRASE)
        assert kept.passphrase == "kept" and sync_settings(engine).passphrase_wrap is not None
        assert wrapcheck.check_wraps(engine) == []
        restored = restore(
            tmp_path / "by-passphrase", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE
        )
        assert restored.unlocked_with == "passphrase"
        dropped = remove_device(engine, second, recovery)
        assert dropped.passphrase == "dropped" and dropped.new_epoch == 3
        assert sync_settings(engine).passphrase_wrap is None
        assert wrapcheck.check_wraps(engine) == []
    with pytest.raises(Exception, match="passphrase"):
        restore(tmp_path / "too-late", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
    restored = restore(tmp_path / "by-key", agent_id, sqld.url, sqld.token, recovery_key=recovery)
    with Memory(tmp_path / "by-key", agent_id) as mem_r:
        assert "the lighthouse lamp is serviced in october" in [
            lesson.text for lesson in mem_r.hot().critical_lessons
        ]


def test_two_rotations_at_once_one_wins_and_the_other_changes_nothing(
    tmp_path: Path, agent_id: str, sqld: SqldServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, recovery):
        join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "b")
        with Memory(tmp_path / "b", agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            list_devices(engine_b)
            rotation.rotate(engine_a, recovery)
            # engine_b rotates from the epoch it knows, as if both started at the same moment.
            monkeypatch.setattr(epochs, "refresh_epoch", lambda engine: 1)
            with pytest.raises(epochs.RotationConflict) as err:
                rotation.rotate(engine_b, recovery)
            assert err.value.exit_code == 55
            monkeypatch.undo()
            assert sync_settings(engine_b).epoch == 1
            assert epochs.refresh_epoch(engine_b) == 2
            assert engine_b.epoch_key(2) == engine_a.epoch_key(2)
            assert wrapcheck.check_wraps(engine_b) == []


def test_a_rotation_whose_answer_was_lost_is_finished_by_its_retry(
    tmp_path: Path, agent_id: str, sqld: SqldServer, fault_proxy: FaultProxy
) -> None:
    with Memory(tmp_path / "a", agent_id) as mem:
        engine, recovery = init_engine(mem, fault_proxy.url, sqld.token)
        with engine:
            fault_proxy.script(faultproxy.PASS, faultproxy.PASS, faultproxy.DROP_AFTER_COMMIT)
            result = rotation.rotate(engine, recovery, policy=policy())
            assert result.new_epoch == 2 and sync_settings(engine).epoch == 2
            assert wrapcheck.check_wraps(engine) == []


def test_a_server_cannot_slip_in_an_epoch_of_its_own(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, _):
        s = sync_settings(engine)
        tag = s.tag
        server_key = crypto.generate_vault_key()
        public = crypto.load_device_public_key(
            client.execute(
                "SELECT public_key FROM devices WHERE device_id = ?", (s.device_id,)
            ).rows[0][0]  # type: ignore[arg-type]
        )
        own = wrap_id(tag, 2, "device", s.device_id)
        forged = {
            own: crypto.wrap_for_device(server_key, public, crypto.WrapContext(agent_id, 2, own)),
            wrap_id(tag, 2, "recovery"): crypto.wrap_with_recovery_key(
                server_key,
                crypto.generate_recovery_key(),
                crypto.WrapContext(agent_id, 2, wrap_id(tag, 2, "recovery")),
            ),
            epochs.chain_wrap_id(tag, 1): crypto.wrap_chain(
                crypto.generate_vault_key(),
                server_key,
                2,
                crypto.WrapContext(agent_id, 1, epochs.chain_wrap_id(tag, 1)),
            ),
        }
        kinds = {own: ("device", 2), epochs.chain_wrap_id(tag, 1): ("chain", 1)}
        for wid, blob in forged.items():
            kind, epoch = kinds.get(wid, ("recovery", 2))
            client.execute(
                "INSERT INTO key_wraps (wrap_id, agent_tag, epoch, kind, blob) "
                "VALUES (?, ?, ?, ?, ?)",
                (wid, tag, epoch, kind, blob),
            )
        with pytest.raises(crypto.TamperedData, match="slip in"):
            epochs.refresh_epoch(engine)
        assert sync_settings(engine).epoch == 1
        assert [p.kind for p in wrapcheck.check_wraps(engine)] == ["chain"]


def test_a_device_entry_the_server_added_gets_no_key_at_rotation(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, recovery):
        rogue_id = b"\x02" * 16
        client.execute(
            "INSERT INTO devices (device_id, agent_tag, public_key, added) VALUES (?, ?, ?, '0')",
            (
                rogue_id,
                sync_settings(engine).tag,
                crypto.device_public_bytes(crypto.generate_device_key()),
            ),
        )
        result = rotation.rotate(engine, recovery)
        assert result.skipped == [rogue_id.hex()]
        assert result.kept == [sync_settings(engine).device_id.hex()]
        assert client.execute(
            "SELECT count(*) FROM key_wraps WHERE wrap_id = ?",
            (wrap_id(sync_settings(engine).tag, 2, "device", rogue_id),),
        ).rows == ((0,),)


# ------------------------------------------------------------------------------ crypto


def _lp(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


def test_chain_wrap_known_answer_recomputed_from_its_definition() -> None:
    old, parent = bytes(range(32)), bytes(range(1, 33))
    context = crypto.WrapContext("agent", 1, bytes(16))
    blob = crypto.wrap_chain(old, parent, 2, context, nonce=bytes(12), fmt=crypto.FORMAT_V1)
    header = b"TMWK" + bytes((1, 4)) + (2).to_bytes(4, "big") + bytes(12)
    key = HKDF(hashes.SHA256(), 32, None, b"tiermem/v1/chain").derive(parent)
    aad = (
        _lp(b"tiermem/v1/wrap")
        + _lp(b"agent")
        + (1).to_bytes(4, "big")
        + _lp(b"chain")
        + _lp(bytes(16))
        + _lp(header)
    )
    assert blob == header + AESGCM(key).encrypt(bytes(12), old, aad)
    assert blob.hex() == CHAIN_KAT
    parsed = crypto.parse_wrap(blob)
    assert isinstance(parsed, crypto.ChainWrap) and parsed.parent_epoch == 2
    assert crypto.unwrap_chain(blob, parent, context) == old


CHAIN_KAT = (
    "544d574b0104000000020000000000000000000000001b1a9a94dc120102a8022b6234cbc2449d0b2cac7d"
    "1327748c1e4e2e7d0d4fc348307d931d073b7435ec30a886c03809"
)


@settings(max_examples=50, deadline=None)
@given(
    old=st.binary(min_size=32, max_size=32),
    parent=st.binary(min_size=32, max_size=32),
    epoch=st.integers(1, 2**31),
    step=st.integers(1, 1000),
    flip=st.integers(0, 10_000),
)
def test_chain_wraps_round_trip_and_reject_any_change(
    old: bytes, parent: bytes, epoch: int, step: int, flip: int
) -> None:
    context = crypto.WrapContext("agent-x", epoch, epochs.chain_wrap_id(b"t" * 16, epoch))
    blob = crypto.wrap_chain(old, parent, epoch + step, context)
    assert crypto.unwrap_chain(blob, parent, context) == old
    damaged = bytearray(blob)
    damaged[flip % len(blob)] ^= 1
    with pytest.raises((crypto.WrongKey, crypto.TamperedData, crypto.UnsupportedFormat)):
        crypto.unwrap_chain(bytes(damaged), parent, context)
    moved = crypto.WrapContext("agent-x", epoch + step, context.wrap_id)
    with pytest.raises((crypto.WrongKey, crypto.TamperedData)):
        crypto.unwrap_chain(blob, parent, moved)
    with pytest.raises(crypto.WrongKey):
        crypto.unwrap_chain(blob, bytes(b ^ 1 for b in parent), context)
    with pytest.raises(ValueError):
        crypto.wrap_chain(old, parent, epoch, context)


def test_device_entry_mac_binds_every_field() -> None:
    key = bytes(range(32))
    mac = crypto.device_entry_mac(key, "agent", 1, bytes(16), bytes(range(32)))
    assert mac.hex() == "10a0e288a8d52111e212a710bd70a385922bca05a50c95676d738d781538b7b8"
    assert crypto.verify_device_entry(mac, key, "agent", 1, bytes(16), bytes(range(32)))
    for changed in (
        (bytes(32), "agent", 1, bytes(16), bytes(range(32))),
        (key, "agent2", 1, bytes(16), bytes(range(32))),
        (key, "agent", 2, bytes(16), bytes(range(32))),
        (key, "agent", 1, bytes(15) + b"\x01", bytes(range(32))),
        (key, "agent", 1, bytes(16), bytes(range(1, 33))),
    ):
        assert not crypto.verify_device_entry(mac, *changed)


def test_the_epoch_guard_fails_a_push_batch_of_a_device_that_missed_a_rotation(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, recovery):
        join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "b")
        marker = "INSERT INTO pairings (pairing_id, agent_tag, created, new_public, commitment) "
        marker += "VALUES (?, ?, 0, x'00', x'00')"
        pid = b"guard-test-0001!"
        assert client.batch(
            [epochs.epoch_guard(sync_settings(engine_a).tag, 1), (marker, (pid, b"t"))]
        )
        client.execute("DELETE FROM pairings WHERE pairing_id = ?", (pid,))
        rotation.rotate(engine_a, recovery)
        with pytest.raises(SqlError) as err:
            client.batch(
                [epochs.epoch_guard(sync_settings(engine_a).tag, 1), (marker, (pid, b"t"))]
            )
        assert epochs.is_epoch_guard_failure(err.value, 0)
        assert not epochs.is_epoch_guard_failure(err.value, 1)
        assert client.execute(
            "SELECT count(*) FROM pairings WHERE pairing_id = ?", (pid,)
        ).rows == ((0,),)  # nothing of the batch committed
        with Memory(tmp_path / "b", agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            assert epochs.refresh_epoch(engine_b) == 2
        assert client.batch([epochs.epoch_guard(sync_settings(engine_a).tag, 2)])


def test_a_device_restored_after_a_rotation_registers_vouched_for_and_keeps_its_key(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.add_lesson("the pump house key hangs by the door", 0.9, "farm/pump")
        engine_a.push(policy())
        rotation.rotate(engine_a, recovery)
        restore(tmp_path / "r", agent_id, sqld.url, sqld.token, recovery_key=recovery)
        with Memory(tmp_path / "r", agent_id) as mem_r, SyncEngine(mem_r) as engine_r:
            assert sync_settings(engine_r).epoch == 2
            mem_r.add_lesson("restored devices push too", 0.8, "farm/restore")
            engine_r.push(policy())  # registers the device (entry vouched for under epoch 2)
            restored_id = sync_settings(engine_r).device_id.hex()
        listed = {d.device_id: d for d in list_devices(engine_a)}
        assert listed[restored_id].verified and listed[restored_id].name
        result = rotation.rotate(engine_a, recovery)
        assert restored_id in result.kept and result.skipped == []
        with Memory(tmp_path / "r", agent_id) as mem_r, SyncEngine(mem_r) as engine_r:
            assert epochs.refresh_epoch(engine_r) == 3
            assert engine_r.epoch_key(1) == engine_a.epoch_key(1)
            assert wrapcheck.check_wraps(engine_r) == []
