"""Importing another tool's memory or a chat history from the TUI: a form (the format chosen
from those there are, the path), then a dialog that either shows what a dry run would import
and skip (nothing written; Import from there goes ahead) or imports with a progress bar."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, ProgressBar, Select, Static

from tiermem.core import importers
from tiermem.core.engine import Memory
from tiermem.core.importers import ImportSummary
from tiermem.core.importers.base import Conversation
from tiermem.core.printable import printable

SKIPS_SHOWN = 8


@dataclass(frozen=True)
class ImportRequest:
    """What the form asks for: the format, the file or folder, and whether to only look."""

    fmt: str
    path: Path
    dry_run: bool


class ImportForm(ModalScreen[ImportRequest | None]):
    """The format from a list (no typing a name to get wrong), the path typed; ctrl+s imports,
    ctrl+r is the dry run, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit(False)", "Import"),
        Binding("ctrl+r", "submit(True)", "Dry run"),
    ]

    def __init__(self) -> None:
        super().__init__(classes="modal")

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog form") as dialog:
            dialog.border_title = "Import from another tool"
            yield Label("Format *")
            yield Select(
                [(name, name) for name in importers.FORMATS],
                prompt="choose the tool it comes from",
                id="f-format",
                compact=True,
            )
            yield Label("File or folder *")
            yield Input(placeholder="where the other tool keeps it", id="f-path", compact=True)
            yield Static(
                "A dry run shows what would be imported and skipped, and changes nothing.",
                classes="note",
            )
            with Horizontal(classes="buttons"):
                yield Button("Import (ctrl+s)", variant="primary", id="import")
                yield Button("Dry run (ctrl+r)", id="dry-run")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#f-format", Select).focus()

    def action_submit(self, dry_run: bool) -> None:
        fmt = self.query_one("#f-format", Select).value
        path = self.query_one("#f-path", Input).value.strip()
        missing = [
            label
            for label, empty in (("Format", not isinstance(fmt, str)), ("File or folder", not path))
            if empty
        ]
        if missing:
            self.notify(f"{', '.join(missing)} cannot be empty", severity="error")
            return
        self.dismiss(ImportRequest(str(fmt), Path(path).expanduser(), dry_run))

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted, "#f-path")
    def _entered(self) -> None:
        self.action_submit(False)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.action_submit(event.button.id == "dry-run")


def dry_run_text(summary: ImportSummary) -> str:
    """What a dry run found: the facts by category, the conversations, what was imported
    before, and each skip with its reason."""
    categories = ", ".join(f"{c} {n}" for c, n in summary.categories.items())
    lines = [
        f"would import {summary.new} facts" + (f" ({categories})" if categories else ""),
        f"and {summary.conversations} conversations through conversation-end",
        f"already imported: {summary.already_imported}",
        f"skipped: {len(summary.skipped)}",
    ]
    lines += [f"  - {why}" for why in summary.skipped[:SKIPS_SHOWN]]
    if len(summary.skipped) > SKIPS_SHOWN:
        lines.append(f"  … and {len(summary.skipped) - SKIPS_SHOWN} more")
    return "\n".join(lines)


class ImportModal(ModalScreen[str | None]):
    """Plans one import in a worker; a dry run shows its report (Import goes ahead), else the
    plan is applied with a bar counting conversations (a memory tool's files are one step).
    Dismissed with the summary, or None after a failure (notified) or when closed."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("ctrl+s", "go_ahead", "Import"),
    ]

    def __init__(self, memory: Memory, request: ImportRequest) -> None:
        super().__init__(classes="modal")
        self.memory = memory
        self.request = request
        self.looking = request.dry_run
        """True while it shows a dry run's report (nothing written yet)."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            verb = "Dry run:" if self.request.dry_run else "Importing"
            dialog.border_title = f"{verb} {self.request.fmt}"
            yield Static(printable(str(self.request.path)), classes="note", markup=False)
            yield Static("reading…", id="import-report", markup=False)
            yield ProgressBar(id="import-progress", show_eta=False)
            with Horizontal(classes="buttons"):
                yield Button("Import (ctrl+s)", variant="primary", id="import")
                yield Button("Close (esc)", id="close")

    def on_mount(self) -> None:
        self.query_one("#import-progress").display = not self.looking
        self.query_one("#import", Button).display = False
        self.run_import(self.looking)

    @work(thread=True, exclusive=True, group="import", exit_on_error=False)
    def run_import(self, dry_run: bool) -> None:
        bar = self.query_one(ProgressBar)
        fmt, path = self.request.fmt, self.request.path
        try:
            plan = importers.plan(fmt, path, importers.context_of(self.memory))
            if dry_run:
                text = dry_run_text(importers.summarize(self.memory, plan))
                self.app.call_from_thread(self._looked, text)
                return
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

    def _looked(self, text: str) -> None:
        self.query_one("#import-report", Static).update(text)
        self.query_one("#import", Button).display = True
        self.query_one("#import", Button).focus()

    def action_go_ahead(self) -> None:
        """From a dry run's report: import what it showed."""
        if not self.looking:
            return
        self.looking = False
        self.query_one("#import", Button).display = False
        self.query_one("#import-report", Static).update("importing…")
        self.query_one("#import-progress").display = True
        self.run_import(False)

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

    @on(Button.Pressed, "#import")
    def _import(self) -> None:
        self.action_go_ahead()

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)
