"""At 80×24, by key presses: every key a screen offers is in its footer, whole, or listed by `?`,
and the dashboard shows all five of its panels."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import HelpPanel
from textual.widgets._footer import FooterKey
from textual.widgets._key_panel import BindingsTable

from tests.tui.conftest import make_app, settle
from tests.tui.test_app import drive
from tiermem.tui.app import TiermemApp
from tiermem.tui.app.widgets.nav import SCREENS

SIZE = (80, 24)


def footer_keys(app: TiermemApp) -> dict[str, FooterKey]:
    """The footer's keys drawn whole inside the terminal, by action."""
    width, height = SIZE
    return {
        k.action: k
        for k in app.screen.query(FooterKey)
        if k.region.width > 0
        and k.region.x >= 0
        and k.region.right <= width
        and 0 <= k.region.y < height
    }


def test_every_shown_key_of_every_screen_is_whole_in_the_footer_at_80x24(
    demo_home: Path,
) -> None:
    app = make_app(demo_home)
    missing: dict[str, list[str]] = {}

    async def body(pilot: Pilot[None]) -> None:
        for key, mode, _ in SCREENS:
            await pilot.press(key)
            await settle(pilot)
            assert app.screen.id == mode or app.current_mode == mode
            visible = footer_keys(app)
            wanted = [
                b.description
                for _, b, _, _ in app.screen.active_bindings.values()
                if b.show and b.action not in visible
            ]
            if wanted:
                missing[mode] = wanted
            assert "toggle_keys" in visible or "app.toggle_keys" in visible, mode

    drive(app, body, size=SIZE)
    assert missing == {}


def test_question_mark_lists_every_key_of_the_screen_including_those_not_in_the_footer(
    demo_home: Path,
) -> None:
    app = make_app(demo_home)
    unlisted: dict[str, list[str]] = {}

    async def body(pilot: Pilot[None]) -> None:
        for key, mode, _ in SCREENS:
            await pilot.press(key)
            await settle(pilot)
            await pilot.press("question_mark")
            await settle(pilot)
            table = app.screen.query_one(HelpPanel).query_one(BindingsTable)
            console = Console(width=200, record=True, file=io.StringIO())
            console.print(table.render_bindings_table())
            listed = " ".join(console.export_text().split())
            wanted = [
                b.description
                for _, b, _, _ in app.screen.active_bindings.values()
                if not b.system and b.description and b.description not in listed
            ]
            if wanted:
                unlisted[mode] = wanted
            await pilot.press("question_mark")
            await settle(pilot)
            assert not app.screen.query(HelpPanel)

    drive(app, body, size=SIZE)
    assert unlisted == {}


def test_the_dashboard_shows_all_five_panels_at_80x24(demo_home: Path) -> None:
    app = make_app(demo_home)
    cut: list[str] = []

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("1")
        await settle(pilot)
        for panel in ("#tiers", "#today", "#dash-sync", "#dash-categories", "#dash-latest"):
            region = app.screen.query_one(panel).region
            # a border, a line of content, a border; inside the terminal, above the footer
            if region.height < 3 or region.bottom > SIZE[1] - 1 or region.right > SIZE[0]:
                cut.append(f"{panel} {region}")

    drive(app, body, size=SIZE)
    assert cut == []
