"""The Graph screen by key presses: entities listed, the highlighted one's relations with their
time spans and the memories and episodes that mention it; the dashboard counts the new tiers."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tests.tui.test_app import drive
from tiermem.core.engine import Memory
from tiermem.core.graph.store import GraphStore
from tiermem.tui.app import TiermemApp
from tiermem.tui.app.screens.graph import GraphScreen


def detail(app: TiermemApp) -> str:
    return str(app.screen.query_one("#entity", Static).render())


def test_key_7_lists_entities_and_moving_down_shows_the_next_ones_relations(
    demo_home: Path,
) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("7")
        await settle(pilot)
        assert isinstance(app.screen, GraphScreen)
        table = app.screen.query_one("#entities", DataTable)
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert {"EvoClaw", "Priya", "Marco"} <= set(names)
        first = detail(app)
        assert first.startswith(names[0])
        for _ in range(names.index("Priya")):
            await pilot.press("down")
        await settle(pilot)
        shown = detail(app)
        assert (
            shown.startswith("Priya") and "Priya → works_at → Acme Labs (since 2026-01-01)" in shown
        )
        assert "episodes (1)" in shown and "memories (" in shown

    drive(app, body, size=(120, 40))


def test_the_owners_relation_shows_its_time_span(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("7")
        await settle(pilot)
        table = app.screen.query_one("#entities", DataTable)
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        for _ in range(names.index("User")):
            await pilot.press("down")
        await settle(pilot)
        assert "User → lives_in → Paris (since 2026-01-01)" in detail(app)

    drive(app, body, size=(120, 40))


def test_the_dashboard_counts_episodes_entities_and_relations(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        line = str(app.screen.query_one("#tier-graph", Static).render())
        assert line.startswith("episodes 3 (3 to dream) · entities ")
        assert "relations 3" in line

    drive(app, body, size=(120, 40))


def test_an_entity_named_like_markup_is_listed_as_written(tmp_path: Path) -> None:
    """Entity names come from what the agent was told: `[/]` in one is text, not markup."""
    home = tmp_path / "home"
    with Memory(home, clock=FixedClock(NOW)) as mem, mem.db.transaction():
        GraphStore(mem.db, mem.agent_id).resolve("Team [/] Alpha", "org", NOW)
    app = make_app(home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("7")
        await settle(pilot)
        table = app.screen.query_one("#entities", DataTable)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == ["Team [/] Alpha"]
        assert detail(app).startswith("Team [/] Alpha")

    drive(app, body, size=(120, 40))
