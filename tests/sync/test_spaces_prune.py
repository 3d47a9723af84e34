"""A shared space's prune records (the horizon and the checkpoint's parts) are signed by the
writer whose device prunes, and checked like every other record of the space: a restore and
`sync check --space` refuse one that a reader's device wrote, or that the server sealed with a
reader's copy of the space key. Real sqld with JWT auth, the real CLI where there is one (a
space's prune runs on the space's engine: the daemon's and the API's)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sync.helpers import policy
from tests.sync.spacekit import Person, invite, people, share, space_name
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync import records as records_fmt
from tiermem.sync.crypto.authorship import unsigned_payload
from tiermem.sync.devices import epochs
from tiermem.sync.records import PRUNE_TABLE, RemoteRow
from tiermem.sync.restore import prune
from tiermem.sync.spaces import vaults
from tiermem.sync.vault.hrana import HranaClient

TEXTS = (
    "The deploy runbook lives in ops/runbook.md and needs two approvals",
    "The staging database moved to the eu-west region in October",
)


@dataclass
class Team:
    alice: Person
    carol: Person
    dave: Person
    space: str


@pytest.fixture
def team(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
) -> Team:
    """Alice shares a space, edits a memory so there is an old version to prune, and invites
    Dave as a reader; Carol has a home of her own."""
    alice, carol, dave = people(capsys, tmp_path, monkeypatch, sqld, "alice", "carol", "dave")
    name = space_name()
    alice.json("spaces", "create", name)
    for text in TEXTS:
        alice.json("store", "--text", text, "--space", name)
    share(alice, name, sqld)
    invite(alice, dave, name, "reader", sqld)
    dave.json("spaces", "sync")
    return Team(alice, carol, dave, name)


def _prune(person: Person, space: str) -> int:
    """A prune of the space's vault from `person`'s device: the number of its checkpoint."""
    with Memory(person.home, person.agent) as mem, vaults.open_engine(mem, space) as engine:
        return prune(engine, 1, policy=policy()).checkpoint


def test_a_writers_prune_is_signed_and_a_new_member_restores_after_it(
    team: Team, sqld: SqldServer
) -> None:
    assert _prune(team.alice, team.space) == 1
    code, _, err = team.alice("sync", "check", "--space", team.space, "--read-data")
    assert code == 0, err
    team.alice.json("store", "--text", "Releases are tagged on Tuesdays", "--space", team.space)
    team.alice.json("spaces", "sync")
    assert _prune(team.alice, team.space) == 2  # the next prune builds on the signed one
    invite(team.alice, team.carol, team.space, "writer", sqld)
    restored = team.carol.json("restore", "--space", team.space)
    assert restored["memories"] == len(TEXTS) + 1


def test_a_readers_prune_is_refused_by_restore_and_check(team: Team, sqld: SqldServer) -> None:
    _prune(team.dave, team.space)  # its device holds the token and the space key
    code, _, err = team.alice("sync", "check", "--space", team.space)
    assert code == 40 and "Traceback" not in err
    invite(team.alice, team.carol, team.space, "writer", sqld)
    code, _, err = team.carol("restore", "--space", team.space)
    assert code == 48 and "prune record" in err and "Traceback" not in err
    assert _texts(team.carol, team.space) == []


def test_a_prune_record_the_server_seals_unsigned_is_refused(
    team: Team, sqld: SqldServer, client: HranaClient
) -> None:
    """With the token and Dave's copy of the space key, the server writes a newer version of
    Alice's prune record: her own checkpoint, sealed again without her signature."""
    _prune(team.alice, team.space)
    _forge_prune(team, client)
    code, out, err = team.alice("--json", "sync", "check", "--space", team.space)
    assert code == 40 and "no member signature" in out, out + err
    invite(team.alice, team.carol, team.space, "writer", sqld)
    code, _, err = team.carol("restore", "--space", team.space)
    assert code == 48 and "no member signature" in err and "Traceback" not in err
    assert _texts(team.carol, team.space) == []


def _forge_prune(team: Team, client: HranaClient) -> None:
    with (
        Memory(team.dave.home, team.dave.agent) as mem,
        mem.open_space(team.space) as space,
        vaults.open_engine(mem, team.space) as engine,
    ):
        tag = engine.require_ready().tag
        rid = records_fmt.record_id(epochs.id_key(engine), PRUNE_TABLE, records_fmt.PRUNE_KEY)
        raw = client.execute(
            "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
            "WHERE agent_tag = ? AND record_id = ? ORDER BY seq DESC LIMIT 1",
            (tag, rid),
        ).rows[0]
        row = records_fmt.remote_row(tuple(raw))
        key, scope = engine.epoch_key(row.epoch), space.agent_id
        plain = crypto.open_envelope(
            key,
            records_fmt.context(scope, PRUNE_TABLE, rid, row.version, row.device_id),
            crypto.parse_envelope(row.envelope),
        )
        millis = int(row.version.split(".")[0]) + 1000
        version = f"{millis:018d}.000000.{row.device_id.hex()}"
        forged = dataclasses.replace(row, version=version)
        envelope = _seal(key, scope, forged, unsigned_payload(plain))
    client.execute(
        "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (tag, rid, version, row.epoch, row.device_id, envelope),
    )


def _seal(key: bytes, scope: str, row: RemoteRow, payload: bytes) -> bytes:
    return records_fmt.seal(
        key, row.epoch, scope, PRUNE_TABLE, row.record_id, row.version, row.device_id, payload
    )


def _texts(person: Person, space: str) -> list[str]:
    with Memory(person.home, person.agent) as mem:
        rows = mem.db.query("SELECT text FROM memories WHERE agent_id = ?", (f"space:{space}",))
        return [str(t) for (t,) in rows]
