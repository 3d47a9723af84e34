"""Whose keys a rotation trusts, and what a removed device can still write, on a real sqld: the
attacker edits the server's rows with the token every device holds, or uses a stolen device's
home files; the owner works through the CLI.

- a kept device's key comes from the signed roster, or from the server's device list only
  when the owner confirms its fingerprint (shown on that device's own `sync devices`);
- a device on the roster cannot re-key another one (only the recovery key can): `sync check`
  names such an entry and a removal or rotation keeps the roster's keys;
- a removed device cannot add records under the old key after the rotation, whatever its clock
  says."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import run_cli
from tests.sync.devicekit import first_device, join_with_recovery
from tests.sync.helpers import PASSPHRASE, policy, tag_of
from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_roster import (
    _hide_epoch,
    _records,
    current_wraps,
    engine_at,
    local_state,
    opens_any,
    secret,
)
from tiermem.core.engine import Memory
from tiermem.core.errors import RosterTampered
from tiermem.sync import crypto
from tiermem.sync.crypto.roster import (
    RECOVERY,
    generate_signing_key,
    load_signing_key,
    recovery_signing_key,
    signing_public_bytes,
    verify_roster,
)
from tiermem.sync.devices import roster_pin
from tiermem.sync.devices.secret_store import DEVICE_KEY, SIGNING_KEY
from tiermem.sync.restore import restore
from tiermem.sync.state import read_settings
from tiermem.sync.vault.hrana import HranaClient

INVALID_INPUT = 3
REJECTED = 48
ROSTER_DAMAGE = 63


class Cli:
    """`tiermem` in-process for one agent: (exit code, stdout, stderr)."""

    def __init__(self, capsys: pytest.CaptureFixture[str], agent_id: str) -> None:
        self.capsys = capsys
        self.agent_id = agent_id

    def __call__(self, home: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        return run_cli(
            self.capsys, "--home", str(home), "--agent-id", self.agent_id, *args, stdin=stdin
        )

    def devices(self, home: Path) -> dict[str, dict[str, Any]]:
        code, out, err = self(home, "--json", "sync", "devices")
        assert code == 0, err
        return {d["device_id"]: d for d in json.loads(out)["devices"]}


@pytest.fixture
def tm(
    capsys: pytest.CaptureFixture[str],
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    return Cli(capsys, agent_id)


def swap_public_key(client: HranaClient, device_hex: str, public: bytes) -> bytes:
    """The attacker replaces a device's public key in the server's device list (returns the
    one it replaced)."""
    device_id = bytes.fromhex(device_hex)
    rows = client.execute("SELECT public_key FROM devices WHERE device_id = ?", (device_id,)).rows
    client.execute("UPDATE devices SET public_key = ? WHERE device_id = ?", (public, device_id))
    old = rows[0][0]
    assert isinstance(old, bytes)
    return old


# ------------------------------------------------------------------ a kept device's key


def test_keeping_a_device_off_the_roster_needs_the_fingerprint_its_own_screen_shows(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (
        mem_a,
        engine_a,
        recovery,
    ):
        mem_a.store("the safe combination is in the red folder", "home/safe")
        engine_a.push(policy())
        restore(tmp_path / "c", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
        with engine_at(tmp_path / "c", agent_id) as restored:
            restored.mem.store("moved the red folder to the attic", "home/safe")
            restored.push(policy())
            kept = restored.require_ready().device_id.hex()
        on_its_screen = tm.devices(tmp_path / "c")[kept]
        assert on_its_screen["current"] and on_its_screen["fingerprint"]
        fingerprint = on_its_screen["fingerprint"]
        before = local_state(mem_a)
        key_text = crypto.format_recovery_key(recovery) + "\n"
        tag = tag_of(mem_a)

        # The server operator swaps in a key of its own for the device off the roster.
        attacker = crypto.generate_device_key()
        real = swap_public_key(client, kept, crypto.device_public_bytes(attacker))
        assert tm.devices(tmp_path / "a")[kept]["fingerprint"] != fingerprint
        code, _, err = tm(
            tmp_path / "a", "sync", "rotate-key", "--keep", kept[:8], "--stdin", stdin=key_text
        )
        assert code == INVALID_INPUT
        assert len(err.strip().splitlines()) == 1 and "fingerprint" in err
        code, _, err = tm(
            tmp_path / "a",
            "sync",
            "rotate-key",
            "--keep",
            f"{kept[:8]}:{fingerprint}",
            "--stdin",
            stdin=key_text,
        )
        assert code == INVALID_INPUT and "fingerprint" in err
        assert current_wraps(client, tag, 2) == []  # nothing was wrapped to the attacker

        # With the device's real key back, the fingerprint it showed keeps it.
        swap_public_key(client, kept, real)
        assert tm.devices(tmp_path / "a")[kept]["fingerprint"] == fingerprint
        code, _, err = tm(
            tmp_path / "a",
            "sync",
            "rotate-key",
            "--keep",
            f"{kept[:8]}:{fingerprint}",
            "--stdin",
            stdin=key_text,
        )
        assert code == 0, err
        epoch_2 = current_wraps(client, tag, 2)
        assert opens_any(epoch_2, agent_id, secret(tmp_path / "c", DEVICE_KEY))
        assert not opens_any(epoch_2, agent_id, attacker.private_bytes_raw())
        assert local_state(mem_a) == before


def test_keeping_a_device_on_the_roster_uses_its_signed_key_not_the_servers_list(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the alarm code ends in a nine", "home/alarm")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        laptop = join_with_recovery(tmp_path / "d", agent_id, sqld, recovery, "laptop")
        shown = tm.devices(tmp_path / "d")[laptop.device_id]["fingerprint"]
        assert tm.devices(tmp_path / "a")[laptop.device_id]["fingerprint"] == shown
        before = local_state(mem_a)
        attacker = crypto.generate_device_key()
        swap_public_key(client, laptop.device_id, crypto.device_public_bytes(attacker))
        assert tm.devices(tmp_path / "a")[laptop.device_id]["fingerprint"] == shown  # signed

        code, _, err = tm(
            tmp_path / "a",
            "sync",
            "remove-device",
            lost.device_id,
            "--yes",
            "--keep",
            laptop.device_id[:8],
            "--stdin",
            stdin=crypto.format_recovery_key(recovery) + "\n",
        )
        assert code == 0, err
        epoch_2 = current_wraps(client, tag_of(mem_a), 2)
        assert opens_any(epoch_2, agent_id, secret(tmp_path / "d", DEVICE_KEY))
        assert not opens_any(epoch_2, agent_id, attacker.private_bytes_raw())
        assert not opens_any(epoch_2, agent_id, secret(tmp_path / "b", DEVICE_KEY))
        assert local_state(mem_a) == before


# ------------------------------------------------------- a re-key by a stolen device


def _rekey_as(tmp_path: Path, agent_id: str, thief_home: str, victim: str) -> bytes:
    """The thief, with a stolen device's home, signs another device's id onto the roster with
    keys of its own (returns its X25519 private key)."""
    stolen_id = bytes.fromhex(_device_id(tmp_path / thief_home, agent_id))
    thief = crypto.generate_device_key()
    with engine_at(tmp_path / thief_home, agent_id) as stolen:
        view = roster_pin.verified(stolen, fresh=True)
        assert view is not None
        draft = roster_pin.Draft(agent_id, stolen.require_ready().tag, view)
        signer = load_signing_key(secret(tmp_path / thief_home, SIGNING_KEY))
        draft.add(
            bytes.fromhex(victim),
            crypto.device_public_bytes(thief),
            signing_public_bytes(generate_signing_key()),
            signer,
            stolen_id.hex(),
        )
        stolen.remote(stolen.require_ready()).batch(draft.statements, policy())
    return thief.private_bytes_raw()


def _device_id(home: Path, agent_id: str) -> str:
    with Memory(home, agent_id) as mem:
        s = read_settings(mem.db, agent_id)
    assert s is not None
    return s.device_id.hex()


def test_a_stolen_device_cannot_re_key_another_device_and_check_names_the_entry(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the car is parked on level three", "home/car")
        engine_a.push(policy())
        stolen = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "stolen laptop")
        laptop = join_with_recovery(tmp_path / "d", agent_id, sqld, recovery, "laptop")
        shown = tm.devices(tmp_path / "d")[laptop.device_id]["fingerprint"]
        before = local_state(mem_a)
        thief = _rekey_as(tmp_path, agent_id, "b", laptop.device_id)

        code, out, err = tm(tmp_path / "a", "sync", "check")
        assert code == ROSTER_DAMAGE
        assert laptop.device_id[:12] in out + err and stolen.device_id[:12] in out + err
        assert tm.devices(tmp_path / "a")[laptop.device_id]["fingerprint"] == shown

        key_text = crypto.format_recovery_key(recovery) + "\n"
        code, out, err = tm(
            tmp_path / "a",
            "--json",
            "sync",
            "remove-device",
            stolen.device_id,
            "--yes",
            "--stdin",
            stdin=key_text,
        )
        assert code == 0, err
        assert laptop.device_id not in json.loads(out)["also_removed"]
        epoch_2 = current_wraps(client, tag_of(mem_a), 2)
        assert opens_any(epoch_2, agent_id, secret(tmp_path / "d", DEVICE_KEY))
        assert not opens_any(epoch_2, agent_id, thief)
        assert tm(tmp_path / "a", "sync", "check")[0] == 0  # the signer is removed now
        code, _, err = tm(tmp_path / "a", "sync", "rotate-key", "--stdin", stdin=key_text)
        assert code == 0, err
        epoch_3 = current_wraps(client, tag_of(mem_a), 3)
        assert opens_any(epoch_3, agent_id, secret(tmp_path / "d", DEVICE_KEY))
        assert not opens_any(epoch_3, agent_id, thief)
        assert local_state(mem_a) == before


def test_a_stolen_device_re_keying_the_owners_device_does_not_make_its_removal_revoke_it(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the spare tyre is flat", "home/car")
        engine_a.push(policy())
        stolen = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "stolen laptop")
        own = engine_a.require_ready().device_id.hex()
        _rekey_as(tmp_path, agent_id, "b", own)
        code, out, err = tm(
            tmp_path / "a",
            "--json",
            "sync",
            "remove-device",
            stolen.device_id,
            "--yes",
            "--stdin",
            stdin=crypto.format_recovery_key(recovery) + "\n",
        )
        assert code == 0, err
        assert own not in json.loads(out)["also_removed"]
        listed = tm.devices(tmp_path / "a")[own]
        assert listed["current"] and not listed["revoked"]
        mem_a.store("bought a new spare tyre", "home/car")
        assert tm(tmp_path / "a", "sync", "push")[0] == 0


# ------------------------------------------------ a removed device writing under the old key


@pytest.mark.parametrize("clock", [3.0, -150.0], ids=["inside-the-old-grace", "clock-set-back"])
def test_a_removed_device_cannot_add_records_under_the_old_key_whatever_its_clock_says(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli, clock: float
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        join_with_recovery(tmp_path / "c", agent_id, sqld, recovery, "kept tablet")
        for home in ("b", "c"):
            assert tm(tmp_path / home, "sync", "pull")[0] == 0
        code, _, err = tm(
            tmp_path / "a",
            "sync",
            "remove-device",
            lost.device_id,
            "--yes",
            "--stdin",
            stdin=crypto.format_recovery_key(recovery) + "\n",
        )
        assert code == 0, err
        tag = tag_of(mem_a)
        # The removed device, with the token, hides the rotation from its own client and
        # pushes a memory sealed under epoch 1, its clock near or before the rotation.
        hidden = _hide_epoch(client, tag, 2)
        sent = _records(client, tag)
        with engine_at(tmp_path / "b", agent_id, ahead=clock) as removed:
            removed.mem.store("INJECTED: the ferry is cancelled, stay home", "travel/ferry")
            removed.push(policy())
        assert _records(client, tag) > sent
        client.batch(
            [
                (
                    "INSERT OR IGNORE INTO key_wraps (wrap_id, agent_tag, epoch, kind, blob) "
                    "VALUES (?, ?, ?, ?, ?)",
                    row,
                )
                for row in hidden
            ]
        )
        for home in ("a", "c"):
            code, _, err = tm(tmp_path / home, "sync", "pull")
            assert code == REJECTED, err
            with Memory(tmp_path / home, agent_id) as mem:
                assert not mem.db.scalar(
                    "SELECT count(*) FROM memories WHERE agent_id = ? AND text LIKE 'INJECTED%'",
                    (agent_id,),
                )


def test_only_a_recovery_signed_rekey_changes_a_listed_devices_keys() -> None:
    recovery = crypto.generate_recovery_key()
    owner = recovery_signing_key(recovery)
    device, other = b"\x01" * 16, b"\x02" * 16
    device_sign = generate_signing_key()
    draft = roster_pin.Draft("agent", b"tag", None)
    draft.genesis(recovery, 1)
    draft.add(device, b"\x11" * 32, signing_public_bytes(device_sign), owner, RECOVERY)
    draft.add(other, b"\x22" * 32, None, owner, RECOVERY)
    draft.add(other, b"\x33" * 32, None, device_sign, device.hex())  # by a listed device
    view = verify_roster("agent", draft.bodies)
    assert view.devices[other].box_public == b"\x22" * 32
    assert [(r.device_id, r.by) for r in view.refused] == [(other, device.hex())]
    draft.rekey(other, b"\x44" * 32, None, recovery)
    assert verify_roster("agent", draft.bodies).devices[other].box_public == b"\x44" * 32
    forged = roster_pin.Draft("agent", b"tag", verify_roster("agent", draft.bodies))
    forged.append(
        {"op": "rekey", "device": other.hex(), "box": "55" * 32, "sign": ""},
        device_sign,
        device.hex(),
    )
    with pytest.raises(RosterTampered):
        verify_roster("agent", draft.bodies + forged.bodies)
