"""Rows under an ended key epoch, judged by the signed rotation's position, on a real sqld.

A removed device keeps the old epoch's key and the token every device holds. After its removal
it can seal a memory under the old epoch and write a manifest of its own listing it; a device
restored afterwards has no "learnt of the rotation" moment to refuse it by. The rotation entry
therefore signs the server position up to which the old epoch's rows are legitimate: a restore
and `sync check` refuse every old-epoch row after it (the tail aside), while the rows written
before the rotation, and what the rotating device pushes after it, restore as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.sync.devicekit import first_device, join_with_recovery
from tests.sync.helpers import policy, tag_of
from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_keys import Cli, tm
from tests.sync.test_adversarial_roster import _hide_epoch, engine_at
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.devices import roster_pin, rotation
from tiermem.sync.vault.hrana import HranaClient

__all__ = ["tm"]

TAMPERED = 14
CHECK_TAMPERED = 40


def texts(home: Path, agent_id: str) -> list[str]:
    with Memory(home, agent_id) as mem:
        rows = mem.db.query(
            "SELECT text FROM memories WHERE agent_id = ? ORDER BY text", (mem.agent_id,)
        )
    return [str(r[0]) for r in rows]


def remove(tm: Cli, home: Path, device: str, recovery: bytes) -> None:
    key_text = crypto.format_recovery_key(recovery) + "\n"
    code, _, err = tm(home, "sync", "remove-device", device, "--yes", "--stdin", stdin=key_text)
    assert code == 0, err


def inject(client: HranaClient, home: Path, agent_id: str, tag: bytes, text: str) -> None:
    """The removed device, its own client blind to the rotation (the attacker hides the new
    epoch's wraps from it, then puts them back), seals a memory and its manifest under the old
    epoch and pushes them with the token."""
    last = client.execute("SELECT max(seq) FROM records WHERE agent_tag = ?", (tag,)).rows
    hidden = _hide_epoch(client, tag, 2)
    with engine_at(home, agent_id) as removed:
        removed.mem.store(text, "travel/ferry")
        removed.push(policy())
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
    rows = client.execute(
        "SELECT count(*) FROM records WHERE agent_tag = ? AND epoch = 1 AND seq > ?",
        (tag, last[0][0]),
    ).rows
    assert int(str(rows[0][0])) >= 2  # the memory and its manifest, after the rotation


def restore(tm: Cli, home: Path, sqld: SqldServer, recovery: bytes, *extra: str) -> tuple[int, str]:
    key_text = crypto.format_recovery_key(recovery) + "\n"
    code, out, err = tm(
        home, "--json", "restore", "--url", sqld.url, "--stdin", *extra, stdin=key_text
    )
    return code, out if code == 0 else err


def test_a_removed_device_cannot_inject_old_epoch_rows_that_a_restore_takes(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        with engine_at(tmp_path / "b", agent_id) as phone:
            phone.pull(policy())
            phone.mem.store("the harbour cafe opens at six", "travel/ferry")
            phone.push(policy())
        engine_a.pull(policy())
        tag = tag_of(mem_a)
    remove(tm, tmp_path / "a", lost.device_id, recovery)
    inject(client, tmp_path / "b", agent_id, tag, "INJECTED: the ferry is cancelled, stay home")

    code, err = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == TAMPERED, err
    assert len(err.strip().splitlines()) == 1 and "ended key epoch" in err
    assert recovery.hex() not in err and "INJECTED" not in err

    code, out = restore(tm, tmp_path / "salvaged", sqld, recovery, "--salvage")
    assert code == 0, out
    doc = json.loads(out)
    assert any("ended key epoch" in p for p in map(str, doc["problems"]))
    assert texts(tmp_path / "salvaged", agent_id) == [
        "the ferry leaves at seven on sundays",
        "the harbour cafe opens at six",
    ]

    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == CHECK_TAMPERED, err
    problems = json.loads(out.splitlines()[0])["problems"]
    fenced = [p for p in problems if "ended key epoch" in p["message"]]
    assert len(fenced) >= 2 and all(p["seq"] is not None for p in fenced)
    assert "INJECTED" not in out and recovery.hex() not in out


def test_rows_written_before_the_rotation_and_what_the_rotating_device_had_unpushed_restore(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        join_with_recovery(tmp_path / "c", agent_id, sqld, recovery, "kept tablet")
        with engine_at(tmp_path / "c", agent_id) as tablet:  # not pulled by A: its tail
            tablet.pull(policy())
            tablet.mem.store("the tablet charger is in the blue drawer", "home/things")
            tablet.push(policy())
        mem_a.store("book the return ticket before friday", "travel/ferry")  # not pushed yet
        tag = tag_of(mem_a)
    remove(tm, tmp_path / "a", lost.device_id, recovery)
    old_rows = client.execute(
        "SELECT count(*) FROM records WHERE agent_tag = ? AND epoch = 1", (tag,)
    ).rows
    assert int(str(old_rows[0][0])) > 0
    assert tm(tmp_path / "a", "sync", "push")[0] == 0  # sealed under epoch 2 now
    assert tm(tmp_path / "c", "sync", "now")[0] == 0

    code, out = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == 0, out
    assert json.loads(out)["problems"] == []
    assert texts(tmp_path / "fresh", agent_id) == [
        "book the return ticket before friday",
        "the ferry leaves at seven on sundays",
        "the tablet charger is in the blue drawer",
    ]
    for home in ("a", "c"):
        code, out, err = tm(tmp_path / home, "--json", "sync", "check")
        assert code == 0, out + err
        assert json.loads(out)["notes"] == []


def test_a_push_that_lands_while_the_rotation_is_prepared_is_within_its_position(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    tm: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        join_with_recovery(tmp_path / "c", agent_id, sqld, recovery, "kept tablet")
    read_tail = rotation._unpulled_tail
    pushes: list[int] = []

    def tablet_pushes_meanwhile(*args: Any) -> list[str]:
        tail = read_tail(*args)
        if not pushes:  # the tablet pushes under epoch 1 between the read and the commit
            with engine_at(tmp_path / "c", agent_id) as tablet:
                tablet.mem.store("the spare key is under the third pot", "home/things")
                pushes.append(tablet.push(policy()).records)
        return tail

    monkeypatch.setattr(rotation, "_unpulled_tail", tablet_pushes_meanwhile)
    remove(tm, tmp_path / "a", lost.device_id, recovery)
    assert pushes and pushes[0] > 0
    code, out = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == 0, out
    assert "the spare key is under the third pot" in texts(tmp_path / "fresh", agent_id)
    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == 0, out + err


def test_a_rotation_signed_without_a_position_keeps_the_manifest_check_and_check_says_so(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    tm: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    append = roster_pin.Draft.append

    def as_older_tiermem(self: roster_pin.Draft, fields: dict[str, Any], *rest: Any) -> bytes:
        older = {k: v for k, v in fields.items() if k not in ("upto", "listed")}
        return append(self, older, *rest)

    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        tag = tag_of(mem_a)
    with monkeypatch.context() as m:
        m.setattr(roster_pin.Draft, "append", as_older_tiermem)
        remove(tm, tmp_path / "a", lost.device_id, recovery)
    inject(client, tmp_path / "b", agent_id, tag, "INJECTED: the ferry is cancelled, stay home")

    code, out = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == 0, out  # as before positions: the manifests list the row
    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == 0, out + err
    (note,) = json.loads(out)["notes"]
    assert "epoch 2" in note and "manifests only" in note
    code, out, err = tm(tmp_path / "a", "sync", "check")
    assert "note: the rotation to key epoch 2" in out

    key_text = crypto.format_recovery_key(recovery) + "\n"
    assert tm(tmp_path / "a", "sync", "rotate-key", "--stdin", stdin=key_text)[0] == 0
    inject(client, tmp_path / "b", agent_id, tag, "INJECTED: the ferry sails from pier nine")
    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == CHECK_TAMPERED  # a rotation with a position bounds every older epoch
    problems = json.loads(out.splitlines()[0])["problems"]
    assert any("ended key epoch 1" in p["message"] for p in problems)
