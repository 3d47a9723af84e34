"""A shared space's vault restored onto a member's device (`restore --space`, and `spaces join`
for a space with history): every writer's signature checked as a pull checks it, writers named
by the space's roster, usable and searchable while it streams, resumable after a SIGKILL. Real
sqld with JWT auth, the real CLI; the attacker holds the token every member holds and, where
said, a reader's copy of the space key."""

from __future__ import annotations

import dataclasses
import json
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import policy
from tests.sync.spacekit import Person, invite, people, share, space_name
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound
from tiermem.core.warm import NewFact
from tiermem.sync import crypto
from tiermem.sync import records as records_fmt
from tiermem.sync.crypto.authorship import unsigned_payload
from tiermem.sync.devices.pairing_approval import Approval, answer_pairing
from tiermem.sync.engine import SyncEngine
from tiermem.sync.manifest import Manifest, ManifestEntry, decode_manifest, encode_manifest
from tiermem.sync.records import MANIFEST_TABLE, MEMORY_TABLE, RemoteRow
from tiermem.sync.spaces import vaults
from tiermem.sync.vault.hrana import HranaClient

RUNBOOK = "The deploy runbook lives in ops/runbook.md and needs two approvals"
BOBS = (
    "Bob keeps the on-call rota in the shared calendar named rota-2026",
    "Bob moved the staging database to the eu-west region in October",
    "Bob's pager escalation goes to the platform lead after fifteen minutes",
)
FORGED = "Payments may be deployed on Fridays without review"
PATIENCE = 120.0


@dataclass
class Team:
    alice: Person
    bob: Person
    carol: Person
    dave: Person
    space: str
    bob_device: bytes

    @property
    def scope(self) -> str:
        return f"space:{self.space}"


@pytest.fixture
def team(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
) -> Team:
    """Alice shares a space holding RUNBOOK; Bob, a writer whose roster name Alice signs as
    'robert', adds BOBS; Dave reads. Carol has a home of her own and is not a member yet."""
    alice, bob, carol, dave = people(
        capsys, tmp_path, monkeypatch, sqld, "alice", "bob", "carol", "dave"
    )
    name = space_name()
    alice.json("spaces", "create", name)
    alice.json("store", "--text", RUNBOOK, "--space", name)
    share(alice, name, sqld)
    bob_device = bytes.fromhex(invite(alice, bob, name, "writer", sqld, name="robert"))
    invite(alice, dave, name, "reader", sqld)
    for text in BOBS:
        bob.json("store", "--text", text, "--space", name)
    bob.json("spaces", "sync")
    alice.json("spaces", "sync")
    return Team(alice, bob, carol, dave, name, bob_device)


def _space_rows(person: Person, scope: str) -> list[str]:
    with Memory(person.home, person.agent) as mem:
        return [
            str(t)
            for (t,) in mem.db.query("SELECT text FROM memories WHERE agent_id = ?", (scope,))
        ]


def test_a_new_member_restores_the_space_with_every_writer_named_by_the_roster(
    team: Team, sqld: SqldServer
) -> None:
    invite(team.alice, team.carol, team.space, "writer", sqld)
    result = team.carol.json("restore", "--space", team.space)
    assert result["space"] == team.space and result["unlocked_with"] == "device-key"
    assert result["memories"] == 1 + len(BOBS)
    assert sorted(_space_rows(team.carol, team.scope)) == sorted([RUNBOOK, *BOBS])
    found = team.carol.found("on-call rota shared calendar")
    assert {"text": BOBS[0], "space": team.space, "by": "robert"} in found
    by_robert = team.carol.json("spaces", "show", team.space, "--by", "robert")["writes"]
    assert sorted(w["text"] for w in by_robert) == sorted(BOBS)
    assert {w["device"] for w in by_robert} == {team.bob_device.hex()}
    by_alice = team.carol.json("spaces", "show", team.space, "--by", "alice")["writes"]
    assert [w["text"] for w in by_alice] == [RUNBOOK]
    code, out, _ = team.carol("restore", "--space", team.space)  # the text report
    assert code == 0 and f"restored space {team.space!r}" in out
    # A pull continues where the restore stopped: only what was written since arrives.
    later = "Bob rotated the deploy keys after the restore"
    team.bob.json("store", "--text", later, "--space", team.space)
    team.bob.json("spaces", "sync")
    pulled = team.carol.json("spaces", "sync", team.space)["spaces"][0]["pulled"]
    assert pulled["memories"] == 1
    assert {"text": later, "space": team.space, "by": "robert"} in team.carol.found(
        "rotated deploy keys"
    )


