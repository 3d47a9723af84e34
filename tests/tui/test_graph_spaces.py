"""The Graph screen's search asks the graphs of the spaces the agent includes too, as `tiermem
graph search` does: a query typed with keys lists a space's entity labelled with its space,
and its detail opens from the space's graph."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from tests.clikit import Cli
from tests.tui.conftest import make_app, settle
from tests.tui.test_app import drive
from tiermem.tui.app import TiermemApp
from tiermem.tui.app.screens.graph import GraphScreen


@pytest.fixture
def home(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    """Bob includes the space `team`, whose graph knows Orchard; his own graph does not."""
    alice = Cli(capsys, tmp_path / "home", "alice")
    alice.json("spaces", "create", "team")
    alice.json("store", "--text", "Sam lives in Leeds and works on Orchard", "--space", "team")
    bob = Cli(capsys, tmp_path / "home", "bob")
    bob.json("store", "--text", "Priya lives in Lisbon and works on Atlas")
    bob.json("spaces", "include", "team", "--role", "reader")
    return tmp_path / "home"


def _rows(app: TiermemApp) -> list[tuple[str, str]]:
    table = app.screen.query_one("#entities", DataTable)
    return [
        (str(table.get_row_at(i)[0]), str(table.get_row_at(i)[3])) for i in range(table.row_count)
    ]


def test_a_typed_search_lists_a_spaces_entity_labelled_with_its_space(home: Path) -> None:
    app = make_app(home, agent_id="bob")

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("7")
        await settle(pilot)
        assert isinstance(app.screen, GraphScreen)
        assert ("Orchard", "team") not in _rows(app)  # the list is the agent's own graph
        await pilot.press("slash", *"orchard")
        await settle(pilot)
        assert _rows(app) == [("Orchard", "team")]
        detail = str(app.screen.query_one("#entity", Static).render())
        assert detail.startswith("Orchard") and "space team" in detail
        assert "Sam → works_on → Orchard" in detail
        await pilot.press(*["backspace"] * 7, *"sam")
        await settle(pilot)
        assert ("Sam", "team") in _rows(app)

    drive(app, body, size=(120, 40))
