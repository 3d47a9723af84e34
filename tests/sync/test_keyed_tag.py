"""The tag a vault is filed under on the server is keyed with its recovery key: a server, or
anyone with the shared token, cannot confirm a guessed agent id from the rows. Vaults set up
before keyed tags (filed under the unkeyed hash of the agent id) keep working."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tests.sync.devicekit import (
    Terminal,
    first_device,
    join_with_recovery,
    pair,
    terminal_env,
)
from tests.sync.helpers import CHEAP_KDF, PASSPHRASE, init_engine, policy, tag_of
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.devices import find_vault
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.state import AlreadyInitialised, agent_tag
from tiermem.sync.vault.hrana import HranaClient
from tiermem.tui.cli import run

TABLES = ("records", "key_wraps", "devices", "roster", "pairings")


def rows_under(client: HranaClient, tag: bytes) -> dict[str, int]:
    """What the attacker sees filed under `tag`, table by table."""
    out = {}
    for table in TABLES:
        rows = client.execute(f"SELECT count(*) FROM {table} WHERE agent_tag = ?", (tag,)).rows
        out[table] = int(str(rows[0][0]))
    return out


def stored_tag(home: Path, agent_id: str) -> bytes | None:
    """The raw `sync_state.agent_tag` of a home (None: a vault from before keyed tags)."""
    with Memory(home, agent_id) as mem:
        value = mem.db.scalar("SELECT agent_tag FROM sync_state WHERE agent_id = ?", (agent_id,))
    return None if value is None else bytes(value)


def texts(mem: Memory) -> set[str]:
    return {
        str(r[0])
        for r in mem.db.query("SELECT text FROM memories WHERE agent_id = ?", (mem.agent_id,))
    }


def store_and_push(home: Path, agent_id: str, text: str) -> None:
    with Memory(home, agent_id) as mem, SyncEngine(mem) as engine:
        mem.store(text, "notes", 0.6)
        assert engine.push(policy()).pushed


def pull(home: Path, agent_id: str) -> set[str]:
    with Memory(home, agent_id) as mem, SyncEngine(mem) as engine:
        engine.pull(policy())
        return texts(mem)


def cli(
    capsys: pytest.CaptureFixture[str], home: Path, agent_id: str, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    """`tiermem` in-process (no terminal; the token from $TIERMEM_SYNC_TOKEN)."""
    sys.stdin = io.StringIO(stdin)
    try:
        code = run(["--home", str(home), "--agent-id", agent_id, *args])
    finally:
        sys.stdin = sys.__stdin__
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------ new vaults


def test_a_new_vault_leaves_no_row_under_the_guessable_hash_of_its_agent_id(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (
        mem_a,
        engine_a,
        key,
    ):
        mem_a.store("the boiler pressure should read 1.5 bar", "home/boiler", 0.7)
        assert engine_a.push(policy()).pushed
        pair(tmp_path / "b", agent_id, sqld, engine_a, "phone")
        join_with_recovery(tmp_path / "c", agent_id, sqld, key, "laptop")
        restore(tmp_path / "d", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
        for home in ("b", "c", "d"):
            store_and_push(tmp_path / home, agent_id, f"written on {home}")
        keyed = crypto.keyed_agent_tag(key, agent_id)
        assert keyed != agent_tag(agent_id) and tag_of(mem_a) == keyed
        # The attacker hashes the guessed agent id and looks: nothing anywhere.
        assert rows_under(client, agent_tag(agent_id)) == dict.fromkeys(TABLES, 0)
        found = rows_under(client, keyed)
        assert found["records"] > 0 and found["roster"] >= 4
        assert found["key_wraps"] == 2 + 4  # recovery, passphrase, a device wrap each
        assert found["devices"] == 4 and found["pairings"] == 0


def test_devices_joined_by_pairing_and_by_recovery_key_sync_under_the_keyed_tag(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, key):
        keyed = crypto.keyed_agent_tag(key, agent_id)
        pair(tmp_path / "b", agent_id, sqld, engine_a, "phone")
        code, _, err = cli(
            capsys,
            tmp_path / "c",
            agent_id,
            *("sync", "add-device", "--recovery", "--url", sqld.url, "--stdin"),
            stdin=crypto.format_recovery_key(key) + "\n",
        )
        assert code == 0, err
        for home in ("b", "c"):
            assert stored_tag(tmp_path / home, agent_id) == keyed  # the approval carried it
        store_and_push(tmp_path / "b", agent_id, "the paired phone saw a heron")
        store_and_push(tmp_path / "c", agent_id, "the laptop saw an otter")
        engine_a.pull(policy())
        assert {"the paired phone saw a heron", "the laptop saw an otter"} <= texts(mem_a)
        assert "the laptop saw an otter" in pull(tmp_path / "b", agent_id)
        assert "the paired phone saw a heron" in pull(tmp_path / "c", agent_id)
        assert rows_under(client, agent_tag(agent_id))["pairings"] == 0  # deleted when done


def test_restore_by_recovery_key_and_by_passphrase_alone_finds_the_keyed_vault(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (
        mem_a,
        engine_a,
        key,
    ):
        mem_a.store("the spare key is under the blue pot", "home/keys", 0.8)
        assert engine_a.push(policy()).pushed
        unlocked = []
        for home, flags, secret in (
            ("k", (), crypto.format_recovery_key(key)),
            ("p", ("--passphrase",), PASSPHRASE),
        ):
            code, out, err = cli(
                capsys,
                tmp_path / home,
                agent_id,
                *("--json", "restore", "--url", sqld.url, "--stdin", *flags),
                stdin=secret + "\n",
            )
            assert code == 0, err
            unlocked.append(json.loads(out)["unlocked_with"])
        assert unlocked == ["recovery-key", "passphrase"]
        for home in ("k", "p"):
            assert stored_tag(tmp_path / home, agent_id) == tag_of(mem_a)
            with Memory(tmp_path / home, agent_id) as mem:
                assert "the spare key is under the blue pot" in texts(mem)
            store_and_push(tmp_path / home, agent_id, f"restored {home} writes")
        engine_a.pull(policy())
        assert {"restored k writes", "restored p writes"} <= texts(mem_a)


# ------------------------------------------------------------------------------ old vaults


def test_an_old_vault_under_the_unkeyed_tag_still_pushes_pulls_pairs_and_restores(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    old = agent_tag(agent_id)
    with Memory(tmp_path / "a", agent_id) as mem_a:
        with monkeypatch.context() as m:  # set up as a tiermem from before keyed tags did
            m.setattr(crypto, "keyed_agent_tag", lambda key, agent: agent_tag(agent))
            engine_a, key = init_engine(mem_a, sqld.url, sqld.token, passphrase=PASSPHRASE)
        with mem_a.db.transaction():  # the column such a home gets from the migration
            mem_a.db.execute("UPDATE sync_state SET agent_tag = NULL")
        with engine_a:
            mem_a.store("the old vault keeps its tag", "notes", 0.6)
            assert engine_a.push(policy()).pushed
            assert rows_under(client, old)["records"] > 0
            join_with_recovery(tmp_path / "b", agent_id, sqld, key, "laptop")
            pair(tmp_path / "c", agent_id, sqld, engine_a, "phone")
            for home in ("b", "c"):
                assert stored_tag(tmp_path / home, agent_id) in (None, old)
                store_and_push(tmp_path / home, agent_id, f"old vault, device {home}")
            engine_a.pull(policy())
            assert {"old vault, device b", "old vault, device c"} <= texts(mem_a)
            restore(tmp_path / "k", agent_id, sqld.url, sqld.token, recovery_key=key)
            restore(tmp_path / "p", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
            for home in ("k", "p"):
                with Memory(tmp_path / home, agent_id) as mem:
                    assert "old vault, device c" in texts(mem)
            store_and_push(tmp_path / "p", agent_id, "restored by passphrase, old vault")
            engine_a.pull(policy())
            assert "restored by passphrase, old vault" in texts(mem_a)
        # The unkeyed tag names this agent: a wrong key is told apart, a second init refused.
        wrong = crypto.generate_recovery_key()
        with pytest.raises(crypto.WrongKey) as err:
            restore(tmp_path / "w", agent_id, sqld.url, sqld.token, recovery_key=wrong)
        assert err.value.exit_code == 12
        monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
        monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(wrong))
        for flags in ((), ("--new-vault",)):  # even a new vault is refused: this agent has one
            code, _, err_text = cli(
                capsys, tmp_path / "x", agent_id, "sync", "init", "--url", sqld.url, *flags
            )
            assert code == 23 and f"already holds a vault for agent {agent_id!r}" in err_text
            assert stored_tag_missing(tmp_path / "x", agent_id)


def stored_tag_missing(home: Path, agent_id: str) -> bool:
    """Nothing of sync is left in `home` (a refused init)."""
    with Memory(home, agent_id) as mem:
        return int(mem.db.scalar("SELECT count(*) FROM sync_state")) == 0


# ---------------------------------------------------------------------- a second `sync init`


def test_sync_init_beside_another_vault_is_refused_without_new_vault(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    with first_device(tmp_path / "a", agent_id, sqld):
        home = tmp_path / "second"
        code, out, err = cli(capsys, home, agent_id, "--json", "sync", "init", "--url", sqld.url)
        assert code == 23 and err.count("\n") == 1
        assert "other vault(s)" in err and "tiermem sync add-device" in err
        assert "--new-vault" in err and json.loads(out)["type"] == "AlreadyInitialised"
        assert stored_tag_missing(home, agent_id)
        code, out, err = cli(
            capsys, home, agent_id, "--json", "sync", "init", "--url", sqld.url, "--new-vault"
        )
        assert code == 0, err
        assert json.loads(out)["pushed"]["pushed"]
        assert stored_tag(home, agent_id) not in (None, agent_tag(agent_id))


def test_sync_init_on_a_terminal_asks_before_a_second_vault_and_defaults_to_no(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld):
        home = tmp_path / "second"
        args = ["--home", str(home), "--agent-id", agent_id, "sync", "init", "--url", sqld.url]
        with Terminal(args, terminal_env(sqld.token)) as term:
            said = term.expect("Set up a new, separate vault for this agent?")
            assert "tiermem sync add-device" in said
            term.send("")  # Enter: the default, no
            term.expect("nothing was set up")
            assert term.finish() == 23
        assert "RECOVERY KEY" not in term.output  # asked before any key was made or shown
        assert stored_tag_missing(home, agent_id)


def test_the_library_refuses_a_second_vault_too_and_keeps_the_key_for_new_vault(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld), Memory(tmp_path / "b", agent_id) as mem:
        engine = SyncEngine(mem)
        key = crypto.generate_recovery_key()
        with pytest.raises(AlreadyInitialised, match="other vault"):
            engine.init(sqld.url, sqld.token, key, kdf=CHEAP_KDF, policy=policy())
        assert engine.pending_init()
        done = engine.init(sqld.url, sqld.token, key, policy=policy(), new_vault=True)
        assert done.resumed and tag_of(mem) == crypto.keyed_agent_tag(key, agent_id)
        engine.close()


# --------------------------------------------------------------------- a hostile server


def copy_vault(client: HranaClient, tag: bytes, to: bytes) -> None:
    """The attacker files a copy of every row of the vault under another tag (newest rows)."""
    for table in ("records", "devices", "roster"):
        columns = {
            "records": "record_id, version, epoch, device_id, envelope",
            "devices": "device_id, public_key, added, name, last_seen, mac, mac_epoch",
            "roster": "seq, body",
        }[table]
        if table == "devices":  # its key is the device id alone
            client.execute(
                f"INSERT INTO devices (agent_tag, {columns}) SELECT ?, randomblob(16), "
                "public_key, added, name, last_seen, mac, mac_epoch FROM devices "
                "WHERE agent_tag = ?",
                (to, tag),
            )
        elif table == "records":  # unique on (record id, version)
            client.execute(
                f"INSERT INTO records (agent_tag, {columns}) SELECT ?, randomblob(16), version, "
                "epoch, device_id, envelope FROM records WHERE agent_tag = ?",
                (to, tag),
            )
        else:
            client.execute(
                f"INSERT INTO roster (agent_tag, {columns}) SELECT ?, {columns} FROM roster "
                "WHERE agent_tag = ?",
                (to, tag),
            )
    client.execute(
        "INSERT INTO key_wraps (wrap_id, agent_tag, epoch, kind, blob) SELECT randomblob(16), ?, "
        "epoch, kind, blob FROM key_wraps WHERE agent_tag = ? AND kind IN ('recovery', "
        "'passphrase')",
        (to, tag),
    )


def drop_vault(client: HranaClient, tag: bytes) -> None:
    for table in ("records", "devices", "roster", "key_wraps"):
        client.execute(f"DELETE FROM {table} WHERE agent_tag = ?", (tag,))


@pytest.fixture
def forged_tags(client: HranaClient) -> Iterator[list[bytes]]:
    """Tags the attacker files rows under; removed after the test (the server is shared)."""
    made: list[bytes] = []
    yield made
    for tag in made:
        drop_vault(client, tag)


def test_a_foreign_tag_swapped_into_the_passphrase_candidates_is_never_adopted(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    forged_tags: list[bytes],
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (mem_a, engine, _):
        mem_a.store("only the real vault holds this", "notes", 0.6)
        assert engine.push(policy()).pushed
        real = tag_of(mem_a)
        foreign = os.urandom(16)
        forged_tags.append(foreign)
        copy_vault(client, real, foreign)  # newer, so tried before the real one
        restore(tmp_path / "p", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
        assert stored_tag(tmp_path / "p", agent_id) == real
        store_and_push(tmp_path / "p", agent_id, "the restored device writes to the real vault")
        engine.pull(policy())
        assert "the restored device writes to the real vault" in texts(mem_a)


def test_a_flood_of_candidate_vaults_stops_a_passphrase_restore_with_a_clear_message(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    forged_tags: list[bytes],
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld, passphrase=PASSPHRASE) as (
        mem_a,
        engine,
        key,
    ):
        assert engine.push(policy()).pushed
        for _ in range(find_vault.MAX_CANDIDATES):
            forged_tags.append(os.urandom(16))
            copy_vault(client, tag_of(mem_a), forged_tags[-1])
        with pytest.raises(crypto.WrongPassphrase) as err:
            restore(tmp_path / "p", agent_id, sqld.url, sqld.token, passphrase=PASSPHRASE)
        message = str(err.value)
        assert f"newest {find_vault.MAX_CANDIDATES}" in message and "recovery key" in message
        assert not (tmp_path / "p").exists()
        restore(tmp_path / "k", agent_id, sqld.url, sqld.token, recovery_key=key)
        assert stored_tag(tmp_path / "k", agent_id) == tag_of(mem_a)


# ------------------------------------------------------------------------------- crypto


def test_the_keyed_tag_depends_on_the_recovery_key_and_the_agent_id() -> None:
    key, other = crypto.generate_recovery_key(), crypto.generate_recovery_key()
    tag = crypto.keyed_agent_tag(key, "agent")
    assert len(tag) == 16 and tag == crypto.keyed_agent_tag(key, "agent")
    assert tag not in (
        crypto.keyed_agent_tag(other, "agent"),
        crypto.keyed_agent_tag(key, "agent2"),
        agent_tag("agent"),
    )


def _pairing() -> tuple[X25519PrivateKey, X25519PrivateKey, crypto.PairingTranscript]:
    """A new device, its approver and a transcript between them."""
    new, approver = crypto.generate_device_key(), crypto.generate_device_key()
    transcript = crypto.PairingTranscript(
        "agent",
        os.urandom(16),
        crypto.device_public_bytes(new),
        os.urandom(16),
        crypto.device_public_bytes(approver),
        os.urandom(16),
    )
    return new, approver, transcript


def test_the_pairing_answer_carries_the_tag_sealed() -> None:
    new, approver, transcript = _pairing()
    key, tag, anchor = crypto.generate_vault_key(), os.urandom(16), (3, 7, os.urandom(32))
    sealed = crypto.seal_pairing_bundle(approver, transcript, 3, key, anchor=anchor, tag=tag)
    assert crypto.open_pairing_answer(new, transcript, sealed) == (3, key, anchor, tag)
    plain = crypto.seal_pairing_bundle(approver, transcript, 3, key, anchor=anchor)
    assert crypto.open_pairing_answer(new, transcript, plain) == (3, key, anchor, None)
    damaged = bytearray(sealed)
    damaged[-20] ^= 1  # inside the sealed tag
    with pytest.raises(crypto.WrongKey):
        crypto.open_pairing_answer(new, transcript, bytes(damaged))


def test_a_pairing_answer_from_a_vault_without_a_roster_opens() -> None:
    """A vault whose roster is not made yet (a resumed init) answers with an empty roster head:
    the joiner opens it and sees no roster, instead of rejecting it as truncated."""
    new, approver, transcript = _pairing()
    key, tag = crypto.generate_vault_key(), os.urandom(16)
    sealed = crypto.seal_pairing_bundle(approver, transcript, 2, key, anchor=(2, 0, b""), tag=tag)
    assert crypto.open_pairing_answer(new, transcript, sealed) == (2, key, (2, 0, b""), tag)