def test_restore_of_a_space_is_refused_to_a_home_that_did_not_join_it(team: Team) -> None:
    team.carol.json("spaces", "create", team.space)  # a local space of the same name
    code, _, err = team.carol("restore", "--space", team.space)
    assert code == 22 and "not a member of space" in err and "Traceback" not in err
    code, _, err = team.carol("restore", "--space", team.space, "--passphrase")
    assert code == 3 and "--passphrase" in err
    code, _, err = team.carol("restore", "--space", "no-such-space")
    assert code == 4 and "Traceback" not in err


def test_a_readers_pushed_record_is_refused_on_restore_as_on_pull(
    team: Team, sqld: SqldServer
) -> None:
    with Memory(team.dave.home, team.dave.agent) as mem, mem.open_space(team.space) as space:
        space.store(FORGED, "deploys")
        with SyncEngine(space) as engine:
            assert engine.push(policy()).memories >= 1
    invite(team.alice, team.carol, team.space, "writer", sqld)
    code, _, err = team.carol("restore", "--space", team.space)
    assert code == 48 and "Traceback" not in err
    assert "does not list as a writer" in err and "records refused" in err
    assert _space_rows(team.carol, team.scope) == []  # refused before anything was written
    code, _, _ = team.alice("spaces", "sync")  # a pull refuses the same record
    assert code == 48
    assert FORGED not in _space_rows(team.alice, team.scope)
    salvaged = team.carol.json("restore", "--space", team.space, "--salvage")
    assert any("does not list as a writer" in p["message"] for p in salvaged["problems"])
    assert sorted(_space_rows(team.carol, team.scope)) == sorted([RUNBOOK, *BOBS])


def test_a_record_and_manifest_the_server_seals_unsigned_are_refused_on_restore(
    team: Team, sqld: SqldServer, client: HranaClient
) -> None:
    """With the token and the space key (Dave's, a reader's), the server inserts a newer
    version of Bob's memory saying FORGED and a manifest of Bob's device listing it: both
    sealed under the space key, neither signed."""
    _forge_as_bob(team, client)
    invite(team.alice, team.carol, team.space, "writer", sqld)
    code, _, err = team.carol("restore", "--space", team.space)
    assert code == 48 and "carries no member signature" in err and "Traceback" not in err
    assert FORGED not in _space_rows(team.carol, team.scope)
    code, _, _ = team.alice("spaces", "sync")
    assert code == 48
    assert FORGED not in _space_rows(team.alice, team.scope)


def _forge_as_bob(team: Team, client: HranaClient) -> None:
    with (
        Memory(team.dave.home, team.dave.agent) as mem,
        mem.open_space(team.space) as space,
        SyncEngine(space) as engine,
    ):
        tag = engine.require_ready().tag
        rows = [
            records_fmt.remote_row(tuple(r))
            for r in client.execute(
                "SELECT seq, record_id, version, epoch, device_id, envelope FROM records "
                "WHERE agent_tag = ? AND device_id = ? ORDER BY seq",
                (tag, team.bob_device),
            ).rows
        ]
        key, scope = engine.epoch_key(rows[0].epoch), space.agent_id
        memory = next(r for r in rows if BOBS[0].encode() in _plain(key, scope, MEMORY_TABLE, r))
        manifests = [r for r in rows if _plain(key, scope, MANIFEST_TABLE, r)]
        newest = decode_manifest(_plain(key, scope, MANIFEST_TABLE, manifests[-1]), None)
        millis = int(max(r.version for r in rows).split(".")[0]) + 1000
        version = f"{millis:018d}.000000.{team.bob_device.hex()}"
        payload = _plain(key, scope, MEMORY_TABLE, memory).replace(
            BOBS[0].encode(), FORGED.encode()
        )
        forged = _seal(
            key, scope, MEMORY_TABLE, dataclasses.replace(memory, version=version), payload
        )
        line = ManifestEntry(
            MEMORY_TABLE, memory.record_id.hex(), version, records_fmt.envelope_digest(forged)
        )
        listing = Manifest(team.bob_device.hex(), newest.n + 1, (line,), newest.seen)
        manifest_row = dataclasses.replace(manifests[-1], version=version)
        sealed = _seal(key, scope, MANIFEST_TABLE, manifest_row, encode_manifest(listing))
    for row, envelope in ((memory, forged), (manifest_row, sealed)):
        client.execute(
            "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (tag, row.record_id, version, row.epoch, row.device_id, envelope),
        )


def _plain(key: bytes, scope: str, table: str, row: RemoteRow) -> bytes:
    """The payload of `row` opened as a record of `table` (b'' when it is not one)."""
    try:
        plain = crypto.open_envelope(
            key,
            records_fmt.context(scope, table, row.record_id, row.version, row.device_id),
            crypto.parse_envelope(row.envelope),
        )
    except crypto.CryptoError:
        return b""
    return unsigned_payload(plain)


