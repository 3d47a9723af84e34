"""A DataTable that shows its text as written.

DataTable parses every `str` cell as Rich markup and emoji codes, so a memory, an entity name or a
server's error holding `[/]` would crash the screen and `:smile:` would draw an emoji. Every
table of the TUI holds such data, so every table is this one.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from tiermem.tui.app.widgets.format import shown


def plain(cell: object) -> object:
    """A `str` cell as literal Text, control characters shown (`core.printable`); anything
    else (Text, numbers) unchanged."""
    return shown(cell) if isinstance(cell, str) else cell


class PlainTable(DataTable[Any]):
    """DataTable whose `str` cells are literal text, never markup."""

    def add_row(
        self,
        *cells: Any,
        height: int | None = 1,
        key: str | None = None,
        label: Any = None,
    ) -> RowKey:
        return super().add_row(*map(plain, cells), height=height, key=key, label=label)

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: Any,
        *,
        update_width: bool = False,
    ) -> None:
        super().update_cell(row_key, column_key, plain(value), update_width=update_width)
