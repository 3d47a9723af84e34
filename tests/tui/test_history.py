"""The detail pane's history of a fact that changed, and `U` to undo a wrong supersession:
keys typed with Pilot on a real app over a real home."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static

from tests.tui.conftest import make_app, settle
from tests.tui.test_app import drive, goto, messages, open_home
from tiermem.core import supersession
from tiermem.core.remember import Entry, remember


def test_the_detail_shows_the_history_and_s_makes_it_current_again(demo_home: Path) -> None:
    with open_home(demo_home) as mem:
        old = remember(mem, Entry("My manager at Quillwork is Priya Shah.", "people")).outcome.id
        new = remember(mem, Entry("My new manager at Quillwork is Diego Alvarez.", "people"))
        if mem.get(old).superseded_by != new.outcome.id:  # placed by the rules, or said here
            supersession.supersede(mem, old, new.outcome.id)
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "3")
        await pilot.press("slash", *"Priya Shah", "escape")
        await settle(pilot)
        shown = str(app.screen.query_one("#detail-main", Static).render())
        assert "Diego Alvarez" in shown.split("history")[0]  # the current one comes first
        assert "Priya Shah" in shown.split("history")[1]
        await pilot.press("down")
        await settle(pilot)
        shown = str(app.screen.query_one("#detail-main", Static).render())
        assert "Priya Shah" in shown.split("history")[0] and "U makes it current" in shown
        await pilot.press("U")
        await settle(pilot)
        with open_home(demo_home) as mem:
            assert mem.get(old).superseded_at is None
        assert any("current again" in m for m in messages(app))
        await pilot.press("U")  # not superseded any more: a clear message, nothing breaks
        await settle(pilot)
        assert any("not superseded" in m for m in messages(app, "error"))

    drive(app, body)
