"""Importing another tool's memory or a chat history from the TUI: a form for the format and
the path, then a dialog with a progress bar while `core.importers` applies the plan."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import ProgressBar, Static

from tiermem.core import importers
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.importers.base import Conversation
from tiermem.core.printable import printable
from tiermem.tui.app.screens.modals import Field

IMPORT_FIELDS = [
    Field("format", "Format", "", " | ".join(importers.FORMATS), required=True),
    Field("path", "File or folder", "", "where the other tool keeps it", required=True),
]


def check_format(name: str) -> str:
    """The format as typed, or a one-line error naming the ones there are."""
    fmt = name.strip().lower()
    if fmt not in importers.FORMATS:
        raise InvalidInput(f"unknown format {name!r}: one of {', '.join(importers.FORMATS)}")
    return fmt


class ImportModal(ModalScreen[str | None]):
    """Plans and applies one import in a worker; the bar counts conversations (a memory tool's
    files are one step). Dismissed with the summary, or None after a failure (notified)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, memory: Memory, fmt: str, path: Path) -> None:
        super().__init__(classes="modal")
        self.memory = memory
        self.fmt = fmt
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = f"Importing {self.fmt}"
            yield Static(printable(str(self.path)), classes="note", markup=False)
            yield ProgressBar(id="import-progress", show_eta=False)

    def on_mount(self) -> None:
        self.run_import()

    @work(thread=True, exclusive=True, group="import", exit_on_error=False)
    def run_import(self) -> None:
        bar = self.query_one(ProgressBar)
        try:
            plan = importers.plan(self.fmt, self.path, importers.context_of(self.memory))
            self.app.call_from_thread(bar.update, total=max(1, len(plan.conversations)))

            def tick(_conversation: Conversation) -> None:
                self.app.call_from_thread(bar.advance, 1)

            summary = importers.apply(self.memory, plan, tick)
        except Exception as exc:
            self.app.call_from_thread(self._failed, exc)
            return
        self.app.call_from_thread(bar.update, progress=bar.total or 1)
        text = (
            f"imported {summary.stored} facts ({summary.merged} merged), "
            f"{summary.conversations} conversations; already imported: {summary.already_imported}"
        )
        self.app.call_from_thread(self._finish, text)

    def _finish(self, text: str) -> None:
        if self in self.app.screen_stack:
            self.dismiss(text)
        else:  # closed while it ran: say it is done all the same
            self.app.notify(text, title="import done", timeout=6)

    def _failed(self, exc: Exception) -> None:
        self.app.notify(str(exc), title="import failed", severity="error", timeout=8)
        if self in self.app.screen_stack:
            self.dismiss(None)

    def action_close(self) -> None:
        """Closing leaves a running import to finish in the background."""
        self.dismiss(None)
