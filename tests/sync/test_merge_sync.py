"""Two devices change hot memory and the tree while offline, then sync through the real sqld:
they converge per field, the losing values are conflict records on both devices, nothing
ping-pongs, and a conflict resolved on one device is resolved (and applied) on the other."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sync.helpers import init_engine, policy, seed_memory
from tests.sync.sqld import SqldServer
from tiermem.core import clocks, snapshot
from tiermem.core.conflicts import list_conflicts, resolve_conflict
from tiermem.core.engine import Memory
from tiermem.core.errors import LimitExceeded
from tiermem.core.hot import item_id
from tiermem.sync.engine import SyncEngine
from tiermem.sync.kinds.critical_merge import (
    REASON_DELETED,
    REASON_HOT_LIMIT,
    critical_document,
    merge_remote,
)
from tiermem.sync.restore import restore
from tiermem.tui.cli import run


class Clock:
    """One hand-moved clock for both devices (so "later" is certain)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class Device:
    def __init__(self, home: Path, agent: str, clock: Clock) -> None:
        self.home = home
        self.mem = Memory(home, agent, clock=clock)
        self.engine = SyncEngine(self.mem, timeout=10.0)

    @property
    def device_id(self) -> str:
        return self.engine.require_ready().device_id.hex()

    def document(self) -> bytes:
        doc = critical_document(self.mem, self.device_id)
        return snapshot.canonical(doc)

    def close(self) -> None:
        self.engine.close()
        self.mem.close()


@pytest.fixture
def pair(tmp_path: Path, sqld: SqldServer, agent_id: str) -> Iterator[tuple[Device, Device, Clock]]:
    clock = Clock()
    desktop = Device(tmp_path / "desktop", agent_id, clock)
    seed_memory(desktop.mem)
    desktop.engine.close()
    desktop.engine, key = init_engine(desktop.mem, sqld.url, sqld.token)
    assert desktop.engine.push(policy()).pushed
    restore(tmp_path / "phone", agent_id, sqld.url, sqld.token, recovery_key=key, policy=policy())
    phone = Device(tmp_path / "phone", agent_id, clock)
    try:
        yield desktop, phone, clock
    finally:
        desktop.close()
        phone.close()


def lesson(mem: Memory, text: str) -> Any:
    return next((x for x in mem.hot().critical_lessons if x.text == text), None)


TESTNET = "Always test on the zebra-testnet first"


def test_offline_edits_on_two_devices_merge_per_field_and_keep_the_losers(
    pair: tuple[Device, Device, Clock],
) -> None:
    desktop, phone, clock = pair
    assert phone.document() == desktop.document()  # restored with its clocks
    # both offline
    clock.now += 10
    phone.mem.update_hot("identity", {"agent_name": "Claw (phone)"})
    phone.mem.remove_hot_item(TESTNET)
    phone.mem.add_project("Kumquat", "certificates", "active")
    clock.now += 10
    desktop.mem.update_hot("identity", {"agent_name": "Claw (desktop)"})
    desktop.mem.add_lesson(TESTNET, 0.95, "blockchain/zebra")  # edits what the phone deleted
    desktop.mem.tree_add("projects/evoclaw/eth", "ETH integration")
    desktop.mem.update_hot("owner_profile", {"tea": "sencha"})
    clock.now += 10
    # back online: the phone syncs first, then the desktop, then the phone again
    phone.engine.sync(policy())
    pulled, _ = desktop.engine.sync(policy())
    assert pulled.conflicts == 2
    phone.engine.sync(policy())

    for device in (desktop, phone):
        mem = device.mem
        hot = mem.hot()
        assert hot.identity["agent_name"] == "Claw (desktop)"  # later edit wins
        assert hot.owner_profile["tea"] == "sencha"  # only one side changed it
        assert lesson(mem, TESTNET).importance == 0.95  # edit after the delete: it lives
        assert [p.name for p in hot.active_context.projects] == ["EvoClaw", "Kumquat"]
        assert "projects/evoclaw/eth" in mem.tree().nodes
        assert "Claw (desktop)" in mem.home.memory_md(mem.agent_id).read_text()
        found = {(c.item, c.field): c for c in list_conflicts(mem.db, mem.agent_id)}
        assert found["identity", "agent_name"].lost_value == "Claw (phone)"
        assert found["identity", "agent_name"].lost_device == phone.device_id
        deleted = found[f"lesson/{item_id('lesson', TESTNET)}", clocks.ALIVE]
        assert deleted.lost_value is None and deleted.reason == REASON_DELETED
        assert len(found) == 2
    assert phone.document() == desktop.document()
    # converged: nothing to push on either side, and pulling again changes nothing
    for device in (desktop, phone):
        assert not device.engine.has_work()
        pulled, pushed = device.engine.sync(policy())
        assert pulled.conflicts == 0 and not pushed.pushed


