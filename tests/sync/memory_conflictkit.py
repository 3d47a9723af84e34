"""Two devices holding one memory on a real sqld, driven through the CLI: the pieces the
memory-conflict tests share."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import run_cli
from tests.sync.sqld import SqldServer
from tiermem.core import hygiene, links
from tiermem.core.engine import Memory

TEXT = "the boiler code is 4471"


class Cli:
    """`tiermem --json` in-process for one agent in any home."""

    def __init__(self, capsys: pytest.CaptureFixture[str], agent_id: str) -> None:
        self.capsys = capsys
        self.agent_id = agent_id

    def __call__(self, home: Path, *args: str, stdin: str | None = None) -> dict[str, Any]:
        code, out, err = run_cli(
            self.capsys, "--home", str(home), "--agent-id", self.agent_id, "--json", *args,
            stdin=stdin,
        )  # fmt: skip
        assert code == 0, err
        doc: dict[str, Any] = json.loads(out) if out.strip() else {}
        return doc


@dataclass
class Vault:
    """Two devices holding one memory, synced; a third home can join later."""

    tm: Cli
    desk: Path
    phone: Path
    spare: Path
    key: str
    url: str
    memory_id: str

    def state(self, home: Path, memory_id: str | None = None) -> dict[str, Any]:
        """What a person sees of the memory on `home` (read without counting a read)."""
        mid = memory_id or self.memory_id
        with Memory(home, self.tm.agent_id) as mem:
            row = mem.db.query_one(
                "SELECT text, category, importance, pinned, superseded_by FROM memories "
                "WHERE agent_id = ? AND id = ?",
                (mem.agent_id, mid),
            )
            if row is None:
                return {}
            tags, expires = hygiene.extras_for(mem, [mid]).get(mid, ((), None))
            return {
                "text": row[0],
                "category": row[1],
                "importance": row[2],
                "pinned": bool(row[3]),
                "superseded_by": row[4],
                "tags": list(tags),
                "expires_at": expires,
                "links": sorted(links.linked(mem, [mid]).get(mid, [])),
            }

    def conflicts(self, home: Path, every: bool = False) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.tm(
            home, "sync", "conflicts", *(["--all"] if every else [])
        )["conflicts"]
        return found

    def join_spare(self) -> None:
        self.tm(
            self.spare, "sync", "add-device", "--recovery", "--url", self.url, "--stdin",
            stdin=self.key + "\n",
        )  # fmt: skip
        self.tm(self.spare, "sync", "now")


def make_vault(
    capsys: pytest.CaptureFixture[str],
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Vault:
    """The desk holds `TEXT` (tagged), synced to the phone, which joined with the recovery key."""
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")
    tm = Cli(capsys, agent_id)
    desk, phone = tmp_path / "desk", tmp_path / "phone"
    key = tm(desk, "sync", "init", "--url", sqld.url, "--new-vault")["recovery_key"]
    memory_id = tm(desk, "store", "--text", TEXT, "--category", "home", "--tag", "house")["id"]
    tm(desk, "sync", "now")
    tm(phone, "sync", "add-device", "--recovery", "--url", sqld.url, "--stdin", stdin=key + "\n")
    tm(phone, "sync", "now")
    v = Vault(tm, desk, phone, tmp_path / "spare", key, sqld.url, memory_id)
    assert v.state(phone)["text"] == TEXT
    return v


ORDERS: dict[str, list[tuple[str, str]]] = {
    # the desk pushes first; the phone pulls with its own edit not pushed yet
    "desk pushes, phone merges": [("desk", "now"), ("phone", "now"), ("desk", "now")],
    # both push before either pulls: each pull merges a version it has not seen
    "both push, then both pull": [
        ("desk", "push"),
        ("phone", "push"),
        ("desk", "now"),
        ("phone", "now"),
        ("desk", "now"),
    ],
    # the phone pushes first, the desk pulls with its edit pending
    "phone pushes, desk merges": [("phone", "now"), ("desk", "now"), ("phone", "now")],
}


def run_order(v: Vault, order: str) -> None:
    for home, step in ORDERS[order]:
        v.tm(v.desk if home == "desk" else v.phone, "sync", step)
