"""Two members edit one memory of a shared space while apart: neither edit is lost. The merge
of device sync runs on the space's vault: one value is kept, the other is a conflict
`memory/<id>` that every member lists (`sync conflicts --space`) and a writer resolves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sync.spacekit import Person, invite, people, share, space_name
from tests.sync.sqld import SqldServer
from tiermem.core import curate
from tiermem.core.engine import Memory

RUNBOOK = "The deploy runbook lives in ops/runbook.md"
ALICE_EDIT = "The deploy runbook lives in ops/runbook.md and needs two approvals"
BOB_EDIT = "The deploy runbook moved to the wiki page Deploys"


def _edit(person: Person, space: str, memory_id: str, text: str) -> None:
    """A member's edit of the space's memory on their own device."""
    with Memory(person.home, person.agent) as mem, mem.open_space(space) as scoped:
        curate.edit(scoped, memory_id, text=text)


def _text(person: Person, space: str, memory_id: str) -> str:
    with Memory(person.home, person.agent) as mem, mem.open_space(space) as scoped:
        return scoped.get(memory_id).text


def test_two_members_editing_one_space_memory_keep_both_edits(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
) -> None:
    alice, bob, carol = people(capsys, tmp_path, monkeypatch, sqld, "alice", "bob", "carol")
    team = space_name()
    alice.json("spaces", "create", team)
    memory_id = alice.json("store", "--text", RUNBOOK, "--space", team)["id"]
    share(alice, team, sqld)
    invite(alice, bob, team, "writer", sqld)
    invite(alice, carol, team, "reader", sqld)
    bob.json("spaces", "sync")

    _edit(alice, team, memory_id, ALICE_EDIT)
    _edit(bob, team, memory_id, BOB_EDIT)
    alice.json("spaces", "sync")
    bob.json("spaces", "sync")
    alice.json("spaces", "sync")
    carol.json("spaces", "sync")

    kept = {_text(p, team, memory_id) for p in (alice, bob, carol)}
    assert len(kept) == 1 and kept <= {ALICE_EDIT, BOB_EDIT}  # every member converged
    for person in (alice, bob, carol):
        found = person.json("sync", "conflicts", "--space", team)["conflicts"]
        assert [c["item"] for c in found] == [f"memory/{memory_id}"]
        both = json.dumps([found[0]["kept_value"], found[0]["lost_value"]])
        assert ALICE_EDIT in both and BOB_EDIT in both

    lost = ({ALICE_EDIT, BOB_EDIT} - kept).pop()
    conflict = alice.json("sync", "conflicts", "--space", team)["conflicts"][0]["id"]
    code, _, err = carol("sync", "resolve", conflict, "--take", "lost", "--space", team)
    assert code == 85, err  # a reader does not change the space
    alice.json("sync", "resolve", conflict, "--take", "lost", "--space", team)
    alice.json("spaces", "sync")
    bob.json("spaces", "sync")
    assert _text(alice, team, memory_id) == lost == _text(bob, team, memory_id)
