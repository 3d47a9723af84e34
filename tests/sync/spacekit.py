"""Shared pieces of the shared-space sync tests: people with homes of their own, a space one of
them shares on the real sqld, members invited by pairing with a role."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import Cli
from tests.sync.devicekit import NoSleep
from tests.sync.helpers import policy
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync.devices.pairing_approval import answer_pairing
from tiermem.sync.devices.pairing_exchange import start_pairing
from tiermem.sync.engine import SyncEngine
from tiermem.sync.spaces import vaults


@dataclass
class Person:
    """One person's memory home and agent, and `tiermem` run as them (`person("spaces", …)`)."""

    agent: str
    home: Path
    tm: Cli

    def __call__(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        return self.tm(*args, stdin=stdin)

    def json(self, *args: str, stdin: str | None = None) -> Any:
        return self.tm.json(*args, stdin=stdin)

    def found(self, query: str) -> list[dict[str, Any]]:
        """What `retrieve` finds for this person: each hit's text, space and writer."""
        hits = self.json("retrieve", query)["results"]
        return [
            {
                "text": h["text"],
                "space": h["explanation"]["space"],
                "by": h["explanation"]["written_by"],
            }
            for h in hits
        ]


def space_name() -> str:
    """A space name no other test uses (pairing requests are filed by the space's name)."""
    return f"team-{uuid.uuid4().hex[:10]}"


def people(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sqld: SqldServer,
    *names: str,
) -> list[Person]:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")
    monkeypatch.delenv("TIERMEM_RECOVERY_KEY", raising=False)
    return [Person(n, tmp_path / n, Cli(capsys, tmp_path / n, n)) for n in names]


def share(owner: Person, space: str, sqld: SqldServer) -> str:
    """`owner` shares the space `space` it created; the space's recovery key."""
    shared = owner.json("spaces", "share", space, "--url", sqld.url)
    key: str = shared["recovery_key"]
    return key


def invite(
    owner: Person,
    member: Person,
    space: str,
    role: str,
    sqld: SqldServer,
    *,
    name: str | None = None,
    url: str | None = None,
) -> str:
    """`member`'s device joins `space` by pairing with `owner`'s, as a `role`, named on the
    roster as `name` (default: its agent), reaching the server at `url` (default: sqld's); its
    device id."""
    with Memory(member.home, member.agent) as mem, mem.open_space(space) as joining:
        pairing = start_pairing(
            joining, url or sqld.url, sqld.token, member.agent, policy=policy(), sleep=NoSleep()
        )
        try:
            with Memory(owner.home, owner.agent) as own, vaults.open_engine(own, space) as engine:
                approval = answer_pairing(
                    engine, sleep=NoSleep(), role=role, name=name or member.agent
                )
                code = pairing.wait_code()
                assert approval.wait_code() == code
                approval.approve(code)
            device = pairing.finish().device_id
        finally:
            pairing.close()
        with SyncEngine(joining) as engine:
            assert vaults.adopt(mem, engine) == role
    return device
