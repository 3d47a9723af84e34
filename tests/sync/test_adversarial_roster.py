"""A hostile server (anyone holding the shared token) and a stolen device against the signed
device roster and the epoch floor, on a real sqld whose rows the attacker edits.

Every attack is detected with its own exit code, no key reaches the attacker, and the local
memory of the owner's devices is neither lost nor changed."""

from __future__ import annotations

import io
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.sync.devicekit import Terminal, first_device, join_with_recovery, pair, terminal_env
from tests.sync.helpers import PASSPHRASE, dump_bytes, policy, tag_of
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import DeviceRevoked, SqlError
from tiermem.sync import crypto
from tiermem.sync.crypto.roster import fingerprint, load_signing_key
from tiermem.sync.devices import roster_pin
from tiermem.sync.devices.secret_store import DEVICE_KEY, SIGNING_KEY
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.vault import schema, store
from tiermem.sync.vault.hrana import HranaClient
from tiermem.tui.cli import run

ROSTER_DAMAGE = 63  # `sync check`: the roster does not verify or misses a listed device
ROSTER_TAMPERED = 60
EPOCH_ROLLBACK = 61


def cli(home: Path, agent_id: str, *args: str, stdin: str | None = None) -> int:
    """`tiermem` in-process; the recovery key (if any) on stdin."""
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        return run(["--home", str(home), "--agent-id", agent_id, *args])
    finally:
        sys.stdin = sys.__stdin__


def local_state(mem: Memory) -> tuple[bytes, list[tuple[Any, ...]]]:
    """The critical state and every memory row: what must survive any server action."""
    rows = mem.db.query("SELECT * FROM memories WHERE agent_id = ? ORDER BY id", (mem.agent_id,))
    return dump_bytes(mem), [tuple(r) for r in rows]


@contextmanager
def engine_at(root: Path, agent_id: str, *, ahead: float = 0.0) -> Iterator[SyncEngine]:
    with Memory(root, agent_id, clock=lambda: time.time() + ahead) as mem, SyncEngine(mem) as e:
        yield e


def current_wraps(client: HranaClient, tag: bytes, epoch: int) -> list[tuple[Any, ...]]:
    rows = client.execute(
        "SELECT wrap_id, agent_tag, epoch, kind, blob FROM key_wraps WHERE agent_tag = ? "
        "AND epoch = ?",
        (tag, epoch),
    ).rows
    return [tuple(r) for r in rows]


def opens_any(wraps: list[tuple[Any, ...]], agent_id: str, device_key: bytes) -> bool:
    """Whether this X25519 private key opens any device wrap among `wraps`."""
    key = crypto.load_device_private_key(device_key)
    for wid, _, epoch, kind, blob in wraps:
        if kind != "device":
            continue
        try:
            crypto.unwrap_for_device(blob, key, crypto.WrapContext(agent_id, epoch, wid))
            return True
        except crypto.CryptoError:
            continue
    return False


def secret(root: Path, name: str) -> bytes:
    (path,) = (root / "secrets").glob("*.json")
    value: str = json.loads(path.read_text())[name]
    return value.encode() if name == "token" else bytes.fromhex(value)


# ------------------------------------------------------------------------------------ sleeper


