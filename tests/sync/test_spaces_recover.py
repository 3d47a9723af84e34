"""A space outlives the loss of its only member: `restore --space NAME --url URL` restores it
into a new home with the space's recovery key (asked, or on stdin), signs the new device onto
the space's roster as a writer, and names every writer as the roster does. Real sqld with JWT
auth, the real CLI; the attacker holds the token every member holds."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clikit import Cli
from tests.sync.spacekit import Person, people, share, space_name
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.spaces import vaults
from tiermem.sync.vault.hrana import HranaClient

ALICES = (
    "The deploy runbook lives in ops/runbook.md and needs two approvals",
    "Alice moved the staging database to the eu-west region in October",
)
OTHER = "The quarterly budget spreadsheet is in finance/q3.xlsx"
PASSPHRASE = "correct horse battery staple for the team"


@dataclass
class Lost:
    """Alice alone in a space, its recovery key, and the new home she restores into."""

    alice: Person
    space: str
    key: str
    fresh: Cli


@pytest.fixture
def lost(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
) -> Lost:
    """Alice shares a space only she belongs to, then loses her home."""
    (alice,) = people(capsys, tmp_path, monkeypatch, sqld, "alice")
    name = space_name()
    alice.json("spaces", "create", name)
    for text in ALICES:
        alice.json("store", "--text", text, "--space", name)
    key = share(alice, name, sqld)
    shutil.rmtree(alice.home)
    return Lost(alice, name, key, Cli(capsys, tmp_path / "new-home", "alice"))


def _recover(lost: Lost, sqld: SqldServer, key: str) -> tuple[int, str, str]:
    return lost.fresh(
        "--json", "restore", "--space", lost.space, "--url", sqld.url, "--stdin", stdin=key + "\n"
    )


def _space_texts(home: Path, space: str) -> list[str]:
    with Memory(home, "alice") as mem:
        rows = mem.db.query("SELECT text FROM memories WHERE agent_id = ?", (f"space:{space}",))
        return sorted(str(t) for (t,) in rows)


def test_the_only_members_lost_space_restores_into_a_new_home_with_its_recovery_key(
    lost: Lost, sqld: SqldServer
) -> None:
    code, out, err = _recover(lost, sqld, lost.key)
    assert code == 0, err
    assert '"unlocked_with": "recovery-key"' in out and '"role": "writer"' in out
    assert _space_texts(lost.fresh.home, lost.space) == sorted(ALICES)
    best = lost.fresh.json("retrieve", "staging database region")["results"][0]
    assert best["text"] == ALICES[1]
    assert (best["explanation"]["space"], best["explanation"]["written_by"]) == (
        lost.space,
        "alice",
    )
    writes = lost.fresh.json("spaces", "show", lost.space, "--by", "alice")["writes"]
    assert sorted(w["text"] for w in writes) == sorted(ALICES)
    # The new device is a writer on the signed roster: what it writes every member accepts.
    lost.fresh.json(
        "store", "--text", "The new laptop keeps the space going", "--space", lost.space
    )
    assert lost.fresh.json("spaces", "sync", lost.space)["spaces"][0]["pushed"]["pushed"]
    members = lost.fresh.json("spaces", "members", lost.space)["members"]
    assert [(m["member"], m["role"], m["current"]) for m in members] == [
        ("alice", "writer", False),
        ("alice", "writer", True),
    ]
    checked = lost.fresh.json("sync", "check", "--space", lost.space, "--read-data")
    assert checked["exit_code"] == 0 and checked["decrypted"] >= len(ALICES) + 1
    assert lost.key.replace("-", "") not in "".join(lost.fresh.printed).replace("-", "")


def test_a_wrong_recovery_key_is_refused_and_nothing_is_written(
    lost: Lost, sqld: SqldServer, client: HranaClient
) -> None:
    roster = client.execute("SELECT count(*) FROM roster").rows[0][0]
    wrong = crypto.format_recovery_key(crypto.generate_recovery_key())
    code, out, err = lost.fresh(
        "restore", "--space", lost.space, "--url", sqld.url, "--stdin", stdin=wrong + "\n"
    )
    assert code == 24 and out == "" and "Traceback" not in err
    assert f"no vault of space {lost.space!r} that this recovery key opens" in err
    assert len(err.strip().splitlines()) == 1
    assert not lost.fresh.home.exists()
    assert client.execute("SELECT count(*) FROM roster").rows[0][0] == roster
    code, _, err = lost.fresh(
        "restore", "--space", lost.space, "--url", sqld.url, "--stdin", stdin="not a key\n"
    )
    assert code != 0 and "Traceback" not in err and not lost.fresh.home.exists()


def test_another_vaults_rows_substituted_by_the_server_are_refused(
    lost: Lost, sqld: SqldServer, client: HranaClient, tmp_path: Path
) -> None:
    """The server serves the rows of another space (sealed under that space's own key, on the
    same database) in place of this space's records."""
    other = _other_space(lost, sqld, tmp_path)
    tag = _tag(lost, sqld)
    memories = client.execute(
        "SELECT seq FROM records WHERE agent_tag = ? ORDER BY seq", (tag,)
    ).rows
    donors = client.execute(
        "SELECT envelope FROM records WHERE agent_tag = ? ORDER BY seq", (other,)
    ).rows
    for (seq,), (envelope,) in zip(memories, donors, strict=False):
        client.execute(
            "UPDATE records SET envelope = ? WHERE agent_tag = ? AND seq = ?",
            (envelope, tag, seq),
        )
    code, _, err = _recover(lost, sqld, lost.key)
    assert code == 48 and "fails authentication" in err and "Traceback" not in err, err
    assert not lost.fresh.home.exists()  # refused before anything was written


