"""A prune that builds on this device's copy of the previous checkpoint, on a real sqld with
JWT auth: nothing of that checkpoint crosses the wire while the server's parts are the copy; a
copy gone stale (another device pruned) or changed on disk is downloaded again, and a server
that serves an older checkpoint, or none, is refused; never a wrong checkpoint signed."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.sync.helpers import init_engine, policy
from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_server import (
    Attacker,
    Tm,
    attacker,
    homes,
    memories,
    record_id,
    restore,
    tm,
)
from tests.sync.test_checkpoint import grown_vault, prune_now, prune_rows, put_back
from tests.sync.test_daemon import Running, eventually
from tests.sync.test_pull_cost import Counting
from tiermem.core.engine import Memory
from tiermem.sync import records
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import prune
from tiermem.sync.restore.checkpoint_copy import NO_COPY, OTHER_PRUNE, TAMPERED_COPY

__all__ = ["attacker", "homes", "tm"]  # fixtures, used by name


def pieces(rows: list[tuple[str, int, bytes, bytes]]) -> list[bytes]:
    """A stretch of each envelope in the base64 a Hrana response carries it in (aligned to
    3 bytes, so it is a substring of the whole envelope's base64)."""
    return [base64.b64encode(env[300:600]) for _, _, _, env in rows]


class Recording(Counting):
    """`Counting`, keeping each response's body too."""

    def __init__(self) -> None:
        super().__init__()
        self.responses: list[bytes] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.responses.append(response.content)
        return response


def seen(wire: Recording, what: list[bytes], before: int) -> bool:
    return any(p in body for body in wire.responses[before:] for p in what)


def copy_rows(home: Path, agent_id: str) -> list[tuple[str, int, bytes]]:
    """This device's copy of the checkpoint: (version, epoch, envelope) of each part."""
    with Memory(home, agent_id) as mem:
        found = mem.db.query("SELECT version, epoch, envelope FROM sync_checkpoint")
        return [(str(v), int(str(e)), bytes(b)) for v, e, b in found]


def edit_copy(home: Path, agent_id: str, sql: str, *args: object) -> None:
    with Memory(home, agent_id) as mem, mem.db.transaction():
        mem.db.execute(sql, args)


def flip_a_sealed_byte(home: Path, agent_id: str) -> None:
    """One byte inside the ciphertext: the length, header and tag the server compares stay."""
    version, _, envelope = copy_rows(home, agent_id)[0]
    changed = envelope[:200] + bytes([envelope[200] ^ 1]) + envelope[201:]
    sql = "UPDATE sync_checkpoint SET envelope = ? WHERE version = ?"
    edit_copy(home, agent_id, sql, changed, version)


def file_under_another_version(home: Path, agent_id: str) -> None:
    edit_copy(home, agent_id, "UPDATE sync_checkpoint SET version = version || '0'")


def test_a_prune_builds_on_its_copy_and_downloads_nothing_of_the_previous_checkpoint(
    tmp_path: Path, sqld: SqldServer, agent_id: str, attacker: Attacker
) -> None:
    mem = Memory(tmp_path / "a", agent_id)
    wire = Recording()
    setup, _ = init_engine(mem, sqld.url, sqld.token)
    setup.close()
    engine = SyncEngine(mem, timeout=10.0, transport=wire)
    try:
        for n in range(60):  # a checkpoint of some size: 60 lines and more
            mem.store(f"the boiler in room {n} was serviced on day {n}", "ops")
        engine.push(policy())
        first = prune(engine, 1, keep_days=0, policy=policy())
        assert first.checkpoint == 1
        parts = prune_rows(attacker, tmp_path / "a", agent_id)
        assert len(parts) == 1 and len(parts[0][3]) > 4096
        assert [(v, e, env) for v, e, _, env in parts] == copy_rows(tmp_path / "a", agent_id)

        mem.store("the chiller in room 99 leaks", "ops")
        engine.push(policy())
        before = len(wire.responses)
        second = prune(engine, 1, keep_days=0, policy=policy())
        assert not seen(wire, pieces(parts), before)  # checkpoint 1 never crossed the wire
        assert (second.checkpoint, second.previous, second.downloaded_because) == (2, "copy", "")
        parts = prune_rows(attacker, tmp_path / "a", agent_id)

        with mem.db.transaction():  # a device without a copy
            mem.db.execute("DELETE FROM sync_checkpoint")
        mem.store("the fan in room 98 hums", "ops")
        engine.push(policy())
        before = len(wire.responses)
        third = prune(engine, 1, keep_days=0, policy=policy())
        assert (third.checkpoint, third.previous, third.downloaded_because) == (
            3,
            "downloaded",
            NO_COPY,
        )
        assert seen(wire, pieces(parts), before)  # what the measure sees when it is downloaded
    finally:
        engine.close()
        mem.close()


def test_a_copy_gone_stale_because_another_device_pruned_is_downloaded_again(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, b, fresh = homes
    key, _ = grown_vault(tm, a, sqld)
    assert prune_now(tm, a)["checkpoint"] == 1
    assert restore(tm, b, sqld, key)[0] == 0  # keeps the checkpoint it checked as its copy
    tm.store(b, "the lift in hall 2 squeaks")
    assert tm(b, "sync", "push")[0] == 0
    doc = tm.json(b, "sync", "prune", "--keep", "1", "--days", "0")
    assert (doc["checkpoint"], doc["previous"], doc["downloaded_because"]) == (2, "copy", "")

    tm.store(a, "the heater in hall 3 ticks")
    assert tm(a, "sync", "push")[0] == 0
    code, out, _ = tm(a, "sync", "prune", "--keep", "1", "--days", "0")
    assert code == 0 and "compacted into checkpoint 3" in out
    assert f"the previous checkpoint was downloaded: {OTHER_PRUNE}" in out
    tm.store(a, "the door in hall 4 sticks")
    assert tm(a, "sync", "push")[0] == 0
    code, out, _ = tm(a, "sync", "prune", "--keep", "1", "--days", "0")
    assert code == 0 and "checkpoint 4" in out and "this device's copy: nothing" in out

    assert restore(tm, fresh, sqld, key)[0] == 0
    assert tm(a, "sync", "pull")[0] == 0 and tm(b, "sync", "pull")[0] == 0
    assert memories(fresh, tm.agent_id) == memories(a, tm.agent_id) == memories(b, tm.agent_id)
    for home in (a, b, fresh):
        assert tm(home, "sync", "check", "--read-data")[0] == 0


@pytest.mark.parametrize("served", ["an older checkpoint", "no checkpoint"])
def test_a_server_serving_an_older_checkpoint_than_the_copy_is_refused(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path], served: str
) -> None:
    a, _, _ = homes
    grown_vault(tm, a, sqld)
    assert prune_now(tm, a)["checkpoint"] == 1
    first = prune_rows(attacker, a, tm.agent_id)
    ids = [tm.store(a, f"the pipe in hall {n} drips") for n in (7, 8)]
    assert tm(a, "sync", "push")[0] == 0
    assert tm(a, "forget", ids[0])[0] == 0
    assert tm(a, "sync", "push")[0] == 0
    # checkpoint 2 compacts those pushes and keeps their young versions: the next prune has
    # versions to delete and no manifest of its own to show the pushes checkpoint 1 lacks
    doc = tm.json(a, "sync", "prune", "--keep", "1", "--days", "30")
    assert (doc["checkpoint"], doc["deleted"]) == (2, 0)
    attacker.delete(record_id(a, tm.agent_id, records.PRUNE_TABLE, records.PRUNE_KEY))
    if served == "an older checkpoint":
        put_back(attacker, a, tm.agent_id, first)
    left = prune_rows(attacker, a, tm.agent_id)

    code, _, err = tm(a, "sync", "prune", "--keep", "1", "--days", "0")
    assert code == 45 and "older than checkpoint 2" in err and "nothing was pruned" in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert prune_rows(attacker, a, tm.agent_id) == left  # no checkpoint signed over the replay


@pytest.mark.parametrize("change", [flip_a_sealed_byte, file_under_another_version])
def test_a_copy_changed_on_disk_is_downloaded_again_and_the_checkpoint_stays_whole(
    tm: Tm,
    sqld: SqldServer,
    attacker: Attacker,
    homes: tuple[Path, Path, Path],
    change: Callable[[Path, str], None],
) -> None:
    a, _, fresh = homes
    key, _ = grown_vault(tm, a, sqld)
    assert prune_now(tm, a)["checkpoint"] == 1
    change(a, tm.agent_id)
    tm.store(a, "the vent in hall 5 rattles")
    assert tm(a, "sync", "push")[0] == 0
    doc = tm.json(a, "sync", "prune", "--keep", "1", "--days", "0")
    assert (doc["checkpoint"], doc["previous"]) == (2, "downloaded")
    assert doc["downloaded_because"] == TAMPERED_COPY
    assert [(v, e, env) for v, e, _, env in prune_rows(attacker, a, tm.agent_id)] == copy_rows(
        a, tm.agent_id
    )
    assert restore(tm, fresh, sqld, key)[0] == 0
    assert memories(fresh, tm.agent_id) == memories(a, tm.agent_id)
    assert tm(a, "sync", "check", "--read-data")[0] == 0


def test_the_daemons_scheduled_prunes_build_on_its_copy_and_say_so(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, b, _ = homes
    key, _ = grown_vault(tm, a, sqld)
    assert prune_now(tm, a)["checkpoint"] == 1
    assert restore(tm, b, sqld, key)[0] == 0
    tm.store(b, "the lift in hall 2 squeaks")
    assert tm(b, "sync", "push")[0] == 0
    assert prune_now(tm, b)["checkpoint"] == 2
    (a / "config.toml").write_text("[sync]\nprune_every_hours = 0.0001\nkeep_days = 0\n")
    running = Running(a, tm.agent_id, prune_check=0.05)
    try:
        eventually(lambda: running.daemon.prunes >= 3, "three scheduled prunes")
    finally:
        running.stop()
    assert running.error is None
    pruned = [e for e in running.events if e["event"] == "pruned"]
    assert (pruned[0]["previous"], pruned[0]["downloaded_because"]) == ("downloaded", OTHER_PRUNE)
    assert [e["previous"] for e in pruned[1:]] == ["copy"] * (len(pruned) - 1)
