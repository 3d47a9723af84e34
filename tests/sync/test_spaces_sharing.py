"""A space shared by three people on a real sqld with JWT auth: its own vault and key, members
invited with a role, every memory labelled with its verified writer, a reader only reads, an
undo reaches everyone, and the server holds no text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sync.spacekit import invite, people, share, space_name
from tests.sync.sqld import SqldServer
from tiermem.sync.vault.hrana import HranaClient

RUNBOOK = "The deploy runbook lives in ops/runbook.md and needs two approvals"
ROTA = "The on-call rota changes every Monday at nine"


def test_three_people_share_a_space_each_memory_names_its_verified_writer(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
    client: HranaClient,
) -> None:
    # names long enough that ciphertext cannot hold one by chance (checked at the end)
    names = ("alice-ward", "bob-okafor", "carol-lindqvist")
    alice, bob, carol = people(capsys, tmp_path, monkeypatch, sqld, *names)
    team = space_name()
    alice.json("spaces", "create", team)
    alice.json("store", "--text", RUNBOOK, "--space", team)
    share(alice, team, sqld)
    bob_device = invite(alice, bob, team, "writer", sqld)
    invite(alice, carol, team, "reader", sqld)
    members = {m["device_id"]: m["role"] for m in alice.json("spaces", "members", team)["members"]}
    assert members[bob_device] == "writer" and sorted(members.values()).count("reader") == 1

    bob.json("spaces", "sync")
    assert bob.found("deploy runbook")[:1] == [{"text": RUNBOOK, "space": team, "by": names[0]}]
    bob.json("store", "--text", ROTA, "--space", team)
    synced = bob.json("spaces", "sync")["spaces"]
    assert synced[0]["role"] == "writer" and synced[0]["pushed"]["memories"] >= 1

    alice.json("spaces", "sync")
    writes = alice.json("spaces", "show", team, "--by", names[1])["writes"]
    assert [(w["text"], w["device"]) for w in writes] == [(ROTA, bob_device)]

    carol.json("spaces", "sync")
    assert carol.found("on-call rota")[:1] == [{"text": ROTA, "space": team, "by": names[1]}]
    code, _, err = carol("store", "--text", "Carol was here", "--space", team)
    assert code == 85 and "read-only" in err

    # An undo of a member's writes reaches every member.
    alice.json("spaces", "undo", team, "--by", names[1])
    alice.json("spaces", "sync")
    carol.json("spaces", "sync")
    assert ROTA not in [h["text"] for h in carol.found("on-call rota")]

    envelopes = b"".join(_every_envelope(client))
    for secret in (RUNBOOK, ROTA, team, *names):
        assert secret.encode() not in envelopes


def _every_envelope(client: HranaClient) -> list[bytes]:
    """Every sealed record on the server, a page at a time (one response has a size limit, and
    the server holds every test's vaults)."""
    out: list[bytes] = []
    last = 0
    while True:
        rows = client.execute(
            "SELECT rowid, envelope FROM records WHERE rowid > ? ORDER BY rowid LIMIT 25", [last]
        ).rows
        if not rows:
            return out
        out += [r[1] for r in rows if isinstance(r[1], bytes)]
        last = int(str(rows[-1][0]))
