"""Attacks on a shared space, run on a real sqld with JWT auth by someone holding the token
every member holds (and, for some, a member's own keys): a reader's device pushing anyway, a
reader's record re-filed as a writer's, a removed member reading on, a rotation withheld or
rolled back. In none of them does a member accept what it must not, or lose a memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sync.helpers import policy
from tests.sync.spacekit import Person, invite, people, share, space_name
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import DeviceRevoked
from tiermem.sync import crypto
from tiermem.sync import records as records_fmt
from tiermem.sync.crypto.authorship import sign_payload, unsigned_payload
from tiermem.sync.devices import roster_pin
from tiermem.sync.engine import SyncEngine
from tiermem.sync.records import MEMORY_TABLE
from tiermem.sync.vault.hrana import HranaClient

RUNBOOK = "The deploy runbook lives in ops/runbook.md and needs two approvals"
FORGED = "Payments may be deployed on Fridays without review"
AFTER = "The new staging database password sits in the team vault under db-staging"


@dataclass
class Team:
    alice: Person
    bob: Person
    carol: Person
    space: str
    key: str
    """The space's recovery key (alice, its owner, has it)."""
    bob_device: bytes
    carol_device: bytes


@pytest.fixture
def team(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
) -> Team:
    """Alice shares a space holding RUNBOOK; Bob writes, Carol reads; all three synced."""
    alice, bob, carol = people(capsys, tmp_path, monkeypatch, sqld, "alice", "bob", "carol")
    name = space_name()
    alice.json("spaces", "create", name)
    alice.json("store", "--text", RUNBOOK, "--space", name)
    key = share(alice, name, sqld)
    bob_device = bytes.fromhex(invite(alice, bob, name, "writer", sqld))
    carol_device = bytes.fromhex(invite(alice, carol, name, "reader", sqld))
    for person in (bob, carol):
        person.json("spaces", "sync")
    return Team(alice, bob, carol, name, key, bob_device, carol_device)


def _engine(person: Person, space: str) -> tuple[Memory, Memory, SyncEngine]:
    mem = Memory(person.home, person.agent)
    space_mem = mem.open_space(space)
    return mem, space_mem, SyncEngine(space_mem)


def _reader_pushes_anyway(t: Team) -> None:
    """Carol's device writes into the space and pushes, going around every local check."""
    mem, space, engine = _engine(t.carol, t.space)
    with mem, space, engine:
        space.store(FORGED, "deploys")
        assert engine.push(policy()).memories >= 1


def test_a_readers_device_that_pushes_anyway_is_refused_by_every_member(team: Team) -> None:
    _reader_pushes_anyway(team)
    for person in (team.alice, team.bob):
        code, _, err = person("spaces", "sync")
        assert code == 48 and "not signed by a writer" in err
        assert FORGED not in [h["text"] for h in person.found("deployed on Fridays")]
        assert RUNBOOK in [h["text"] for h in person.found("deploy runbook")]


def test_a_readers_record_refiled_as_a_writers_with_the_vault_key_is_refused(
    team: Team, client: HranaClient
) -> None:
    """Carol holds the space key and the token: she re-seals her record as if Bob's device
    wrote it (a valid envelope for Bob's device id), signed with the key she has."""
    _reader_pushes_anyway(team)
    mem, space, engine = _engine(team.carol, team.space)
    with mem, space, engine:
        s = engine.require_ready()
        own_key = roster_pin.signing_key(engine, s)
        rows = client.execute(
            "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
            "WHERE agent_tag = ? AND device_id = ?",
            (s.tag, team.carol_device),
        ).rows
        forged = 0
        for seq, rid, version, epoch, _, envelope in rows:
            assert isinstance(rid, bytes) and isinstance(envelope, bytes)
            row = records_fmt.RemoteRow(
                int(str(seq)), rid, str(version), int(str(epoch)), team.carol_device, envelope
            )
            key = engine.epoch_key(row.epoch)
            try:
                plain = records_fmt.open_row(key, space.agent_id, MEMORY_TABLE, row)
            except crypto.TamperedData:
                continue  # a manifest or the critical state: the memory is what matters

            def as_bob(ctx: crypto.RecordContext, payload: bytes) -> bytes:
                return sign_payload(own_key, ctx, "bob", payload)

            refiled = records_fmt.seal(
                key, row.epoch, space.agent_id, MEMORY_TABLE, rid, row.version,
                team.bob_device, unsigned_payload(plain), as_bob,
            )  # fmt: skip
            client.execute(
                "UPDATE records SET device_id = ?, envelope = ? WHERE seq = ?",
                (team.bob_device, refiled, row.seq),
            )
            forged += 1
        assert forged >= 1
    code, _, err = team.alice("spaces", "sync")
    assert code == 48 and "refused" in err
    assert FORGED not in [h["text"] for h in team.alice.found("deployed on Fridays")]
    assert team.alice.json("spaces", "show", team.space, "--by", "bob")["writes"] == []


