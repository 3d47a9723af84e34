"""Old-epoch rows moved below the rotation's position, on a real sqld with JWT auth.

A removed device keeps the old epoch's key and the token. Its rows pushed after the rotation
lie past the signed position; with the token it can move them (`UPDATE records SET seq`) into
free positions below it, left by pruned rows. The rotation therefore also signs the digests
of the old epoch's manifests and checkpoint parts it found up to its position: a manifest
under the ended epoch that is not among them lists nothing, wherever it sits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sync.devicekit import first_device, join_with_recovery
from tests.sync.helpers import policy, tag_of
from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_keys import Cli, tm
from tests.sync.test_adversarial_roster import engine_at
from tests.sync.test_epoch_position import inject, remove, restore, texts
from tiermem.core import curate
from tiermem.sync import crypto
from tiermem.sync.devices import rotation
from tiermem.sync.vault.hrana import HranaClient

__all__ = ["tm"]

TAMPERED = 14
CHECK_TAMPERED = 40


def free_positions(client: HranaClient, upto: int) -> list[int]:
    """Server positions at or below `upto` that no row holds (pruned rows left them)."""
    taken = {int(str(r[0])) for r in client.execute("SELECT seq FROM records").rows}
    return [seq for seq in range(1, upto + 1) if seq not in taken]


def renumber_below(client: HranaClient, tag: bytes, after: int) -> int:
    """The attacker moves every row of the vault past `after` into free positions up to
    `after`, keeping their order; how many it moved."""
    rows = client.execute(
        "SELECT seq FROM records WHERE agent_tag = ? AND seq > ? ORDER BY seq", (tag, after)
    ).rows
    holes = free_positions(client, after)
    assert len(holes) >= len(rows), (holes, rows)
    for old, new in zip((int(str(r[0])) for r in rows), holes[-len(rows) :], strict=True):
        client.execute("UPDATE records SET seq = ? WHERE seq = ?", (new, old))
    return len(rows)


def last_seq(client: HranaClient, tag: bytes) -> int:
    rows = client.execute("SELECT max(seq) FROM records WHERE agent_tag = ?", (tag,)).rows
    return int(str(rows[0][0]))


def test_old_epoch_rows_renumbered_below_the_rotations_position_are_not_restored(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        memory_id = mem_a.store("the ferry leaves at seven on sundays", "travel/ferry").id
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        with engine_at(tmp_path / "b", agent_id) as phone:
            phone.pull(policy())
            phone.mem.store("the harbour cafe opens at six", "travel/ferry")
            phone.push(policy())
        engine_a.pull(policy())
        for hour in ("eight", "nine", "ten"):  # versions a prune deletes: free positions
            curate.edit(mem_a, memory_id, text=f"the ferry leaves at {hour} on sundays")
            engine_a.push(policy())
        tag = tag_of(mem_a)
    assert tm(tmp_path / "a", "sync", "prune", "--keep", "1", "--days", "0")[0] == 0
    assert tm(tmp_path / "a", "sync", "push")[0] == 0  # a manifest after the checkpoint
    remove(tm, tmp_path / "a", lost.device_id, recovery)
    position = last_seq(client, tag)
    inject(client, tmp_path / "b", agent_id, tag, "INJECTED: the ferry is cancelled, stay home")
    assert renumber_below(client, tag, position) >= 2
    assert last_seq(client, tag) <= position  # nothing past the signed position any more

    code, err = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == TAMPERED, err
    assert len(err.strip().splitlines()) == 1 and "ended key epoch" in err
    assert recovery.hex() not in err and "INJECTED" not in err

    code, out = restore(tm, tmp_path / "salvaged", sqld, recovery, "--salvage")
    assert code == 0, out
    assert any("ended key epoch" in str(p) for p in json.loads(out)["problems"])
    assert texts(tmp_path / "salvaged", agent_id) == [
        "the ferry leaves at ten on sundays",
        "the harbour cafe opens at six",
    ]

    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == CHECK_TAMPERED, out + err
    problems = json.loads(out.splitlines()[0])["problems"]
    assert any("ended key epoch 1" in p["message"] and p["seq"] for p in problems)
    assert "INJECTED" not in out and recovery.hex() not in out


def test_a_rotation_over_the_listing_cap_is_bounded_by_position_and_check_says_so(
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
    with monkeypatch.context() as m:
        m.setattr(rotation, "LISTED_MAX", 0)  # the old epoch holds more manifests than that
        remove(tm, tmp_path / "a", lost.device_id, recovery)
    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == 0, out + err
    (note,) = json.loads(out)["notes"]
    assert "epoch 2 does not name the manifests of epoch 1" in note and "sync prune" in note

    key_text = crypto.format_recovery_key(recovery) + "\n"
    assert tm(tmp_path / "a", "sync", "rotate-key", "--stdin", stdin=key_text)[0] == 0
    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == 0, out + err
    (note,) = json.loads(out)["notes"]  # the new rotation names epoch 2's; epoch 1's stays
    assert "epoch 2 does not name" in note
