"""The footer with Quit first, so it stays visible however many keys a screen has (at 80
columns the last keys are cut off). `FooterKey` comes from Textual's private module: Textual is
pinned to 8.2 in pyproject, and the snapshot tests would show a change."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

QUIT_ACTIONS = ("quit", "app.quit")


class QuitFirstFooter(Footer):
    _shown: tuple[Any, ...] | None = None

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._shown = self._keys()
        widgets = list(super().compose())
        first = [w for w in widgets if isinstance(w, FooterKey) and w.action in QUIT_ACTIONS]
        yield from first
        yield from (w for w in widgets if w not in first)

    async def recompose(self) -> None:
        """Rebuild only when the keys shown change: opening a screen signals its bindings
        several times (mount, focus), and each rebuild restyles every key."""
        if self._bindings_ready and self._keys() == self._shown:
            return
        await super().recompose()

    def _keys(self) -> tuple[Any, ...]:
        active = self.screen.active_bindings.values()
        keys = tuple((b.key, b.description, b.action, b.show, on, tip) for _, b, on, tip in active)
        return (self.compact, self.show_command_palette, keys)
