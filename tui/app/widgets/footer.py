"""The footer: Quit first, then every key the screen shows, wrapped onto as many lines as the
terminal's width needs, so no key is cut off at 80 columns (Textual's own footer is one line
that cuts what does not fit). `FooterKey` comes from Textual's private module: Textual is
pinned to 8.2 in pyproject, and the snapshot tests would show a change."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

QUIT_ACTIONS = ("quit", "app.quit")
PALETTE_EXTRA = 2
"""The palette key's border and right padding."""


class FooterRow(HorizontalGroup):
    """One line of keys."""


class QuitFirstFooter(Footer):
    DEFAULT_CSS = """
    QuitFirstFooter {
        layout: vertical;
        height: auto;
    }
    QuitFirstFooter FooterRow {
        height: 1;
        width: 1fr;
    }
    """
    _shown: tuple[Any, ...] | None = None

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._shown = self._keys()
        widgets = list(super().compose())
        keys = [w for w in widgets if isinstance(w, FooterKey)]
        palette = [k for k in keys if k.has_class("-command-palette")]
        shown = [k for k in keys if k not in palette]
        shown.sort(key=lambda k: k.action not in QUIT_ACTIONS)  # stable: Quit first
        width = self._width()
        room = width - sum(key_width(k) + PALETTE_EXTRA for k in palette)
        for number, row in enumerate(wrap(shown, room, width)):
            yield FooterRow(*row, *(palette if number == 0 else []))

    async def recompose(self) -> None:
        """Rebuild only when the keys shown or the width change: opening a screen signals its
        bindings several times (mount, focus), and each rebuild restyles every key."""
        if self._bindings_ready and self._keys() == self._shown:
            return
        await super().recompose()

    def on_resize(self) -> None:
        if self._bindings_ready and self._keys() != self._shown:
            self.call_after_refresh(self.recompose)

    def _keys(self) -> tuple[Any, ...]:
        active = self.screen.active_bindings.values()
        keys = tuple((b.key, b.description, b.action, b.show, on, tip) for _, b, on, tip in active)
        return (self.compact, self.show_command_palette, self._width(), keys)

    def _width(self) -> int:
        """The footer's width once laid out (narrower beside the keys panel), else the app's."""
        return self.size.width or self.app.size.width


def key_width(key: FooterKey) -> int:
    """The cells a key takes: ` k ` then `description ` (the footer's padding)."""
    return cell_len(key.key_display) + 2 + (cell_len(key.description) + 1 if key.description else 0)


def wrap(keys: list[FooterKey], first: int, rest: int) -> Iterator[list[Widget]]:
    """The keys in order, a line at a time: `first` cells on the first line (beside the
    palette key), `rest` on the others."""
    row: list[Widget] = []
    used, room = 0, first
    for key in keys:
        width = key_width(key)
        if row and used + width > room:
            yield row
            row, used, room = [], 0, rest
        row.append(key)
        used += width
    yield row
