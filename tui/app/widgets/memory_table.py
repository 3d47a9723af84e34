"""A table of memories that is filled a page at a time and keeps its cursor across reloads."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets.data_table import ColumnKey, RowDoesNotExist

from tiermem.core.curate import Listed
from tiermem.tui.app.widgets.format import day, one_line
from tiermem.tui.app.widgets.plain_table import PlainTable

TEXT_WIDTH = 56
CATEGORY_WIDTH = 16


@dataclass(frozen=True)
class ListedRow:
    listed: Listed
    score: float


class MemoryTable(PlainTable):
    """Rows keyed by memory id: pin, tier, score, created, category, text."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "scroll_top", "Top", show=False),
        Binding("G", "scroll_bottom", "Bottom", show=False),
    ]

    class ViewMoved(Message):
        """The view scrolled or resized, which may bring the last row into sight."""

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._rows: list[ListedRow] = []
        self._width = TEXT_WIDTH

    def on_mount(self) -> None:
        self.add_column("", key="pin", width=1)
        self.add_column("tier", key="tier", width=6)
        self.add_column("score", key="score", width=5)
        self.add_column("created", key="created", width=10)
        self.add_column("category", key="category", width=CATEGORY_WIDTH)
        self.add_column("text", key="text", width=TEXT_WIDTH)

    def _text_width(self) -> int:
        """The text column takes the room the others leave (no sideways scrolling)."""
        fixed = 1 + 6 + 5 + 10 + CATEGORY_WIDTH + 2 * 6 + 1  # widths, cell padding, scrollbar
        return max(12, self.size.width - fixed) if self.size.width else TEXT_WIDTH

    def current_id(self) -> str | None:
        if not self.row_count:
            return None
        row_key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return None if row_key.value is None else str(row_key.value)

    def fill(self, rows: Sequence[ListedRow], keep: str | None = None, top: bool = False) -> None:
        """Replace the rows; the cursor stays on `keep` if it is still there, else near (or
        goes to the top for a new result set)."""
        old_row = 0 if top else self.cursor_row
        self.clear()
        self._rows = []
        self.columns[ColumnKey("text")].width = self._width = self._text_width()
        self._add(rows)
        if not rows:
            return
        index = min(old_row, len(rows) - 1)
        if keep is not None:
            with contextlib.suppress(RowDoesNotExist):
                index = self.get_row_index(keep)
        self.move_cursor(row=index, animate=False, scroll=True)

    def append(self, rows: Sequence[ListedRow]) -> None:
        self._add(rows)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.post_message(self.ViewMoved())

    def on_resize(self) -> None:
        self.post_message(self.ViewMoved())
        if self._rows and self._text_width() != self._width:
            self.fill(list(self._rows), keep=self.current_id())

    def _add(self, rows: Sequence[ListedRow]) -> None:
        for row in rows:
            m = row.listed.record
            if m.id in self.rows:
                continue
            self._rows.append(row)
            self.add_row(
                Text("●", style="bold") if row.listed.pinned else "",
                Text(m.tier, style=_TIER_STYLE.get(m.tier, "")),
                f"{row.score:.2f}",
                day(m.created_at),
                one_line(m.category, CATEGORY_WIDTH),
                one_line(m.text, self.columns[ColumnKey("text")].width),
                key=m.id,
            )


_TIER_STYLE = {"warm": "bold", "cold": "", "frozen": "dim"}
