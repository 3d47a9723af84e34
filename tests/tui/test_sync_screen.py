"""The Sync screen against the real sync engine and a real libSQL server (sqld): status, push
now, and the restore flow into an empty home."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable, Static

from tests.sync.conftest import _isolated_secrets, sqld
from tests.sync.helpers import init_engine
from tests.sync.sqld import SqldServer
from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tests.tui.test_app import fill_form, messages
from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.tui.screens.hot import HotScreen
from tiermem.tui.screens.modals import FormModal

__all__ = ["_isolated_secrets", "sqld"]  # the sync tests' fixtures, reused here


def test_status_push_now_and_restore(sqld: SqldServer, demo_home: Path, tmp_path: Path) -> None:
    with Memory(demo_home, clock=FixedClock(NOW)) as mem:
        engine, key = init_engine(mem, sqld.url, sqld.token)
        engine.close()
        pending = len(snapshot.pending(mem.db, mem.agent_id))
        lessons = [x.text for x in mem.hot().critical_lessons]
    assert pending > 0

    async def push() -> None:
        app = make_app(demo_home)
        async with app.run_test(size=(110, 34)) as pilot:
            await settle(pilot)
            await pilot.press("6")
            await settle(pilot)
            state = str(app.screen.query_one("#sync-state", Static).render())
            assert "state ready" in state and f"outbox {pending} pending" in state
            assert app.screen.query_one("#outbox", DataTable).row_count == pending
            await pilot.press("P")
            await settle(pilot)
            assert any(m.startswith("pushed version") for m in messages(app)), messages(app)
            state = str(app.screen.query_one("#sync-state", Static).render())
            assert "outbox 0 pending" in state and "1 push(es)" in state
            assert app.screen.query_one("#outbox", DataTable).row_count == 0

    asyncio.run(push())

    empty = tmp_path / "new-device"

    async def restore() -> None:
        app = make_app(empty)
        async with app.run_test(size=(110, 34)) as pilot:
            await settle(pilot)
            await pilot.press("6")
            await settle(pilot)
            await pilot.press("R")
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
            assert any(m.startswith("restored 'default'") for m in messages(app)), messages(app)
            await pilot.press("4")
            await settle(pilot)
            assert isinstance(app.screen, HotScreen) and lessons[0] in app.screen.markdown

    asyncio.run(restore())
    with Memory(empty, clock=FixedClock(NOW)) as restored:
        assert [x.text for x in restored.hot().critical_lessons] == lessons