def test_a_conflict_resolved_on_one_device_is_resolved_on_the_other(
    pair: tuple[Device, Device, Clock],
) -> None:
    desktop, phone, clock = pair
    clock.now += 10
    phone.mem.update_hot("owner_profile", {"tea": "genmaicha"})
    clock.now += 10
    desktop.mem.update_hot("owner_profile", {"tea": "assam"})
    desktop.engine.sync(policy())
    phone.engine.sync(policy())
    desktop.engine.sync(policy())
    [conflict] = list_conflicts(phone.mem.db, phone.mem.agent_id)
    assert (conflict.kept_value, conflict.lost_value) == ("assam", "genmaicha")
    clock.now += 10
    resolve_conflict(phone.mem.db, phone.mem.agent_id, conflict.id, "lost", mem=phone.mem)
    phone.engine.sync(policy())
    desktop.engine.sync(policy())
    for device in (desktop, phone):
        assert device.mem.hot().owner_profile["tea"] == "genmaicha"
        assert list_conflicts(device.mem.db, device.mem.agent_id) == []
        [closed] = list_conflicts(device.mem.db, device.mem.agent_id, include_resolved=True)
        assert closed.resolved
    assert phone.document() == desktop.document()


def test_merge_remote_pushes_back_only_what_the_remote_lacks(
    pair: tuple[Device, Device, Clock],
) -> None:
    desktop, phone, clock = pair
    remote = critical_document(desktop.mem, desktop.device_id)
    assert not phone.engine.has_work()
    outcome = merge_remote(phone.mem, remote, phone.device_id)
    assert outcome.conflicts == 0 and not outcome.pushed_back and not phone.engine.has_work()
    clock.now += 10
    phone.mem.add_event("a phone-only event")
    phone.engine.push(policy())
    outcome = merge_remote(phone.mem, remote, phone.device_id)
    assert outcome.pushed_back and not outcome.changed  # the remote lacks the phone's event