def test_a_device_slipped_in_by_the_server_is_named_by_check_and_never_gets_the_new_key(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the boathouse code is in the blue notebook", "home/boat")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        before = local_state(mem_a)
        # The attacker (shared token only) lists a device of its own.
        sleeper_key = crypto.generate_device_key()
        sleeper_id = bytes(range(16))
        client.execute(
            "INSERT INTO devices (device_id, agent_tag, public_key, added) VALUES (?, ?, ?, ?)",
            (sleeper_id, tag_of(mem_a), crypto.device_public_bytes(sleeper_key), "0"),
        )
        assert cli(tmp_path / "a", agent_id, "sync", "check") == ROSTER_DAMAGE

        code = cli(
            tmp_path / "a",
            agent_id,
            "sync",
            "remove-device",
            lost.device_id,
            "--yes",
            "--stdin",
            stdin=crypto.format_recovery_key(recovery) + "\n",
        )
        assert code == 0
        epoch_2 = current_wraps(client, tag_of(mem_a), 2)
        assert epoch_2 and not opens_any(epoch_2, agent_id, sleeper_key.private_bytes_raw())
        assert not opens_any(epoch_2, agent_id, secret(tmp_path / "b", DEVICE_KEY))
        assert local_state(mem_a) == before


def test_a_sleeper_added_by_a_stolen_device_is_removed_with_it_and_cannot_come_back(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the spare key is under the third flower pot", "home/keys")
        engine_a.push(policy())
        stolen_id = pair(tmp_path / "b", agent_id, sqld, engine_a, "stolen laptop")
        # The thief, with the stolen laptop's keys, approves a device of its own.
        with engine_at(tmp_path / "b", agent_id) as stolen:
            sleeper_id = pair(tmp_path / "s", agent_id, sqld, stolen, "sleeper")
        before = local_state(mem_a)
        assert cli(tmp_path / "a", agent_id, "sync", "check") == 0  # validly signed so far

        result = cli(
            tmp_path / "a",
            agent_id,
            "--json",
            "sync",
            "remove-device",
            stolen_id,
            "--yes",
            "--stdin",
            stdin=crypto.format_recovery_key(recovery) + "\n",
        )
        assert result == 0
        epoch_2 = current_wraps(client, tag_of(mem_a), 2)
        for home in ("b", "s"):
            assert not opens_any(epoch_2, agent_id, secret(tmp_path / home, DEVICE_KEY))
        with engine_at(tmp_path / "s", agent_id) as sleeper, pytest.raises(DeviceRevoked):
            sleeper.epoch_key(2)  # removed with the laptop that added it
        view = roster_pin.verified(engine_a, fresh=True)
        assert view is not None and view.devices[bytes.fromhex(sleeper_id)].removed

        # Back with the stolen signing key: a new device signed by the removed laptop.
        draft = roster_pin.Draft(agent_id, tag_of(mem_a), view)
        thief = crypto.load_device_private_key(secret(tmp_path / "b", DEVICE_KEY))
        signer = load_signing_key(secret(tmp_path / "b", SIGNING_KEY))
        draft.add(bytes(16), crypto.device_public_bytes(thief), None, signer, stolen_id)
        client.batch(draft.statements)
        assert cli(tmp_path / "a", agent_id, "sync", "check") == ROSTER_DAMAGE
        code = cli(
            tmp_path / "a",
            agent_id,
            "sync",
            "rotate-key",
            "--stdin",
            stdin=crypto.format_recovery_key(recovery) + "\n",
        )
        assert code == ROSTER_TAMPERED  # nothing is wrapped to a roster that does not verify
        assert current_wraps(client, tag_of(mem_a), 3) == []
        assert local_state(mem_a) == before


def test_a_forged_or_shortened_roster_is_refused(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the well pump needs priming after frost", "farm/pump")
        engine_a.push(policy())
        join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "laptop")
        before = local_state(mem_a)
        tag = tag_of(mem_a)
        rows = client.execute("SELECT seq, body FROM roster WHERE agent_tag = ?", (tag,)).rows
        assert cli(tmp_path / "a", agent_id, "sync", "devices") == 0  # pins the roster
        # Shortened: the server drops the newest entry (the laptop's).
        client.execute("DELETE FROM roster WHERE agent_tag = ? AND seq = ?", (tag, len(rows) - 1))
        assert cli(tmp_path / "a", agent_id, "sync", "check") == ROSTER_DAMAGE
        # Forged: an entry signed with a key the server made.
        forged = roster_pin.Draft(agent_id, tag, None)
        forged.genesis(crypto.generate_recovery_key(), 1)
        client.execute("DELETE FROM roster WHERE agent_tag = ?", (tag,))
        client.batch(forged.statements[1:])
        assert cli(tmp_path / "a", agent_id, "sync", "check") == ROSTER_DAMAGE
        assert local_state(mem_a) == before


# ----------------------------------------------------------------------------- hidden epoch


def _hide_epoch(client: HranaClient, tag: bytes, epoch: int) -> list[tuple[Any, ...]]:
    """The attacker withholds every key wrap of `epoch` and the chain link under it (returned,
    to put back later)."""
    where = "agent_tag = ? AND (epoch >= ? OR (kind = 'chain' AND epoch = ?))"
    args = (tag, epoch, epoch - 1)
    hidden = client.execute(
        f"SELECT wrap_id, agent_tag, epoch, kind, blob FROM key_wraps WHERE {where}", args
    ).rows
    client.execute(f"DELETE FROM key_wraps WHERE {where}", args)
    return [tuple(r) for r in hidden]


def test_a_hidden_rotation_makes_a_restored_or_joined_device_refuse_the_old_key(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the gate code changed after the break-in", "home/gate")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        key_text = crypto.format_recovery_key(recovery) + "\n"
        assert (
            cli(
                tmp_path / "a",
                agent_id,
                "sync",
                "remove-device",
                lost.device_id,
                "--yes",
                "--stdin",
                stdin=key_text,
            )
            == 0
        )
        before = local_state(mem_a)
        _hide_epoch(client, tag_of(mem_a), 2)

        restored = tmp_path / "r"
        assert cli(restored, agent_id, "restore", "--url", sqld.url, "--stdin", stdin=key_text) == 0
        with Memory(restored, agent_id) as mem_r:
            mem_r.store("a new secret written on the restored laptop", "home/new")
        count = _records(client, tag_of(mem_a))
        assert cli(restored, agent_id, "sync", "push") == EPOCH_ROLLBACK
        assert _records(client, tag_of(mem_a)) == count  # nothing sealed under epoch 1 was sent

        joined = tmp_path / "j"
        code = cli(
            joined,
            agent_id,
            "sync",
            "add-device",
            "--recovery",
            "--url",
            sqld.url,
            "--stdin",
            stdin=key_text,
        )
        assert code == EPOCH_ROLLBACK
        assert local_state(mem_a) == before


def _records(client: HranaClient, tag: bytes) -> int:
    rows = client.execute("SELECT count(*) FROM records WHERE agent_tag = ?", (tag,)).rows
    return int(str(rows[0][0]))


def test_records_a_removed_device_seals_under_the_old_epoch_after_the_rotation_are_rejected(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        with engine_at(tmp_path / "b", agent_id) as removed:
            removed.pull(policy())
        assert (
            cli(
                tmp_path / "a",
                agent_id,
                "sync",
                "remove-device",
                lost.device_id,
                "--yes",
                "--stdin",
                stdin=crypto.format_recovery_key(recovery) + "\n",
            )
            == 0
        )
        engine_a.pull(policy())
        before = local_state(mem_a)
        # The removed device, with the token, hides the rotation from its own client and
        # pushes a memory sealed under epoch 1, dated an hour after the rotation.
        hidden = _hide_epoch(client, tag_of(mem_a), 2)
        sent = _records(client, tag_of(mem_a))
        with engine_at(tmp_path / "b", agent_id, ahead=3600) as removed:
            removed.mem.store("the ferry is cancelled, stay home", "travel/ferry")
            removed.push(policy())
        assert _records(client, tag_of(mem_a)) > sent  # on the server, sealed under epoch 1
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
        result = engine_a.pull(policy())
        assert result.rejected >= 1 and result.memories == 0
        assert local_state(mem_a) == before


# ------------------------------------------------------------------------ the owner's view


def test_remove_device_shows_who_keeps_access_and_who_goes_with_it_before_asking(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the attic ladder sticks in winter", "home/attic")
        engine_a.push(policy())
        kept = join_with_recovery(tmp_path / "k", agent_id, sqld, recovery, "kitchen tablet")
        stolen_id = pair(tmp_path / "b", agent_id, sqld, engine_a, "stolen laptop")
        with engine_at(tmp_path / "b", agent_id) as stolen:
            sleeper_id = pair(tmp_path / "s", agent_id, sqld, stolen, "sleeper")
        before = local_state(mem_a)
        args = ["--home", str(tmp_path / "a"), "--agent-id", agent_id, "sync", "remove-device"]
        with Terminal([*args, stolen_id[:8]], terminal_env(sqld.token)) as term:
            shown = term.expect("Go ahead?")
            term.send("n")
            assert term.finish() != 0
        head, _, listed = shown.partition("Keeps access:")
        keeps, _, rest = listed.partition("Also removed")
        assert stolen_id[:12] in head
        assert kept.device_id[:12] in keeps and "kitchen tablet" in keeps
        assert "by the recovery key" in keeps and stolen_id[:12] not in keeps
        assert sleeper_id[:12] in rest and "sleeper" in rest
        assert current_wraps(client, tag_of(mem_a), 2) == []  # said no: nothing rotated
        assert local_state(mem_a) == before


def test_set_token_stores_a_token_the_server_accepts_and_never_prints_it(
    tmp_path: Path, agent_id: str, sqld: SqldServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, _, _):
        mem_a.store("the router password is on the fridge", "home/net")
        before = local_state(mem_a)
    home = tmp_path / "a"
    wrong = "not-a-valid-jwt-" + "x" * 40
    assert cli(home, agent_id, "sync", "set-token", "--stdin", stdin=wrong + "\n") == 21
    fresh = sqld.mint({"a": "rw", "sub": "kitchen-tablet"})
    assert cli(home, agent_id, "sync", "set-token", "--stdin", stdin=fresh + "\n") == 0
    assert secret(home, "token") == fresh.encode()
    assert cli(home, agent_id, "sync", "push") == 0  # with the stored token
    printed = "".join(capsys.readouterr())
    assert wrong not in printed and fresh not in printed
    with Memory(home, agent_id) as mem:
        assert local_state(mem) == before


def test_a_device_restored_with_the_passphrase_is_off_the_roster_until_the_owner_keeps_it(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (
        mem_a,
        engine_a,
        recovery,
    ):
        mem_a.store("the shed roof leaks at the north corner", "home/shed")
        engine_a.push(policy())
        restore(tmp_path / "r", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
        with engine_at(tmp_path / "r", agent_id) as restored:
            restored.mem.store("patched the shed roof", "home/shed")
            restored.push(policy())
            restored_id = restored.require_ready().device_id.hex()
        before = local_state(mem_a)
        own_key = crypto.load_device_private_key(secret(tmp_path / "r", DEVICE_KEY))
        shown = fingerprint(crypto.device_public_bytes(own_key))  # what its own screen shows
        assert cli(tmp_path / "a", agent_id, "sync", "check") == ROSTER_DAMAGE  # not signed on
        code = cli(
            tmp_path / "a",
            agent_id,
            "sync",
            "rotate-key",
            "--keep",
            f"{restored_id[:8]}:{shown}",
            "--stdin",
            stdin=crypto.format_recovery_key(recovery) + "\n",
        )
        assert code == 0
        assert opens_any(
            current_wraps(client, tag_of(mem_a), 2), agent_id, secret(tmp_path / "r", DEVICE_KEY)
        )
        assert cli(tmp_path / "a", agent_id, "sync", "check") == 0
        assert local_state(mem_a) == before


def test_a_paired_device_takes_the_approvers_floor_and_roster(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the chimney was swept in october", "home/chimney")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        assert (
            cli(
                tmp_path / "a",
                agent_id,
                "sync",
                "remove-device",
                lost.device_id,
                "--yes",
                "--stdin",
                stdin=crypto.format_recovery_key(recovery) + "\n",
            )
            == 0
        )
        new_id = pair(tmp_path / "n", agent_id, sqld, engine_a, "new phone")
        before = local_state(mem_a)
        with Memory(tmp_path / "n", agent_id) as mem_n:
            anchor = roster_pin.read_anchor(mem_n.db, agent_id)
        view = roster_pin.verified(engine_a, fresh=True)
        assert view is not None and anchor.floor == 2
        assert (anchor.seq, anchor.head, anchor.genesis) == (view.seq, view.head, view.genesis)
        assert (
            view.devices[bytes.fromhex(new_id)].added_by == engine_a.require_ready().device_id.hex()
        )
        assert local_state(mem_a) == before


def test_a_retried_roster_append_is_a_no_op_and_another_entry_in_its_place_conflicts(
    client: HranaClient,
) -> None:
    """A push whose answer was lost is sent again byte for byte: the entry it already appended
    must not make the retry fail, while a different entry at the same place still does."""
    tag = os.urandom(16)
    client.batch([(schema.CREATE_ROSTER, ()), (store.APPEND_ROSTER_ENTRY, (tag, 0, b"entry"))])
    client.batch([(schema.CREATE_ROSTER, ()), (store.APPEND_ROSTER_ENTRY, (tag, 0, b"entry"))])
    with pytest.raises(SqlError):
        client.batch([(store.APPEND_ROSTER_ENTRY, (tag, 0, b"another entry"))])
    rows = client.execute("SELECT body FROM roster WHERE agent_tag = ?", (tag,)).rows
    assert [r[0] for r in rows] == [b"entry"]
