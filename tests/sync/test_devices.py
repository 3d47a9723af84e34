"""Devices of a vault against a real sqld: the list, joining with the recovery key, names, the
server's device entries vouched for by the vault key, and `check_wraps`."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.clikit import run_cli
from tests.sync.devicekit import first_device, join_with_recovery
from tests.sync.helpers import CHEAP_KDF, PASSPHRASE, policy, settings
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.sync import crypto
from tiermem.sync.devices import epochs
from tiermem.sync.devices.membership import add_device_with_recovery, list_devices, resolve_device
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import wrapcheck
from tiermem.sync.state import (
    AlreadyInitialised,
    HomeNotEmpty,
    NothingToRestore,
    wrap_id,
)
from tiermem.sync.vault.hrana import HranaClient


def test_first_device_lists_itself_named_after_the_host(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, _):
        (only,) = list_devices(engine)
        s = settings(engine)
        assert only.device_id == s.device_id.hex() and only.current and only.verified
        host = " ".join(socket.gethostname().split())
        assert only.name == f"{host} #{s.device_id.hex()[:4]}" and not only.revoked
        assert only.added is not None and only.last_seen is not None
        # The name is sealed: the server never sees it.
        (name,) = client.execute(
            "SELECT name FROM devices WHERE device_id = ?", (s.device_id,)
        ).rows[0]
        assert isinstance(name, bytes) and socket.gethostname().encode() not in name


def test_join_with_recovery_key_shares_the_vault_key_and_lists_both(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine_a, recovery):
        joined = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "laptop")
        assert joined.via == "recovery-key" and joined.epoch == 1 and joined.name == "laptop"
        with Memory(tmp_path / "b", agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            s_b = settings(engine_b)
            assert s_b.status == "ready" and s_b.registered
            assert s_b.device_id.hex() == joined.device_id
            assert epochs.id_key(engine_b) == epochs.id_key(engine_a)
            assert engine_b.epoch_key(1) == engine_a.epoch_key(1)
            listed = {d.device_id: d for d in list_devices(engine_b)}
            assert listed[joined.device_id].current and listed[joined.device_id].name == "laptop"
            first = listed[settings(engine_a).device_id.hex()]
            assert not first.current and first.verified
            assert wrapcheck.check_wraps(engine_b) == []
        assert wrapcheck.check_wraps(engine_a) == []
        assert [d.verified for d in list_devices(engine_a)] == [True, True]


def test_both_devices_read_and_write_through_push_and_pull(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.add_lesson("calibrate the ocelot sensor first", 0.9, "ops/ocelot")
        engine_a.push(policy())
        join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "laptop")
        with Memory(tmp_path / "b", agent_id) as mem_b, SyncEngine(mem_b) as engine_b:
            engine_b.pull(policy())
            lessons = [lesson.text for lesson in mem_b.hot().critical_lessons]
            assert "calibrate the ocelot sensor first" in lessons
            mem_b.add_lesson("the walrus gateway needs a restart on mondays", 0.8, "ops/walrus")
            engine_b.push(policy())
        engine_a.pull(policy())
        lessons = [lesson.text for lesson in mem_a.hot().critical_lessons]
        assert "the walrus gateway needs a restart on mondays" in lessons


def test_wrong_recovery_key_joins_nothing(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, _):
        # The vault is filed under a tag keyed with its recovery key: another key finds none.
        with pytest.raises(NothingToRestore, match="under this recovery key") as err:
            join_with_recovery(tmp_path / "b", agent_id, sqld, crypto.generate_recovery_key(), "x")
        assert err.value.exit_code == 24
        with Memory(tmp_path / "b", agent_id) as mem_b:
            assert SyncEngine(mem_b).settings() is None
        rows = client.execute(
            "SELECT count(*) FROM devices WHERE agent_tag = ?", (settings(engine).tag,)
        ).rows
        assert rows == ((1,),)


def test_join_refuses_a_home_with_memory_or_sync_and_a_missing_vault(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, _, recovery):
        with pytest.raises(AlreadyInitialised):
            add_device_with_recovery(mem_a, sqld.url, sqld.token, recovery, "again")
        with Memory(tmp_path / "b", agent_id) as mem_b:
            mem_b.store("a local fact about the heron", "misc")
            with pytest.raises(HomeNotEmpty):
                add_device_with_recovery(mem_b, sqld.url, sqld.token, recovery, "b")
    with Memory(tmp_path / "c", agent_id + "-none") as mem_c, pytest.raises(NothingToRestore):
        add_device_with_recovery(mem_c, sqld.url, sqld.token, recovery, "c")


def test_resolve_device_by_prefix(tmp_path: Path, agent_id: str, sqld: SqldServer) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, recovery):
        joined = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "laptop")
        assert resolve_device(engine, joined.device_id[:10].upper()) == bytes.fromhex(
            joined.device_id
        )
        with pytest.raises(InvalidInput):
            resolve_device(engine, "ab")
        with pytest.raises(NotFound):
            resolve_device(engine, "0" * 32)


def test_an_entry_the_server_slips_in_is_not_verified_and_check_says_so(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, _):
        list_devices(engine)
        rogue = crypto.generate_device_key()
        client.execute(
            "INSERT INTO devices (device_id, agent_tag, public_key, added, mac, mac_epoch) "
            "VALUES (?, ?, ?, '0', ?, 1)",
            (b"\x01" * 16, settings(engine).tag, crypto.device_public_bytes(rogue), b"\x00" * 32),
        )
        listed = {d.device_id: d for d in list_devices(engine)}
        assert not listed[(b"\x01" * 16).hex()].verified
        problems = wrapcheck.check_wraps(engine)
        assert [(p.kind, p.subject) for p in problems] == [
            ("unauthenticated", (b"\x01" * 16).hex())
        ]


def test_check_wraps_reports_missing_and_altered_wraps(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (_, engine, _):
        assert wrapcheck.check_wraps(engine) == []
        tag = settings(engine).tag
        client.execute("DELETE FROM key_wraps WHERE agent_tag = ? AND kind = 'recovery'", (tag,))
        blob = client.execute(
            "SELECT blob FROM key_wraps WHERE agent_tag = ? AND kind = 'device'", (tag,)
        ).rows[0][0]
        assert isinstance(blob, bytes)
        flipped = blob[:-1] + bytes([blob[-1] ^ 1])
        client.execute(
            "UPDATE key_wraps SET blob = ? WHERE agent_tag = ? AND kind = 'device'", (flipped, tag)
        )
        client.execute(
            "UPDATE key_wraps SET blob = x'00' WHERE agent_tag = ? AND kind = 'passphrase'",
            (tag,),
        )
        kinds = sorted((p.kind, p.subject) for p in wrapcheck.check_wraps(engine))
        assert kinds == [
            ("mismatch", "passphrase"),
            ("missing", "recovery"),
            ("unauthenticated", settings(engine).device_id.hex()),
        ]
        assert all(PASSPHRASE not in p.message for p in wrapcheck.check_wraps(engine))


def test_check_wraps_reports_a_passphrase_wrap_nobody_set(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (_, engine, _):
        tag = settings(engine).tag
        pw_id = wrap_id(tag, 1, "passphrase")
        forged = crypto.wrap_with_passphrase(
            crypto.generate_vault_key(),
            PASSPHRASE,
            crypto.WrapContext(agent_id, 1, pw_id),
            params=CHEAP_KDF,
        )
        client.execute(
            "INSERT INTO key_wraps (wrap_id, agent_tag, epoch, kind, blob) "
            "VALUES (?, ?, 1, 'passphrase', ?)",
            (pw_id, tag, forged),
        )
        assert [(p.kind, p.subject) for p in wrapcheck.check_wraps(engine)] == [
            ("mismatch", "passphrase")
        ]


# ---------------------------------------------------------------------------------- the CLI


class Cli:
    """`tiermem` in-process, with standard input from a string."""

    def __init__(self, capsys: pytest.CaptureFixture[str], agent_id: str) -> None:
        self.capsys = capsys
        self.agent_id = agent_id

    def __call__(self, home: Path, *args: str, stdin: str = "") -> tuple[int, str, str]:
        return run_cli(
            self.capsys, "--home", str(home), "--agent-id", self.agent_id, *args, stdin=stdin
        )


def test_devices_add_and_remove_through_the_cli(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    cli = Cli(capsys, agent_id)
    home_a, home_b = tmp_path / "a", tmp_path / "b"
    code, _, err = cli(home_a, "sync", "devices")
    assert code == 4 and err.count("\n") == 1 and "no memory home" in err  # a read creates none
    with first_device(home_a, agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.add_lesson("feed the koi at noon", 0.9, "garden/koi")
        engine_a.push(policy())
        typed = crypto.format_recovery_key(recovery)
        code, out, err = cli(home_a, "--json", "sync", "devices")
        assert code == 0, err
        listed = json.loads(out)
        assert listed["epoch"] == 1 and [d["current"] for d in listed["devices"]] == [True]

        code, out, err = cli(
            home_b,
            "--json",
            "sync",
            "add-device",
            "--recovery",
            "--stdin",
            "--url",
            sqld.url,
            "--name",
            "laptop",
            stdin=typed + "\n",
        )
        assert code == 0, err
        joined = json.loads(out)
        assert joined["via"] == "recovery-key" and joined["pulled"]["critical"] >= 1
        with Memory(home_b, agent_id) as mem_b:
            assert "feed the koi at noon" in [x.text for x in mem_b.hot().critical_lessons]
        laptop = joined["device_id"]

        code, out, _ = cli(home_a, "sync", "devices")
        assert code == 0 and "laptop" in out and "this device" in out and laptop[:12] in out

        code, _, err = cli(home_a, "sync", "remove-device", laptop[:8], stdin=typed + "\n")
        assert code == 3 and "--yes" in err
        code, _, err = cli(home_a, "sync", "remove-device", "ffff" * 8, "--yes")
        assert code == 4 and err.count("\n") == 1
        wrong = crypto.format_recovery_key(crypto.generate_recovery_key())
        code, _, err = cli(
            home_a, "sync", "remove-device", laptop[:8], "--yes", "--stdin", stdin=wrong + "\n"
        )
        assert code == 12 and err.count("\n") == 1

        code, out, err = cli(
            home_a, "sync", "remove-device", laptop[:8], "--yes", "--stdin", stdin=typed + "\n"
        )
        assert code == 0, err
        assert "epoch 1 to 2" in out and "NOT protected" in out and "already downloaded" in out
        code, out, _ = cli(home_a, "--json", "sync", "devices")
        found = {d["device_id"]: d for d in json.loads(out)["devices"]}
        assert json.loads(out)["epoch"] == 2 and found[laptop]["revoked"]

        code, _, err = cli(home_b, "sync", "devices")
        assert code == 0  # a removed device still lists, as removed
        code, _, err = cli(home_b, "sync", "approve-device")
        assert code == 54 and "removed" in err

        code, out, err = cli(home_a, "--json", "sync", "rotate-key", "--stdin", stdin=typed)
        assert code == 0, err
        assert (json.loads(out)["new_epoch"], json.loads(out)["removed"]) == (3, None)
        code, _, err = cli(home_a, "sync", "remove-device", found[laptop]["device_id"], "--yes")
        assert code == 4 and "already removed" in err

        code, out, err = cli(home_a, "sync", "rename-device", "desk  pc")
        assert code == 0
        code, out, _ = cli(home_a, "--json", "sync", "devices")
        assert [d["name"] for d in json.loads(out)["devices"] if d["current"]] == ["desk pc"]
