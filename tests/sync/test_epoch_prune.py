"""A prune after a rotation, on a real sqld with JWT auth.

A prune compacts the manifests into a checkpoint and deletes them. It must judge rows as a
restore does: a manifest a removed device wrote under the old epoch after its removal is not
compacted (its lines never reach the checkpoint, so a restore still refuses the injection
clearly instead of reporting a listed record as deleted). And a device that has not learnt of
a rotation yet must not write a checkpoint under the ended epoch past its position, which a
restore and `sync check` would take for an injection."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.sync.devicekit import first_device, join_with_recovery
from tests.sync.helpers import policy, tag_of
from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_keys import Cli, tm
from tests.sync.test_adversarial_roster import engine_at
from tests.sync.test_daemon import Running, eventually
from tests.sync.test_epoch_position import inject, remove, restore, texts
from tiermem.sync import crypto
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.restore.checkpoint import prune_record_id
from tiermem.sync.vault.hrana import HranaClient

__all__ = ["tm"]

prunemod = importlib.import_module("tiermem.sync.restore.prune")

TAMPERED = 14
CHECK_TAMPERED = 40
ROTATION_CONFLICT = 55


def checkpoint_epochs(client: HranaClient, tag: bytes, prune_rid: bytes) -> set[int]:
    rows = client.execute(
        "SELECT epoch FROM records WHERE agent_tag = ? AND record_id = ?", (tag, prune_rid)
    ).rows
    return {int(str(r[0])) for r in rows}


def missing(restore_json: str) -> set[str]:
    """The records a salvaging restore reports as gone (its deletions)."""
    problems = json.loads(restore_json)["problems"]
    return {p["record_id"] for p in problems if p["kind"] == "deletion"}


def test_a_prune_after_an_injection_leaves_it_out_and_the_restore_still_refuses_it_clearly(
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
    code, out = restore(tm, tmp_path / "before", sqld, recovery, "--salvage")
    assert code == 0, out
    missing_before = missing(out)

    code, out, err = tm(tmp_path / "a", "--json", "sync", "prune")
    assert code == CHECK_TAMPERED, err
    report, failure = map(json.loads, out.splitlines())
    assert report["checkpoint"] >= 1 and report["compacted"] >= 2
    assert report["damaged"] and all("ended key epoch 1" in d for d in report["damaged"])
    assert failure["exit_code"] == CHECK_TAMPERED and "sync check" in failure["error"]
    assert "INJECTED" not in out + err and recovery.hex() not in out + err

    code, err = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == TAMPERED, err  # not 46: the checkpoint does not list the injected memory
    assert len(err.strip().splitlines()) == 1 and "ended key epoch" in err

    code, out = restore(tm, tmp_path / "salvaged", sqld, recovery, "--salvage")
    assert code == 0, out
    assert missing(out) == missing_before  # the prune made no injected line a deletion
    assert texts(tmp_path / "salvaged", agent_id) == [
        "the ferry leaves at seven on sundays",
        "the harbour cafe opens at six",
    ]
    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == CHECK_TAMPERED, out + err
    problems = json.loads(out.splitlines()[0])["problems"]
    assert all(p["kind"] == "tampered" for p in problems)


def test_a_device_that_missed_the_rotation_prunes_under_the_new_epoch(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "kept laptop")
        lost = join_with_recovery(tmp_path / "c", agent_id, sqld, recovery, "lost phone")
        with engine_at(tmp_path / "b", agent_id) as laptop:
            laptop.pull(policy())
            laptop.mem.store("the harbour cafe opens at six", "travel/ferry")
            laptop.push(policy())
            prune_rid = prune_record_id(KeyRing.of_engine(laptop))
        tag = tag_of(mem_a)
    remove(tm, tmp_path / "a", lost.device_id, recovery)  # the laptop has not pulled since

    code, out, err = tm(tmp_path / "b", "--json", "sync", "prune")
    assert code == 0, err
    assert json.loads(out)["checkpoint"] == 1 and json.loads(out)["damaged"] == []
    assert checkpoint_epochs(client, tag, prune_rid) == {2}

    code, out = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == 0, out
    assert json.loads(out)["problems"] == []
    assert texts(tmp_path / "fresh", agent_id) == [
        "the ferry leaves at seven on sundays",
        "the harbour cafe opens at six",
    ]
    for home in ("a", "b"):
        code, out, err = tm(tmp_path / home, "--json", "sync", "check")
        assert code == 0, out + err


def test_a_rotation_landing_while_a_prune_is_prepared_makes_it_seal_again(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    tm: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "kept laptop")
        lost = join_with_recovery(tmp_path / "c", agent_id, sqld, recovery, "lost phone")
        tag = tag_of(mem_a)
    read_manifests = prunemod._manifests
    rotated: list[int] = []

    def owner_rotates_meanwhile(*args: Any) -> Any:
        found = read_manifests(*args)
        if not rotated:  # between the prune's read and its write
            remove(tm, tmp_path / "a", lost.device_id, recovery)
            rotated.append(1)
        return found

    with engine_at(tmp_path / "b", agent_id) as laptop, monkeypatch.context() as m:
        laptop.pull(policy())
        laptop.mem.store("the harbour cafe opens at six", "travel/ferry")
        laptop.push(policy())
        prune_rid = prune_record_id(KeyRing.of_engine(laptop))
        m.setattr(prunemod, "_manifests", owner_rotates_meanwhile)
        result = prunemod.prune(laptop, policy=policy())
    assert rotated and result.checkpoint == 1 and not result.damaged
    assert checkpoint_epochs(client, tag, prune_rid) == {2}
    code, out = restore(tm, tmp_path / "fresh", sqld, recovery)
    assert code == 0, out
    code, out, err = tm(tmp_path / "a", "--json", "sync", "check")
    assert code == 0, out + err


def test_a_prune_that_every_rotation_overtakes_stops_with_nothing_written(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    client: HranaClient,
    tm: Cli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "kept laptop")
        tag = tag_of(mem_a)
        prune_rid = prune_record_id(KeyRing.of_engine(engine_a))
    read_manifests = prunemod._manifests
    key_text = crypto.format_recovery_key(recovery) + "\n"

    def owner_rotates_every_time(*args: Any) -> Any:
        found = read_manifests(*args)
        assert tm(tmp_path / "a", "sync", "rotate-key", "--stdin", stdin=key_text)[0] == 0
        return found

    monkeypatch.setattr(prunemod, "_manifests", owner_rotates_every_time)
    code, _, err = tm(tmp_path / "b", "sync", "prune")
    assert code == ROTATION_CONFLICT, err
    assert len(err.strip().splitlines()) == 1 and "nothing was pruned" in err
    assert checkpoint_epochs(client, tag, prune_rid) == set()


def test_the_daemons_scheduled_prune_reports_an_injection_as_damage(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient, tm: Cli
) -> None:
    with first_device(tmp_path / "a", agent_id, sqld) as (mem_a, engine_a, recovery):
        mem_a.store("the ferry leaves at seven on sundays", "travel/ferry")
        engine_a.push(policy())
        lost = join_with_recovery(tmp_path / "b", agent_id, sqld, recovery, "lost phone")
        tag = tag_of(mem_a)
    remove(tm, tmp_path / "a", lost.device_id, recovery)
    inject(client, tmp_path / "b", agent_id, tag, "INJECTED: the ferry is cancelled, stay home")
    (tmp_path / "a" / "config.toml").write_text("[sync]\nprune_every_hours = 0.0001\n")
    running = Running(tmp_path / "a", agent_id, prune_check=0.05)
    try:
        eventually(lambda: "pruned" in running.kinds(), "a scheduled prune")
    finally:
        running.stop()
    pruned = next(e for e in running.events if e["event"] == "pruned")
    assert pruned["damaged"] and all("ended key epoch 1" in d for d in pruned["damaged"])
    assert "INJECTED" not in json.dumps(running.events)
    _code, out, _err = tm(tmp_path / "a", "--json", "sync", "status")
    assert "damaged row(s)" in out
