"""The spaces dialog (S): the home's spaces listed with what the agent includes, a space
included as a writer or a reader and excluded by keys, and the highlighted space's memories
shown with the member who wrote each."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from tests.tui.conftest import make_app
from tests.tui.test_app import drive, goto, open_home
from tiermem.core import spaces
from tiermem.core.remember import Entry, remember
from tiermem.tui.app.screens.spaces import SpacesModal


def make_spaces(home: Path) -> None:
    """Two spaces created by agent 'lead', one memory written into 'team' by it."""
    with open_home(home, "lead") as mem:
        for name in ("ops", "team"):
            spaces.create(mem.db, name, "lead", mem.now())
            mem.open_space(name).close()
        remember(mem, Entry("The deploy runbook lives at ops/runbook.md", space="team"))


def roles(home: Path) -> dict[str, str]:
    with open_home(home) as mem:
        return {m.space: m.role for m in spaces.included(mem.db, "default")}


def test_include_as_reader_or_writer_and_exclude_by_keys(demo_home: Path) -> None:
    make_spaces(demo_home)
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "S")
        assert isinstance(app.screen, SpacesModal)
        listed = app.screen.query_one(OptionList)
        assert [str(listed.get_option_at_index(i).prompt) for i in range(2)] == [
            "  ops: 0 memories, 1 members",
            "  team: 1 memories, 1 members",
        ]
        await goto(pilot, "r")  # ops, highlighted first, as a reader
        assert roles(demo_home) == {"ops": "reader"}
        await goto(pilot, "down")
        detail = str(app.screen.query_one("#space-detail", Static).render())
        assert "lead: The deploy runbook lives at ops/runbook.md" in detail
        await goto(pilot, "i")
        assert roles(demo_home) == {"ops": "reader", "team": "writer"}
        assert str(listed.get_option_at_index(1).prompt).startswith("* team (writer)")
        await goto(pilot, "i")  # twice: refused, nothing changes
        assert roles(demo_home) == {"ops": "reader", "team": "writer"}
        await goto(pilot, "up")
        await goto(pilot, "x")
        assert roles(demo_home) == {"team": "writer"}
        await goto(pilot, "escape")
        assert not isinstance(app.screen, SpacesModal)

    drive(app, body)