def test_a_removed_member_keeps_the_token_and_pulls_but_reads_nothing_new(
    team: Team, client: HranaClient
) -> None:
    code, _, err = team.alice(
        "spaces", "remove-member", team.space, team.carol_device.hex()[:12], "--yes", "--stdin",
        stdin=team.key + "\n",
    )  # fmt: skip
    assert code == 0, err
    team.alice.json("store", "--text", AFTER, "--space", team.space)
    team.alice.json("spaces", "sync")
    team.bob.json("spaces", "sync")
    assert AFTER in [h["text"] for h in team.bob.found("staging database password")]

    code, _, err = team.carol("spaces", "sync")
    assert code == 54 and "removed" in err
    assert AFTER not in [h["text"] for h in team.carol.found("staging database password")]
    mem, space, engine = _engine(team.carol, team.space)
    with mem, space, engine:
        s = engine.require_ready()
        old_key = engine.epoch_key(s.epoch)
        newer = client.execute(
            "SELECT envelope FROM records WHERE agent_tag = ? AND epoch > ?", (s.tag, s.epoch)
        ).rows
        assert newer  # what alice stored after the removal is there, under the new epoch
        for (envelope,) in newer:
            assert isinstance(envelope, bytes)
            env = crypto.parse_envelope(envelope)
            with pytest.raises(crypto.CryptoError):
                crypto.open_envelope(
                    old_key, crypto.RecordContext(space.agent_id, MEMORY_TABLE, b"", "", b""), env
                )
        with pytest.raises(DeviceRevoked):
            engine.epoch_key(s.epoch + 1)


def test_a_withheld_rotation_stops_a_writer_from_sealing_under_the_old_key(
    team: Team, client: HranaClient
) -> None:
    team.alice(
        "spaces", "remove-member", team.space, team.carol_device.hex()[:12], "--yes", "--stdin",
        stdin=team.key + "\n",
    )  # fmt: skip
    mem, space, engine = _engine(team.bob, team.space)
    with mem, space, engine:
        tag, old_epoch = engine.require_ready().tag, engine.require_ready().epoch
    client.execute("DELETE FROM key_wraps WHERE agent_tag = ? AND epoch > ?", (tag, old_epoch))
    team.bob.json("store", "--text", "Bob's note after the rotation", "--space", team.space)
    code, _, err = team.bob("spaces", "sync")
    assert code == 61, err
    rows = client.execute(
        "SELECT count(*) FROM records WHERE agent_tag = ? AND device_id = ? AND epoch <= ?",
        (tag, team.bob_device, old_epoch),
    ).rows
    assert rows == ((0,),)  # nothing of bob's was sealed under the key the removed reader has


def test_a_rolled_back_roster_is_refused_by_a_member_that_saw_the_newer_one(
    team: Team, client: HranaClient
) -> None:
    mem, space, engine = _engine(team.bob, team.space)
    with mem, space, engine:
        tag = engine.require_ready().tag
    seen = client.execute("SELECT max(seq) FROM roster WHERE agent_tag = ?", (tag,)).rows
    team.alice(
        "spaces", "remove-member", team.space, team.carol_device.hex()[:12], "--yes", "--stdin",
        stdin=team.key + "\n",
    )  # fmt: skip
    team.bob.json("spaces", "sync")  # bob sees the removal and the rotation
    client.execute("DELETE FROM roster WHERE agent_tag = ? AND seq > ?", (tag, seen[0][0]))
    code, _, err = team.bob("spaces", "sync")
    assert code == 60 and "roster" in err
