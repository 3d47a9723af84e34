"""The Sync screen against the real sync engine and a real libSQL server (sqld): status, the
device list, push, pull and sync now, the history, and the restore flow (with its progress)
into an empty home."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static, TabbedContent

from tests.sync.conftest import sqld
from tests.sync.helpers import init_engine
from tests.sync.sqld import SqldServer
from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tests.tui.test_app import fill_form, messages, row_ids
from tiermem.core import curate, snapshot
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.tui.app.screens.hot import HotScreen
from tiermem.tui.app.screens.modals import FormModal
from tiermem.tui.app.screens.restore import RestoreModal
from tiermem.tui.app.screens.sync import SyncScreen

__all__ = ["sqld"]  # the sync tests' fixture, reused here


def test_status_push_now_and_restore(
    sqld: SqldServer, demo_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(demo_home, clock=FixedClock(NOW)) as mem:
        engine, key = init_engine(mem, sqld.url, sqld.token)
        engine.close()
        pending = len(snapshot.pending(mem.db, mem.agent_id))
        graph = mem.db.scalar(
            "SELECT count(*) FROM graph_dirty WHERE agent_id = ?", (mem.agent_id,)
        )
        lessons = [x.text for x in mem.hot().critical_lessons]
        memories = curate.count_memories(mem)
    assert pending > 0 and graph > 0  # the demo's episodes and entities wait for a first push

    async def push() -> None:
        app = make_app(demo_home)
        async with app.run_test(size=(110, 34), notifications=True) as pilot:
            await settle(pilot)
            await pilot.press("6")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, SyncScreen)
            state = str(screen.query_one("#sync-state", Static).render())
            assert "state ready" in state and f"outbox {pending} pending" in state
            assert f"+ {graph} episodes/entities" in state
            assert screen.query_one("#outbox", DataTable).row_count == pending
            devices = screen.query_one("#devices", DataTable)
            assert devices.row_count == 1 and str(devices.get_row_at(0)[-1]) == "this device"
            # a token that cannot write: the push fails, and the screen says so
            monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.mint({"a": "ro"}))
            await pilot.press("P")
            await settle(pilot)
            monkeypatch.delenv("TIERMEM_SYNC_TOKEN")
            assert any("permission denied" in m for m in messages(app, "error"))
            tabs = screen.query_one(TabbedContent)
            assert str(tabs.get_tab("tab-history").label) == "History (1 errors)"
            assert str(screen.query_one("#history", DataTable).get_row_at(0)[1]) == "error"
            state = str(screen.query_one("#sync-state", Static).render())
            assert "last error -" not in state and f"outbox {pending} pending" in state
            await pilot.press("P")
            await settle(pilot)
            assert any(m.startswith("pushed version") for m in messages(app)), messages(app)
            state = str(screen.query_one("#sync-state", Static).render())
            assert "outbox 0 pending" in state and "1 push(es)" in state
            assert "episodes/entities" not in state
            assert screen.query_one("#outbox", DataTable).row_count == 0
            history = screen.query_one("#history", DataTable)
            assert [str(c) for c in history.get_row_at(0)[1:2]] == ["push"]
            await pilot.press("F")  # nothing new from other devices
            await settle(pilot)
            assert any(m.startswith("pulled 0 change(s)") for m in messages(app)), messages(app)
            await pilot.press("Y")
            await settle(pilot)
            assert any(
                m.startswith("pulled") and "; nothing to push" in m for m in messages(app)
            ), messages(app)

    asyncio.run(push())

    empty = tmp_path / "new-device"

    async def restore() -> None:
        app = make_app(empty)
        async with app.run_test(size=(110, 34), notifications=True) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+p")  # the restore flow is in the palette too
            await pilot.pause()
            await pilot.press(*"Restore from sync")
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, FormModal)
            await fill_form(
                pilot,
                {
                    "url": sqld.url,
                    "token": sqld.token,
                    "recovery_key": crypto.format_recovery_key(key),
                },
            )
            await settle(pilot)
            modal = app.screen
            assert isinstance(modal, RestoreModal) and not modal.running
            assert any(m.startswith("restored 'default'") for m in messages(app)), messages(app)
            phases = [p.phase for p in modal.seen]
            assert phases[0] == "critical" and phases[-1] == "done"
            assert any(p.usable for p in modal.seen)
            assert modal.seen[-1].memories == memories
            await pilot.press("escape")
            await settle(pilot)
            await pilot.press("4")
            await settle(pilot)
            assert isinstance(app.screen, HotScreen) and lessons[0] in app.screen.markdown
            await pilot.press("3")
            await settle(pilot)
            assert "memories, newest first" in str(app.screen.query_one("#mem-status").render())
            assert len(row_ids(app)) == min(memories, 200)

    asyncio.run(restore())
    with Memory(empty, clock=FixedClock(NOW)) as restored:
        assert [x.text for x in restored.hot().critical_lessons] == lessons
        assert curate.count_memories(restored) == memories


def test_an_error_with_brackets_is_shown_as_written(sqld: SqldServer, tmp_path: Path) -> None:
    """Errors quote the OS and the server (`[Errno 111]`, a stray `[/]`): the dashboard and the
    Sync screen show them literally (a markup parse failed the app's first screen)."""
    home = tmp_path / "home"
    error = "[Errno 111] Connection refused [/] (server said [bold]no[/bold])"
    with Memory(home, clock=FixedClock(NOW)) as mem:
        mem.store("a fact to push", "notes", 0.5)
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        engine.close()
        with mem.db.transaction():
            mem.db.execute(
                "UPDATE sync_state SET last_error = ?, last_error_at = ? WHERE agent_id = ?",
                (error, NOW, mem.agent_id),
            )
            mem.db.execute(  # the same error in the history tab, as a failed push logs it
                "INSERT INTO sync_log (agent_id, at, kind, note) VALUES (?, ?, 'error', ?)",
                (mem.agent_id, NOW, error),
            )

    async def look() -> None:
        app = make_app(home)
        async with app.run_test(size=(200, 34), notifications=True) as pilot:
            await settle(pilot)
            dashboard = str(app.screen.query_one("#dash-sync", Static).render())
            assert f"last error {error}" in dashboard
            await pilot.press("6")
            await settle(pilot)
            state = str(app.screen.query_one("#sync-state", Static).render())
            assert f"last error {error}" in state
            history = app.screen.query_one("#history", DataTable)
            notes = [str(history.get_row_at(i)[-1]) for i in range(history.row_count)]
            assert error[:59] + "…" in notes  # the tab cuts notes to 60 characters

    asyncio.run(look())
