"""The Graph screen by key presses: entities listed, the highlighted one's relations with their
time spans and the memories and episodes that mention it; the dashboard counts the new tiers."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tests.tui.test_app import drive
from tiermem.core.engine import Memory
from tiermem.core.graph.store import GraphStore
from tiermem.tui.app import TiermemApp
from tiermem.tui.app.screens import graph as graph_screen
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
        assert "relations 10" in line

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


def test_typing_a_filter_finds_an_entity_beyond_the_listed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table lists the most mentioned entities only (`ENTITIES`); `/` and a name reach the
    rest, and the count says how many are listed of how many."""
    monkeypatch.setattr(graph_screen, "ENTITIES", 3)
    home = tmp_path / "home"
    with Memory(home, clock=FixedClock(NOW)) as mem, mem.db.transaction():
        store = GraphStore(mem.db, mem.agent_id)
        for name in ("Alpha", "Bravo", "Charlie", "Delta", "Zephyrine"):
            store.resolve(name, "person", NOW)
    app = make_app(home)

    def listed() -> list[str]:
        table = app.screen.query_one("#entities", DataTable)
        return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]

    def subtitle() -> str:
        return str(app.screen.query_one("#entities", DataTable).border_subtitle)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("7")
        await settle(pilot)
        assert len(listed()) == 3 and "Zephyrine" not in listed()
        assert subtitle().startswith("3 of 5 entities")
        await pilot.press("slash", "a")  # four names hold an "a": three listed, more match
        await settle(pilot)
        assert len(listed()) == 3 and subtitle().startswith("3+ of 5 entities match the filter")
        await pilot.press("backspace", *"zeph")
        await settle(pilot)
        assert listed() == ["Zephyrine"] and detail(app).startswith("Zephyrine")
        assert subtitle().startswith("1 of 5 entities match the filter")
        await pilot.press(*"xx")
        await settle(pilot)
        assert listed() == [] and "no entity matches the filter" in detail(app)
        await pilot.press("escape", "escape")  # back to the table, then the filter cleared
        await settle(pilot)
        assert len(listed()) == 3

    drive(app, body, size=(120, 40))
