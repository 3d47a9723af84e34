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

import pytest

from tests.sync.devicekit import first_device, join_with_recovery
from tests.sync.helpers import policy, tag_of
from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_keys import Cli, tm
from tests.sync.test_adversarial_roster import _hide_epoch, engine_at
from tiermem.core.engine import Memory
from tiermem.sync import crypto
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
    code, out, err = tm(home, "--json", "restore", "--url", sqld.url, "--stdin", *extra,
                        stdin=key_text)
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