def cli_json(capsys: pytest.CaptureFixture[str], home: Path, agent: str, *args: str) -> Any:
    code = run(["--home", str(home), "--agent-id", agent, "--json", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_cli_lists_and_resolves_conflicts(
    pair: tuple[Device, Device, Clock], capsys: pytest.CaptureFixture[str]
) -> None:
    desktop, phone, clock = pair
    clock.now += 10
    phone.mem.update_hot("identity", {"agent_name": "P"})
    clock.now += 10
    desktop.mem.update_hot("identity", {"agent_name": "D"})
    desktop.engine.sync(policy())
    phone.engine.sync(policy())
    agent = phone.mem.agent_id
    listed = cli_json(capsys, phone.home, agent, "sync", "conflicts")
    assert listed["count"] == 1
    [entry] = listed["conflicts"]
    assert (entry["kept_value"], entry["lost_value"], entry["resolved"]) == ("D", "P", False)
    code = run(["--home", str(phone.home), "--agent-id", agent, "sync", "conflicts"])
    text = capsys.readouterr().out
    assert code == 0 and entry["id"] in text and '"P"' in text
    closed = cli_json(
        capsys, phone.home, agent, "sync", "resolve", entry["id"][:8], "--take", "kept"
    )
    assert closed["resolved"]["resolution"] == "kept"
    assert cli_json(capsys, phone.home, agent, "sync", "conflicts")["count"] == 0
    assert cli_json(capsys, phone.home, agent, "sync", "conflicts", "--all")["count"] == 1
    code = run(
        [
            "--home",
            str(phone.home),
            "--agent-id",
            agent,
            "sync",
            "resolve",
            "zzzz",
            "--take",
            "lost",
        ]
    )
    assert code == 4 and "no conflict" in capsys.readouterr().err


def test_a_merge_over_the_hot_limits_prunes_by_the_local_rules_and_records_it(
    tmp_path: Path,
) -> None:
    """Two homes (no server): each adds 12 lessons offline; the merged hot state keeps the 20
    most important, and the 4 pruned ones are conflict records (never silently dropped)."""
    clock = Clock()
    phone_id, desk_id = "aa" * 16, "dd" * 16
    with (
        Memory(tmp_path / "p", "claw", clock=clock) as phone,
        Memory(tmp_path / "d", "claw", clock=clock) as desk,
    ):
        for n in range(12):
            clock.now += 1
            phone.add_lesson(f"phone lesson {n}", 0.5)
            desk.add_lesson(f"desk lesson {n}", 0.6)
        outcome = merge_remote(desk, critical_document(phone, phone_id), desk_id)
        assert outcome.changed and outcome.pushed_back and outcome.conflicts == 4
        lessons = desk.hot().critical_lessons
        assert len(lessons) == desk.cfg.hot.max_lessons
        assert sum(x.text.startswith("phone") for x in lessons) == 8
        pruned = list_conflicts(desk.db, "claw")
        assert len(pruned) == 4 and all(c.lost_value["importance"] == 0.5 for c in pruned)
        # the phone takes the merge back: same state, same records, nothing new to push
        back = merge_remote(phone, critical_document(desk, desk_id), phone_id)
        assert back.changed and not back.pushed_back
        assert snapshot.canonical(critical_document(phone, phone_id)) == snapshot.canonical(
            critical_document(desk, desk_id)
        )
        assert {c.id for c in list_conflicts(phone.db, "claw")} == {c.id for c in pruned}
        text = desk.home.memory_md("claw").read_text()
        assert "desk lesson 11" in text and len(text.encode()) <= desk.cfg.hot.max_bytes


def test_a_merge_over_the_size_limit_keeps_critical_lessons_on_both_devices(
    pair: tuple[Device, Device, Clock],
) -> None:
    """Offline, the desktop learns a critical lesson while the phone fills hot memory with
    projects; together they overflow its byte limit. The merge moves projects out (recorded),
    never a critical lesson, and both devices end with the same hot memory."""
    desktop, phone, clock = pair
    critical = "Never rotate the prod signing key on a Friday afternoon before a release"
    clock.now += 10
    before = desktop.mem.hot_size_bytes()
    desktop.mem.add_lesson(critical, 0.95, "ops/keys")
    grown = desktop.mem.hot_size_bytes() - before
    limit = phone.mem.cfg.hot.max_bytes
    n = 0
    while phone.mem.hot_size_bytes() < limit - grown // 2:
        clock.now += 1
        try:
            phone.mem.add_project(f"Project {n}", "a long-running migration " * 6, "active")
        except LimitExceeded:
            break
        n += 1
    assert phone.mem.hot_size_bytes() + grown > limit  # the merge has to move something
    phone.engine.sync(policy())
    desktop.engine.sync(policy())
    phone.engine.sync(policy())

    for device in (desktop, phone):
        assert lesson(device.mem, critical).importance == 0.95
        assert lesson(device.mem, TESTNET) is not None  # the seeded critical lesson stays too
        assert device.mem.hot_size_bytes() <= limit
        reasons = [c.reason for c in list_conflicts(device.mem.db, device.mem.agent_id)]
        assert REASON_HOT_LIMIT in reasons
    assert phone.document() == desktop.document()
