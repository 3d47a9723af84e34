"""`sync push` racing edits typed into the TUI: while `tiermem sync push` runs again and again
in processes of its own, a person pins, demotes, edits and forgets memories in the TUI of the
same home (Textual Pilot). Every push exits 0, no edit is lost here, nothing stays half-pushed,
and another device's next pull converges to exactly what this home holds. A real sqld with
JWT auth."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import TextArea

from tests.sync.memory_conflictkit import Cli
from tests.sync.sqld import SqldServer
from tests.tui.conftest import settle
from tiermem.core.engine import Memory
from tiermem.tui.app.app import TiermemApp
from tiermem.tui.app.widgets.memory_table import MemoryTable

MEMORIES = 12
TYPED = "typed while a push ran"


def held(home: Path, agent_id: str) -> dict[str, tuple[object, ...]]:
    """Every memory of the agent with what a person edits of it; forgotten ones are gone."""
    with Memory(home, agent_id) as mem:
        rows = mem.db.query(
            "SELECT id, text, importance, tier, pinned FROM memories WHERE agent_id = ?",
            (agent_id,),
        )
    return {str(r[0]): tuple(r[1:]) for r in rows}


class PushLoop:
    """`tiermem sync push` in a new process, again and again, until stopped."""

    def __init__(self, home: Path, agent_id: str, env: dict[str, str]) -> None:
        command = str(Path(sys.executable).parent / "tiermem")
        self.args = [command, "--home", str(home), "--agent-id", agent_id]
        self.env = env
        self.codes: list[tuple[int, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            done = subprocess.run(
                [*self.args, "sync", "push"], env=self.env, capture_output=True, text=True,
                timeout=120, check=False,
            )  # fmt: skip
            self.codes.append((done.returncode, done.stderr[-300:]))

    def __enter__(self) -> PushLoop:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(180)


async def edits(pilot: Pilot[None], loop: PushLoop) -> None:
    """A person's edits on the Memories screen, each while pushes run."""
    app = pilot.app
    await settle(pilot)
    await pilot.press("3")
    await settle(pilot)
    table = app.screen.query_one(MemoryTable)
    table.focus()
    for step in range(MEMORIES - 2):
        await pilot.press(("p", "minus", "p")[step % 3])
        await settle(pilot)
        await pilot.press("down")
        await settle(pilot)
    await pilot.press("e")  # the text of the memory under the cursor
    await settle(pilot)
    field = app.screen.query_one("#f-text", TextArea)
    assert app.screen.focused is field
    await pilot.press("f7", "backspace", *(c if c != " " else "space" for c in TYPED))
    await pilot.press("ctrl+s")
    await settle(pilot)
    await pilot.press("up", "d")  # forget the one above, after saying yes
    await settle(pilot)
    await pilot.press("y")
    await settle(pilot)
    while len(loop.codes) < 3:  # at least a few pushes overlapped the edits
        await asyncio.sleep(0.2)


def test_pushes_racing_tui_edits_lose_nothing_and_the_other_device_converges(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")
    tm = Cli(capsys, agent_id)
    desk, phone = tmp_path / "desk", tmp_path / "phone"
    key = tm(desk, "sync", "init", "--url", sqld.url, "--new-vault")["recovery_key"]
    for i in range(MEMORIES):
        tm(desk, "store", "--text", f"fact number {i} about the garden shed", "--category", "home")
    tm(desk, "sync", "now")
    tm(phone, "sync", "add-device", "--recovery", "--url", sqld.url, "--stdin", stdin=key + "\n")
    tm(phone, "sync", "now")
    before = held(desk, agent_id)

    app = TiermemApp(desk, agent_id)
    with PushLoop(desk, agent_id, dict(os.environ)) as loop:

        async def main() -> None:
            async with app.run_test(size=(140, 40)) as pilot:
                await edits(pilot, loop)

        asyncio.run(main())
    assert loop.codes and all(code == 0 for code, _ in loop.codes), loop.codes

    after = held(desk, agent_id)
    assert len(after) == MEMORIES - 1  # one forgotten
    assert TYPED in {row[0] for row in after.values()}
    changed = [m for m in after if after[m] != before[m]]
    assert len(changed) >= MEMORIES - 3  # every pin, demote and edit is still here

    tm(desk, "sync", "push")
    assert tm(desk, "sync", "status")["pending_memories"] == 0  # nothing left half-pushed
    tm(phone, "sync", "now")
    assert held(phone, agent_id) == after
    assert tm(phone, "sync", "conflicts")["count"] == 0
