"""SVG snapshots of every screen at 80×24 and 120×40 on the deterministic demo home.

Update after a deliberate change with `pytest tests/tui --snapshot-update`, then look at the
diff of the SVGs before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot

from tests.tui.conftest import make_app, settle

SCREENS = {
    "dashboard": "1",
    "tree": "2",
    "memories": "3",
    "hot": "4",
    "metrics": "5",
    "sync": "6",
    "graph": "7",
}
SIZES = [(80, 24), (120, 40)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_screen(
    snap_compare: Callable[..., bool], demo_home: Path, screen: str, size: tuple[int, int]
) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press(SCREENS[screen])
        await settle(pilot)

    assert snap_compare(make_app(demo_home), terminal_size=size, run_before=run_before)


def test_search_with_explanation(snap_compare: Callable[..., bool], demo_home: Path) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("3", "slash", *"hackathon deadline")
        await settle(pilot)

    assert snap_compare(make_app(demo_home), terminal_size=(120, 40), run_before=run_before)


def test_forget_confirmation(snap_compare: Callable[..., bool], demo_home: Path) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("3")
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)

    assert snap_compare(make_app(demo_home), terminal_size=(80, 24), run_before=run_before)


def test_edit_form_with_metadata(snap_compare: Callable[..., bool], demo_home: Path) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("3", "slash", *"deploys", "enter")
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)

    assert snap_compare(make_app(demo_home), terminal_size=(80, 24), run_before=run_before)


def test_sync_conflicts_tab(snap_compare: Callable[..., bool], demo_home: Path) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        await pilot.press(*"]]]")
        await settle(pilot)

    assert snap_compare(make_app(demo_home), terminal_size=(80, 24), run_before=run_before)


def test_consolidation_report(snap_compare: Callable[..., bool], demo_home: Path) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("C", "down", "enter")  # daily
        await settle(pilot)

    assert snap_compare(make_app(demo_home), terminal_size=(80, 24), run_before=run_before)


def test_light_theme(snap_compare: Callable[..., bool], demo_home: Path) -> None:
    async def run_before(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("T", "3")
        await settle(pilot)

    assert snap_compare(make_app(demo_home), terminal_size=(120, 40), run_before=run_before)
