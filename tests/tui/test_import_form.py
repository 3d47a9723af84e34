"""Importing from another tool in the TUI, by key presses: `I` opens the form, the import runs
with a progress bar, and what it brought in is searchable; a wrong format changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import ProgressBar

from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tiermem.core.engine import Memory
from tiermem.tui.app.screens.importing import ImportModal
from tiermem.tui.app.screens.modals import FormModal

SLACK = Path(__file__).resolve().parents[1] / "fixtures" / "import" / "slack"


def count(home: Path) -> int:
    with Memory(home, "default", clock=FixedClock(NOW)) as mem:
        return sum(mem.memories.counts().values())


def run(home: Path, fmt: str, path: str) -> list[str]:
    """Type the form as a person would; returns the notifications shown afterwards."""
    app = make_app(home)
    seen: list[bool] = []

    async def body(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("I")
        await settle(pilot)
        assert isinstance(app.screen, FormModal)
        await pilot.press(*fmt, "tab", *path, "ctrl+s")
        for _ in range(40):
            if isinstance(app.screen, ImportModal):
                seen.append(bool(app.screen.query(ProgressBar)))
            await settle(pilot)
            if not isinstance(app.screen, ImportModal | FormModal):
                break

    async def main() -> None:
        async with app.run_test(size=(110, 34), notifications=True) as pilot:
            await body(pilot)

    asyncio.run(main())
    if fmt == "slack":
        assert seen == [] or all(seen)  # the dialog, while it was up, showed its bar
    return [n.message for n in app._notifications]


def test_i_imports_a_slack_export_with_a_progress_bar(demo_home: Path) -> None:
    before = count(demo_home)
    notes = run(demo_home, "slack", str(SLACK))
    assert any(n.startswith("imported") for n in notes), notes
    after = count(demo_home)
    assert after > before
    again = run(demo_home, "slack", str(SLACK))  # idempotent: nothing new the second time
    assert any("already imported" in n for n in again) and count(demo_home) == after


def test_an_unknown_format_is_one_line_and_changes_nothing(demo_home: Path) -> None:
    before = count(demo_home)
    notes = run(demo_home, "evernote", str(SLACK))
    assert any("unknown format 'evernote'" in n for n in notes), notes
    assert count(demo_home) == before
