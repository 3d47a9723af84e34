"""The TUI's Conflicts tab lists a memory both devices edited by its text and resolves it with
the keys a person types (Textual Pilot); the resolution reaches the other device. A real sqld
with JWT auth."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, TabbedContent

from tests.sync.memory_conflictkit import Vault, make_vault, run_order
from tests.sync.sqld import SqldServer
from tests.tui.conftest import settle
from tiermem.tui.app.app import TiermemApp
from tiermem.tui.app.screens.sync import SyncScreen


@pytest.fixture
def vault(
    capsys: pytest.CaptureFixture[str],
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Vault:
    return make_vault(capsys, agent_id, sqld, monkeypatch, tmp_path)


def test_the_tui_conflicts_tab_lists_a_memory_conflict_by_its_text_and_resolves_it(
    vault: Vault,
) -> None:
    v = vault
    v.tm(v.desk, "edit", v.memory_id, "--text", "desk says 1111")
    v.tm(v.phone, "edit", v.memory_id, "--text", "phone says 2222")
    run_order(v, "desk pushes, phone merges")
    app = TiermemApp(v.desk, v.tm.agent_id)

    async def body(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("6")  # the Sync screen
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SyncScreen)
        tabs = screen.query_one(TabbedContent)
        assert str(tabs.get_tab("tab-conflicts").label) == "Conflicts (1)"
        for _ in range(3):
            await pilot.press("right_square_bracket")
        await settle(pilot)
        assert tabs.active == "tab-conflicts"
        table = screen.query_one("#conflicts", DataTable)
        about, item, field = (str(cell) for cell in table.get_row_at(0)[1:4])
        assert (about, item, field) == ("phone says 2222", f"memory/{v.memory_id}", "text")
        await pilot.press("t")  # take the value that lost: the desk's own text
        await settle(pilot)
        assert str(tabs.get_tab("tab-conflicts").label) == "Conflicts (0)"
        assert str(table.get_row_at(0)[1]) == "desk says 1111"

    async def main() -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await body(pilot)

    asyncio.run(main())
    assert v.state(v.desk)["text"] == "desk says 1111"
    v.tm(v.desk, "sync", "now")
    v.tm(v.phone, "sync", "now")
    assert v.state(v.phone)["text"] == "desk says 1111"
    assert v.conflicts(v.phone) == []
