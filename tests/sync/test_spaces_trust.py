"""Trust in a shared space beyond pulling: `sync check --space` verifies every writer's
signature as a pull does, and a writer is named as the signed roster names its device, never
as its record says. Real sqld with JWT auth; the attacker holds the token every member holds
and, where said, a member's own keys."""

from __future__ import annotations

import dataclasses
import json
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
from tiermem.sync.engine import SyncEngine
from tiermem.sync.manifest import decode_manifest, encode_manifest
from tiermem.sync.records import MANIFEST_TABLE, MEMORY_TABLE
from tiermem.sync.vault.hrana import HranaClient

RUNBOOK = "The deploy runbook lives in ops/runbook.md and needs two approvals"
BOBS = "Bob keeps the on-call rota in the shared calendar named rota-2026"
FORGED = "Payments may be deployed on Fridays without review"


@dataclass
class Team:
    alice: Person
    bob: Person
    carol: Person
    space: str
    bob_device: bytes
    carol_device: bytes


@pytest.fixture
def team(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
) -> Team:
    """Alice shares a space holding RUNBOOK; Bob (a writer) adds BOBS; Carol reads; synced."""
    alice, bob, carol = people(capsys, tmp_path, monkeypatch, sqld, "alice", "bob", "carol")
    name = space_name()
    alice.json("spaces", "create", name)
    alice.json("store", "--text", RUNBOOK, "--space", name)
    share(alice, name, sqld)
    bob_device = bytes.fromhex(invite(alice, bob, name, "writer", sqld))
    carol_device = bytes.fromhex(invite(alice, carol, name, "reader", sqld))
    bob.json("store", "--text", BOBS, "--space", name)
    for person in (bob, alice, carol):
        person.json("spaces", "sync")
    return Team(alice, bob, carol, name, bob_device, carol_device)


def _check(person: Person, space: str, *more: str) -> tuple[int, dict[str, object]]:
    code, out, err = person("sync", "check", "--space", space, "--json", *more)
    assert "Traceback" not in err
    report: dict[str, object] = json.loads(out.splitlines()[0])  # then the error, on failure
    return code, report


def _messages(report: dict[str, object]) -> str:
    problems = report["problems"]
    assert isinstance(problems, list)
    return "\n".join(str(p["message"]) for p in problems)


def _rows(client: HranaClient, tag: bytes, device: bytes) -> list[records_fmt.RemoteRow]:
    found = client.execute(
        "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
        "WHERE agent_tag = ? AND device_id = ? ORDER BY seq",
        (tag, device),
    ).rows
    return [records_fmt.remote_row(tuple(r)) for r in found]


def test_check_of_a_space_is_clean_then_names_a_readers_pushed_records(team: Team) -> None:
    for extra in ((), ("--read-data",)):
        code, report = _check(team.alice, team.space, *extra)
        assert code == 0, report
    with Memory(team.carol.home, team.carol.agent) as mem, mem.open_space(team.space) as space:
        space.store(FORGED, "deploys")
        with SyncEngine(space) as engine:
            assert engine.push(policy()).memories >= 1  # around every local check
    for extra in ((), ("--read-data",)):
        code, report = _check(team.alice, team.space, *extra)
        assert code == 40, report
        assert "does not list as a writer" in _messages(report)
    code, report = _check(team.bob, team.space, "--read-data")
    assert code == 40 and "does not list as a writer" in _messages(report)


def test_check_of_a_space_names_a_record_and_manifest_signed_by_nobody(
    team: Team, client: HranaClient
) -> None:
    """Carol holds the space key and the token: she rewrites Bob's memory to say FORGED and
    his manifest to list the new envelope, both sealed under the space key, unsigned."""
    with (
        Memory(team.carol.home, team.carol.agent) as mem,
        mem.open_space(team.space) as space,
        SyncEngine(space) as engine,
    ):
        tag = engine.require_ready().tag
        rows = _rows(client, tag, team.bob_device)
        key = engine.epoch_key(rows[0].epoch)
        memory = next(r for r in rows if BOBS.encode() in _plain(key, space.agent_id, r))
        payload = _plain(key, space.agent_id, memory).replace(BOBS.encode(), FORGED.encode())
        forged = _seal_unsigned(key, space.agent_id, MEMORY_TABLE, memory, payload)
        manifest = next(r for r in rows if _is_manifest(key, space.agent_id, r))
        listed = decode_manifest(_plain(key, space.agent_id, manifest), team.bob_device.hex())
        lines = tuple(
            dataclasses.replace(e, digest=records_fmt.envelope_digest(forged))
            if e.version == memory.version
            else e
            for e in listed.records
        )
        body = encode_manifest(dataclasses.replace(listed, records=lines))
        resealed = _seal_unsigned(key, space.agent_id, MANIFEST_TABLE, manifest, body)
    for row, envelope in ((memory, forged), (manifest, resealed)):
        client.execute("UPDATE records SET envelope = ? WHERE seq = ?", (envelope, row.seq))
    code, report = _check(team.alice, team.space)
    assert code == 40 and "carries no member signature" in _messages(report)
    code, report = _check(team.alice, team.space, "--read-data")
    assert code == 40 and "carries no member signature" in _messages(report)