def _other_space(lost: Lost, sqld: SqldServer, tmp_path: Path) -> bytes:
    """A second space Bob shares on the same database: its vault's tag."""
    bob = Cli(lost.fresh.capsys, tmp_path / "bob", "bob")
    name = space_name()
    bob.json("spaces", "create", name)
    bob.json("store", "--text", OTHER, "--space", name)
    bob.json("spaces", "share", name, "--url", sqld.url)
    with Memory(bob.home, "bob") as mem, vaults.open_engine(mem, name) as engine:
        return engine.require_ready().tag


def _tag(lost: Lost, sqld: SqldServer) -> bytes:
    """This space's vault tag, as the recovery key finds it."""
    from tiermem.sync.devices import find_vault
    from tiermem.sync.vault.hrana import HranaClient as Client

    key = crypto.parse_recovery_key(lost.key)
    with Client(sqld.url, sqld.token, timeout=10.0) as c:
        opened = find_vault.open_with_recovery_key(c.execute, sqld.url, f"space:{lost.space}", key)
    return opened.tag


def test_a_space_with_a_passphrase_restores_with_it_for_reading(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
) -> None:
    """A space shared with a passphrase (through the API): the passphrase restores it into a
    new home; it cannot verify the roster, so the device stays off it and reads only."""
    (alice,) = people(capsys, tmp_path, monkeypatch, sqld, "alice")
    name = space_name()
    alice.json("spaces", "create", name)
    alice.json("store", "--text", ALICES[0], "--space", name)
    with Memory(alice.home, "alice") as mem, vaults.open_engine(mem, name) as engine:
        engine.init(
            sqld.url,
            sqld.token,
            crypto.generate_recovery_key(),
            passphrase=PASSPHRASE,
            new_vault=True,
            member="alice",
        )
        engine.push()
    shutil.rmtree(alice.home)
    fresh = Cli(capsys, tmp_path / "new-home", "alice")
    restored = fresh.json(
        "restore", "--space", name, "--url", sqld.url, "--passphrase", "--stdin",
        stdin=PASSPHRASE + "\n",
    )  # fmt: skip
    assert restored["unlocked_with"] == "passphrase" and restored["role"] == "reader"
    assert _space_texts(fresh.home, name) == [ALICES[0]]
    code, _, err = fresh("store", "--text", "A reader cannot write here", "--space", name)
    assert code == 85 and "Traceback" not in err
