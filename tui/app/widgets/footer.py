"""The footer with Quit first, so it stays visible however many keys a screen has (at 80
columns the last keys are cut off). `FooterKey` comes from Textual's private module: Textual is
pinned to 8.2 in pyproject, and the snapshot tests would show a change."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

QUIT_ACTIONS = ("quit", "app.quit")


class QuitFirstFooter(Footer):
    def compose(self) -> ComposeResult:
        widgets = list(super().compose())
        first = [w for w in widgets if isinstance(w, FooterKey) and w.action in QUIT_ACTIONS]
        yield from first
        yield from (w for w in widgets if w not in first)
