"""Prune by policy and the checkpoint that compacts manifests, on a real sqld with JWT auth:
the vault stays whole for restore and `sync check`, and a server operator (holding the token
every device holds) who deletes, drops a part of, or replays an old checkpoint is caught."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_server import (
    Attacker,
    Tm,
    attacker,
    homes,
    init,
    memories,
    record_id,
    restore,
    status,
    tm,
)
from tests.sync.test_daemon import Running, eventually
from tiermem.sync import records
from tiermem.sync.manifest import Manifest

__all__ = ["attacker", "homes", "tm"]  # fixtures, used by name

prune_module = importlib.import_module("tiermem.sync.restore.prune")
seal_module = importlib.import_module("tiermem.sync.push.seal")  # the package re-exports
# a function of that name

Row = tuple[str, int, bytes, bytes]  # version, epoch, device, envelope


def grown_vault(tm: Tm, a: Path, sqld: SqldServer) -> tuple[str, list[str]]:
    """Three pushes of `a` with an archived memory (an old version to prune); its key, ids."""
    ids = [tm.store(a, f"the pump in hall {n} is red") for n in range(3)]
    key = init(tm, a, sqld)
    assert tm(a, "forget", ids[0])[0] == 0
    assert tm(a, "sync", "push")[0] == 0
    ids.append(tm.store(a, "the valve in hall 9 is green"))
    assert tm(a, "sync", "push")[0] == 0
    return key, ids


def prune_rows(attacker: Attacker, home: Path, agent_id: str) -> list[Row]:
    rid = record_id(home, agent_id, records.PRUNE_TABLE, records.PRUNE_KEY)
    result = attacker.c.execute(
        "SELECT version, epoch, device_id, envelope FROM records WHERE agent_tag = ? "
        "AND record_id = ? ORDER BY version",
        (attacker.tag, rid),
    )
    return [(str(v), int(str(e)), bytes(d), bytes(b)) for v, e, d, b in result.rows]  # type: ignore[arg-type]


def put_back(attacker: Attacker, home: Path, agent_id: str, rows: list[Row]) -> None:
    """Insert prune-record rows the attacker kept a copy of (a replay)."""
    rid = record_id(home, agent_id, records.PRUNE_TABLE, records.PRUNE_KEY)
    for version, epoch, device, envelope in rows:
        attacker.c.execute(
            "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (attacker.tag, rid, version, epoch, device, envelope),
        )


def manifest_count(attacker: Attacker, home: Path, agent_id: str, device_hex: str) -> int:
    return len(attacker.rows(record_id(home, agent_id, records.MANIFEST_TABLE, device_hex)))


def prune_now(tm: Tm, home: Path) -> dict[str, int]:
    """`sync prune` of everything but the newest versions: its counts."""
    doc = tm.json(home, "sync", "prune", "--keep", "1", "--days", "0")
    return {k: v for k, v in doc.items() if isinstance(v, int)}


def test_prune_compacts_the_manifests_and_the_vault_restores_and_checks_whole(
    tm: Tm,
    sqld: SqldServer,
    attacker: Attacker,
    homes: tuple[Path, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, _, fresh = homes
    key, _ = grown_vault(tm, a, sqld)
    monkeypatch.setattr(prune_module, "_DOOMED_PAGE", 1)  # the doomed rows come in pages
    device = str(status(tm, a)["device_id"])
    assert manifest_count(attacker, a, tm.agent_id, device) == 3
    pruned = prune_now(tm, a)
    assert pruned["deleted"] >= 2 and pruned["compacted"] == 3 and pruned["checkpoint"] == 1
    assert manifest_count(attacker, a, tm.agent_id, device) == 0
    assert len(prune_rows(attacker, a, tm.agent_id)) == 1  # one part
    assert prune_now(tm, a)["deleted"] == 0  # nothing new: nothing done
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 0, err
    assert memories(fresh, tm.agent_id) == memories(a, tm.agent_id)
    for home in (a, fresh):
        assert tm(home, "sync", "check", "--read-data")[0] == 0
    # pushes after the checkpoint follow on from what it covers
    tm.store(a, "the fan in hall 5 hums")
    assert tm(a, "sync", "push")[0] == 0
    assert tm(fresh, "sync", "pull")[0] == 0 and tm(a, "sync", "check")[0] == 0
    assert prune_now(tm, a)["checkpoint"] == 2


def test_a_deleted_checkpoint_stops_restore_and_check_as_a_rollback(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, fresh = homes
    key, _ = grown_vault(tm, a, sqld)
    prune_now(tm, a)
    attacker.delete(record_id(a, tm.agent_id, records.PRUNE_TABLE, records.PRUNE_KEY))
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 45 and "is gone" in err and "nothing was restored" in err
    assert memories(fresh, tm.agent_id) == {}
    code, out, _ = tm(a, "sync", "check")
    assert code == 42, out


def test_a_replayed_older_checkpoint_is_caught(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, fresh = homes
    key, _ = grown_vault(tm, a, sqld)
    prune_now(tm, a)
    first = prune_rows(attacker, a, tm.agent_id)
    tm.store(a, "the fan in hall 5 hums")
    assert tm(a, "sync", "push")[0] == 0
    assert prune_now(tm, a)["checkpoint"] == 2  # the first checkpoint's rows are deleted
    tm.store(a, "the door in hall 6 sticks")
    assert tm(a, "sync", "push")[0] == 0  # its manifest names checkpoint 2 as seen
    attacker.delete(record_id(a, tm.agent_id, records.PRUNE_TABLE, records.PRUNE_KEY))
    put_back(attacker, a, tm.agent_id, first)
    code, _, err = restore(tm, fresh, sqld, key)
    assert code != 0 and "nothing was restored" in err, err
    assert memories(fresh, tm.agent_id) == {}
    doc = tm.json(fresh, "restore", "--url", sqld.url, "--stdin", "--salvage", stdin=key)
    messages = [p["message"] for p in doc["problems"] if p["kind"] == "rollback"]
    assert any("checkpoint 2 is gone" in m for m in messages), doc["problems"]
    assert tm(a, "sync", "check")[0] != 0


def test_a_checkpoint_missing_one_part_counts_for_nothing(
    tm: Tm,
    sqld: SqldServer,
    attacker: Attacker,
    homes: tuple[Path, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, _, fresh = homes
    key, _ = grown_vault(tm, a, sqld)
    monkeypatch.setattr(prune_module, "PART_BYTES", 200)  # two lines a part: more parts than
    # a request reads at once
    pruned = prune_now(tm, a)
    parts = prune_rows(attacker, a, tm.agent_id)
    assert len(parts) > 4 and pruned["checkpoint_lines"] > 4
    rid = record_id(a, tm.agent_id, records.PRUNE_TABLE, records.PRUNE_KEY)
    attacker.delete(rid, parts[1][0])
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 45 and "gone" in err
    assert tm(a, "sync", "check")[0] == 42


def test_a_prune_refuses_to_compact_a_vault_with_a_gap(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, _ = homes
    grown_vault(tm, a, sqld)
    device = str(status(tm, a)["device_id"])
    rid = record_id(a, tm.agent_id, records.MANIFEST_TABLE, device)
    middle, _ = attacker.rows(rid)[1]
    attacker.delete(rid, middle)
    code, _, err = tm(a, "sync", "prune")
    assert code == 45 and "nothing was pruned" in err and err.count("\n") == 1
    assert prune_rows(attacker, a, tm.agent_id) == []  # nothing written


def test_the_daemon_prunes_on_its_schedule(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, _ = homes
    grown_vault(tm, a, sqld)
    (a / "config.toml").write_text("[sync]\nprune_every_hours = 0.0001\nkeep_days = 0\n")
    running = Running(a, tm.agent_id, prune_check=0.05)
    try:
        eventually(lambda: running.daemon.prunes >= 2, "two scheduled prunes")
    finally:
        running.stop()
    assert running.error is None
    checkpoints = [e["checkpoint"] for e in running.events if e["event"] == "pruned"]
    assert checkpoints[0] == 1 and checkpoints[1:] == [0] * (len(checkpoints) - 1)
    assert len(prune_rows(attacker, a, tm.agent_id)) == 1


def test_the_daemon_leaves_a_vault_alone_when_pruning_is_off(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, _, _ = homes
    grown_vault(tm, a, sqld)
    (a / "config.toml").write_text("[sync]\nprune_every_hours = 0\n")
    running = Running(a, tm.agent_id, prune_check=0.05, pull_interval=0.05)
    try:
        eventually(lambda: running.daemon.pulls >= 3, "a few loops")
    finally:
        running.stop()
    assert running.daemon.prunes == 0 and prune_rows(attacker, a, tm.agent_id) == []


def first_format(m: Manifest) -> bytes:
    """A manifest as tiermem wrote it before the compact lines."""
    lines = [[e.table, e.record_id, e.version, e.digest] for e in m.records]
    data: dict[str, object] = {"format": 1, "device": m.device, "n": m.n, "records": lines}
    if m.seen:
        data["seen"] = dict(m.seen)
    return records.canonical(data)


def test_a_vault_pushed_with_the_first_manifest_format_restores_prunes_and_checks(
    tm: Tm,
    sqld: SqldServer,
    attacker: Attacker,
    homes: tuple[Path, Path, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b, fresh = homes
    with monkeypatch.context() as old:
        old.setattr(seal_module, "encode_manifest", first_format)
        key, _ = grown_vault(tm, a, sqld)
        assert restore(tm, b, sqld, key)[0] == 0
    tm.store(a, "the fan in hall 5 hums")  # a compact manifest after the old ones
    assert tm(a, "sync", "push")[0] == 0 and tm(b, "sync", "pull")[0] == 0
    assert tm(a, "sync", "check", "--read-data")[0] == 0
    assert prune_now(tm, a)["compacted"] == 4
    code, _, err = restore(tm, fresh, sqld, key)
    assert code == 0, err
    assert memories(fresh, tm.agent_id) == memories(a, tm.agent_id) == memories(b, tm.agent_id)
    assert tm(b, "sync", "check")[0] == 0