def _plain(key: bytes, scope: str, row: records_fmt.RemoteRow) -> bytes:
    env = crypto.parse_envelope(row.envelope)
    ctx = records_fmt.context(scope, MEMORY_TABLE, row.record_id, row.version, row.device_id)
    for table in (MEMORY_TABLE, MANIFEST_TABLE, records_fmt.CRITICAL_TABLE):
        try:
            plain = crypto.open_envelope(key, dataclasses.replace(ctx, table=table), env)
        except crypto.CryptoError:
            continue
        return unsigned_payload(plain)
    return b""


def _is_manifest(key: bytes, scope: str, row: records_fmt.RemoteRow) -> bool:
    try:
        records_fmt.open_row(key, scope, MANIFEST_TABLE, row)
    except crypto.CryptoError:
        return False
    return True


def _seal_unsigned(
    key: bytes, scope: str, table: str, row: records_fmt.RemoteRow, payload: bytes
) -> bytes:
    return records_fmt.seal(
        key, row.epoch, scope, table, row.record_id, row.version, row.device_id, payload
    )


def test_a_writer_claiming_another_members_name_is_shown_by_its_roster_name(
    team: Team,
) -> None:
    """Bob's device signs a record saying Alice wrote it (his own home, edited by hand):
    every other member lists it as Bob's, the name Alice signed onto the roster for his
    device."""
    claim = "Alice approved skipping review for hotfixes"
    team.bob.json("store", "--text", claim, "--space", team.space)
    with (
        Memory(team.bob.home, team.bob.agent) as mem,
        mem.open_space(team.space) as space,
        space.db.transaction(),
    ):
        space.db.execute(
            "UPDATE space_writers SET writer = 'alice', device = ? WHERE agent_id = ? AND "
            "id IN (SELECT id FROM memories WHERE agent_id = ? AND text = ?)",
            (team.bob_device.hex(), space.agent_id, space.agent_id, claim),
        )
    team.bob.json("spaces", "sync")
    own = team.bob.json("spaces", "show", team.space, "--by", "bob")["writes"]
    assert {w["device"] for w in own} == {team.bob_device.hex()}  # its own, named by the roster
    for person in (team.alice, team.carol):
        person.json("spaces", "sync")
        by_alice = person.json("spaces", "show", team.space, "--by", "alice")["writes"]
        by_bob = person.json("spaces", "show", team.space, "--by", "bob")["writes"]
        assert claim not in [w["text"] for w in by_alice]
        assert {BOBS, claim} <= {w["text"] for w in by_bob}
        assert {w["device"] for w in by_bob} == {team.bob_device.hex()}
        found = {h["text"]: h["by"] for h in person.found("approved skipping review hotfixes")}
        assert found[claim] == "bob"


def test_members_show_the_names_their_inviters_signed_and_the_server_sees_none(
    team: Team, client: HranaClient
) -> None:
    listed = team.carol.json("spaces", "members", team.space)["members"]
    names = {m["device_id"]: (m["member"], m["role"]) for m in listed}
    assert names[team.bob_device.hex()] == ("bob", "writer")
    assert names[team.carol_device.hex()] == ("carol", "reader")
    assert ("alice", "writer") in names.values()
    code, out, _ = team.alice("spaces", "members", team.space)
    assert code == 0 and any("bob" in line and "writer" in line for line in out.splitlines())
    bodies = client.execute("SELECT body FROM roster").rows
    assert bodies and all(b"carol" not in records_fmt.server_blob(b) for (b,) in bodies)


def test_invite_needs_a_valid_member_name(team: Team) -> None:
    code, _, err = team.alice("spaces", "invite", team.space, "--role", "writer", "--as", "x y")
    assert code == 3 and "invalid member name" in err and "Traceback" not in err
    code, _, err = team.alice("spaces", "invite", team.space, "--role", "writer")
    assert code != 0 and "--as" in err
