"""PlainTable, the TUI's one table class: text put in by any of DataTable's entry points comes
out as written (DataTable itself parses `str` cells as markup and emoji codes)."""

from __future__ import annotations

import asyncio

from rich.text import Text
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate

from tiermem.tui.app.widgets.plain_table import PlainTable

CLOSING = "a closing tag [/] alone"
STYLED = "[bold]loud[/bold] and :smile:"


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield PlainTable()


def _shown(table: PlainTable, row: int) -> list[str]:
    cells = table._get_row_renderables(row).cells
    return [c.plain if isinstance(c, Text) else str(c) for c in cells]


def test_rows_added_and_cells_updated_show_markup_as_written() -> None:
    async def body() -> None:
        app = _Host()
        async with app.run_test() as pilot:
            table = app.query_one(PlainTable)
            table.add_columns("a", "b")
            table.add_row(CLOSING, STYLED, key="one")
            table.add_rows([(STYLED, CLOSING)])
            await pilot.pause()
            assert _shown(table, 0) == [CLOSING, STYLED]
            assert _shown(table, 1) == [STYLED, CLOSING]
            table.update_cell("one", table.ordered_columns[1].key, CLOSING)
            table.update_cell_at(Coordinate(1, 0), "[/]")
            await pilot.pause()
            assert _shown(table, 0) == [CLOSING, CLOSING]
            assert _shown(table, 1) == ["[/]", CLOSING]

    asyncio.run(body())


def test_styled_text_keeps_its_style() -> None:
    async def body() -> None:
        app = _Host()
        async with app.run_test() as pilot:
            table = app.query_one(PlainTable)
            table.add_columns("a")
            table.add_row(Text("warm", style="bold"))
            await pilot.pause()
            cell = table._get_row_renderables(0).cells[0]
            assert isinstance(cell, Text) and cell.plain == "warm" and str(cell.style) == "bold"

    asyncio.run(body())
