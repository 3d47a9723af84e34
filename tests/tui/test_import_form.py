"""Importing from another tool in the TUI, by key presses: `I` opens the form, the format is
chosen from a list, a dry run shows what would be imported and skipped without writing, and the
import runs with a progress bar; what it brought in is searchable."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Button, ProgressBar, Select, Static

from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tiermem.core import importers
from tiermem.core.engine import Memory
from tiermem.tui.app import TiermemApp
from tiermem.tui.app.screens.importing import ImportForm, ImportModal

SLACK = Path(__file__).resolve().parents[1] / "fixtures" / "import" / "slack"


def count(home: Path) -> int:
    with Memory(home, "default", clock=FixedClock(NOW)) as mem:
        return sum(mem.memories.counts().values())


async def fill(pilot: Pilot[None], fmt: str, path: str) -> None:
    """Open the form with I, pick `fmt` from the list with the arrow keys, type the path."""
    await pilot.press("I")
    await settle(pilot)
    assert isinstance(pilot.app.screen, ImportForm)
    if fmt:
        steps = importers.FORMATS.index(fmt) + 1  # below the prompt
        await pilot.press("enter", *["down"] * steps, "enter")
    await pilot.press("tab", *path)
    await settle(pilot)


async def until_closed(pilot: Pilot[None], seen: list[bool]) -> None:
    for _ in range(40):
        if isinstance(pilot.app.screen, ImportModal):
            seen.append(pilot.app.screen.query_one(ProgressBar).display)
        await settle(pilot)
        if not isinstance(pilot.app.screen, ImportModal | ImportForm):
            return


def drive(home: Path, body: Callable[[TiermemApp, Pilot[None]], Awaitable[None]]) -> list[str]:
    """Run `body`; the notifications shown afterwards."""
    app = make_app(home)

    async def main() -> None:
        async with app.run_test(size=(110, 34), notifications=True) as pilot:
            await settle(pilot)
            await body(app, pilot)

    asyncio.run(main())
    return [n.message for n in app._notifications]


def test_i_imports_a_slack_export_with_a_progress_bar(demo_home: Path) -> None:
    seen: list[bool] = []

    async def body(app: TiermemApp, pilot: Pilot[None]) -> None:
        await fill(pilot, "slack", str(SLACK))
        labels = [str(b.label) for b in app.screen.query(Button)]
        assert labels[0] == "Import (ctrl+s)" and not any("Save" in x for x in labels)
        await pilot.press("ctrl+s")
        await until_closed(pilot, seen)

    before = count(demo_home)
    notes = drive(demo_home, body)
    assert any(n.startswith("imported") for n in notes), notes
    assert seen == [] or all(seen)  # the dialog, while it was up, showed its bar
    after = count(demo_home)
    assert after > before
    again = drive(demo_home, body)  # idempotent: nothing new the second time
    assert any("already imported" in n for n in again) and count(demo_home) == after


def test_the_format_is_chosen_from_the_formats_there_are(demo_home: Path) -> None:
    async def body(app: TiermemApp, pilot: Pilot[None]) -> None:
        await pilot.press("I")
        await settle(pilot)
        select = app.screen.query_one("#f-format", Select)
        assert [value for _, value in select._options[1:]] == list(importers.FORMATS)
        await pilot.press("tab", *str(SLACK), "ctrl+s")  # no format chosen
        await settle(pilot)
        assert isinstance(app.screen, ImportForm)

    before = count(demo_home)
    notes = drive(demo_home, body)
    assert "Format cannot be empty" in notes
    assert count(demo_home) == before


def test_a_dry_run_shows_what_would_be_imported_and_skipped_and_writes_nothing(
    demo_home: Path,
) -> None:
    reports: list[str] = []
    before = count(demo_home)

    async def body(app: TiermemApp, pilot: Pilot[None]) -> None:
        await fill(pilot, "slack", str(SLACK))
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, ImportModal)
        reports.append(str(app.screen.query_one("#import-report", Static).render()))
        assert count(demo_home) == before  # looked, wrote nothing
        await pilot.press("ctrl+s")  # import what it showed
        await until_closed(pilot, [])

    notes = drive(demo_home, body)
    report = reports[0]
    assert "would import" in report and "conversations" in report, report
    assert "skipped: " in report and "already imported: 0" in report, report
    assert any(n.startswith("imported") for n in notes), notes
    assert count(demo_home) > before


def test_a_dry_run_of_a_missing_folder_is_one_line_and_changes_nothing(demo_home: Path) -> None:
    before = count(demo_home)

    async def body(app: TiermemApp, pilot: Pilot[None]) -> None:
        await fill(pilot, "slack", str(SLACK / "nothing-here"))
        await pilot.press("ctrl+r")
        await until_closed(pilot, [])

    notes = drive(demo_home, body)
    assert any("nothing-here" in n and "\n" not in n for n in notes), notes
    assert count(demo_home) == before