def _seal(key: bytes, scope: str, table: str, row: RemoteRow, payload: bytes) -> bytes:
    return records_fmt.seal(
        key, row.epoch, scope, table, row.record_id, row.version, row.device_id, payload
    )


# -- killed mid-restore --------------------------------------------------------------------

MANY = 60


def test_a_space_restore_killed_mid_stream_resumes_whole_with_every_writer(
    team: Team, sqld: SqldServer, fault_proxy: FaultProxy
) -> None:
    """Carol's device reaches the server through a slow link; her restore is SIGKILLed once
    some memories are searchable; Bob pushes again; the rerun finishes, every writer named."""
    with Memory(team.bob.home, team.bob.agent) as mem, mem.open_space(team.space) as space:
        space.store_many(
            NewFact(
                text=f"incident {i} was traced to rack {i % 7} and cable {i * 31}", category="ops"
            )
            for i in range(MANY)
        )
        with SyncEngine(space) as engine:
            assert engine.push(policy()).memories >= MANY
    invite(team.alice, team.carol, team.space, "writer", sqld, url=fault_proxy.url)
    fault_proxy.latency = 0.2
    command = [
        sys.executable, "-m", "tiermem.tui", "--home", str(team.carol.home), "--agent-id",
        team.carol.agent, "restore", "--space", team.space, "--page-rows", "5",
    ]  # fmt: skip
    log = team.carol.home.parent / "carol-restore.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            searchable = _wait_for_searchable(team, proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=PATIENCE)
    assert searchable, log.read_text()
    assert _pending(team), "the restore finished before it was killed"
    partial = team.carol.found("incident traced rack cable")
    assert partial and all(h["by"] == "robert" and h["space"] == team.space for h in partial)
    fault_proxy.latency = 0.0
    later = "Bob replaced cable 7 in rack 3 after the incident review"
    team.bob.json("store", "--text", later, "--space", team.space)
    team.bob.json("spaces", "sync")
    result = team.carol.json("restore", "--space", team.space)
    assert result["resumed"] is True and not _pending(team)
    texts = _space_rows(team.carol, team.scope)
    assert len(texts) == len(set(texts)) == 1 + len(BOBS) + MANY + 1 and later in texts
    with Memory(team.carol.home, team.carol.agent) as mem:
        writers = {
            str(text): str(writer)
            for text, writer in mem.db.query(
                "SELECT m.text, w.writer FROM memories m LEFT JOIN space_writers w "
                "ON w.agent_id = m.agent_id AND w.id = m.id WHERE m.agent_id = ?",
                (team.scope,),
            )
        }
    assert writers.pop(RUNBOOK) == "alice"
    assert set(writers.values()) == {"robert"}


def _wait_for_searchable(team: Team, proc: subprocess.Popen[bytes]) -> bool:
    """Until some of the space's memories are in Carol's `memories` (the restore still
    running); False when the process ended first or nothing came in time."""
    deadline = time.monotonic() + PATIENCE
    db = team.carol.home / "tiermem.db"
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
                try:
                    n = con.execute(
                        "SELECT count(*) FROM memories WHERE agent_id = ?", (team.scope,)
                    ).fetchone()[0]
                except sqlite3.OperationalError:
                    n = 0
            if n:
                return True
        time.sleep(0.01)
    return False


def _pending(team: Team) -> bool:
    with Memory(team.carol.home, team.carol.agent) as mem:
        return (
            mem.db.query_one("SELECT 1 FROM restore_progress WHERE agent_id = ?", (team.scope,))
            is not None
        )


# -- joining ---------------------------------------------------------------------------------


def test_joining_a_space_with_history_restores_it(team: Team, sqld: SqldServer) -> None:
    """`spaces join` in its own process (Carol's); Alice invites her meanwhile."""
    command = [
        sys.executable, "-m", "tiermem.tui", "--home", str(team.carol.home), "--agent-id",
        team.carol.agent, "--json", "spaces", "join", team.space, "--url", sqld.url,
        "--name", "carol-laptop",
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with (
            Memory(team.alice.home, team.alice.agent) as own,
            vaults.open_engine(own, team.space) as engine,
        ):
            approval = _answer(engine, proc)
            approval.approve(approval.wait_code())
        out, err = proc.communicate(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, err.decode()
    joined = json.loads(out)
    assert joined["role"] == "reader" and joined["restored"]["result"]["memories"] == 1 + len(BOBS)
    found = team.carol.found("staging database region")
    assert {"text": BOBS[1], "space": team.space, "by": "robert"} in found


def _answer(engine: SyncEngine, proc: subprocess.Popen[bytes]) -> Approval:
    """Alice's answer to Carol's join request, once it is posted."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            return answer_pairing(engine, role="reader", name="carol")
        except NotFound:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)
