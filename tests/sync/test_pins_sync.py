"""A pin and an unpin made on one device reach the others and survive a restore, through the
CLI on a real sqld."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import run_cli
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory


class Cli:
    """`tiermem --json` in-process for one agent in any home."""

    def __init__(self, capsys: pytest.CaptureFixture[str], agent_id: str) -> None:
        self.capsys = capsys
        self.agent_id = agent_id

    def __call__(self, home: Path, *args: str, stdin: str | None = None) -> dict[str, Any]:
        code, out, err = run_cli(
            self.capsys,
            "--home",
            str(home),
            "--agent-id",
            self.agent_id,
            "--json",
            *args,
            stdin=stdin,
        )
        assert code == 0, err
        doc: dict[str, Any] = json.loads(out) if out.strip() else {}
        return doc


@pytest.fixture
def tm(
    capsys: pytest.CaptureFixture[str],
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
) -> Cli:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")
    return Cli(capsys, agent_id)


def pinned(home: Path, agent_id: str, memory_id: str) -> bool:
    with Memory(home, agent_id) as mem:
        return bool(
            mem.db.scalar(
                "SELECT pinned FROM memories WHERE agent_id = ? AND id = ?", (agent_id, memory_id)
            )
        )


def test_a_pin_and_an_unpin_reach_the_other_devices_and_survive_a_restore(
    tmp_path: Path, agent_id: str, sqld: SqldServer, tm: Cli
) -> None:
    desk, phone, spare = tmp_path / "desk", tmp_path / "phone", tmp_path / "spare"
    key = tm(desk, "sync", "init", "--url", sqld.url, "--new-vault")["recovery_key"]
    memory_id = tm(desk, "store", "--text", "the boiler code is 4471", "--category", "home")["id"]
    other = tm(desk, "store", "--text", "the bins go out on tuesday", "--category", "home")["id"]
    tm(desk, "sync", "now")
    tm(phone, "sync", "add-device", "--recovery", "--url", sqld.url, "--stdin", stdin=key + "\n")
    tm(phone, "sync", "now")
    assert not pinned(phone, agent_id, memory_id)

    tm(desk, "pin", memory_id)
    tm(desk, "sync", "now")
    tm(phone, "sync", "now")
    assert pinned(phone, agent_id, memory_id)

    tm(phone, "pin", other)
    tm(phone, "unpin", memory_id)
    tm(phone, "sync", "now")
    tm(desk, "sync", "now")
    assert not pinned(desk, agent_id, memory_id) and pinned(desk, agent_id, other)

    tm(spare, "restore", "--url", sqld.url, "--stdin", stdin=key + "\n")
    assert not pinned(spare, agent_id, memory_id) and pinned(spare, agent_id, other)
