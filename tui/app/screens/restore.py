"""The restore dialog: the form's fields, the restore itself (in a worker), and a modal showing
its progress (rows read of the total, the phase, when the home became usable), then its outcome.

The sync engine is imported inside the worker: it brings httpx and cryptography, which the first
paint does not need.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import ProgressBar, Static

from tiermem.core.errors import InvalidInput
from tiermem.core.printable import printable
from tiermem.tui.app.messages import ActionDone, ActionFailed, describe_error
from tiermem.tui.app.screens.modals import Field
from tiermem.tui.app.widgets.format import shown

if TYPE_CHECKING:
    from tiermem.sync.restore import RestoreProgress


def restore_fields(agent_id: str) -> list[Field]:
    return [
        Field("url", "Database URL", placeholder="libsql://…", required=True),
        Field("token", "Token", placeholder="empty: $TIERMEM_SYNC_TOKEN or none"),
        Field("agent", "Agent", agent_id, required=True),
        Field("recovery_key", "Recovery key", placeholder="the key shown at `sync init`"),
        Field("passphrase", "or passphrase", placeholder="if the vault has one"),
        Field("at", "As of", placeholder="empty: newest; or 2026-11-20T14:30, or a version"),
    ]


def restore_agent(
    home: Path, values: dict[str, str], progress: Callable[[RestoreProgress], None] | None = None
) -> str:
    """Restore an agent into this home (it must hold no memory of it): the critical state
    first, then every memory, swapped in at once."""
    # lazy: the sync engine brings httpx and cryptography, not needed for the first paint
    from tiermem.sync import crypto
    from tiermem.sync.devices.secret_store import ENV_TOKEN, env_secret
    from tiermem.sync.restore import restore

    key, passphrase = values["recovery_key"].strip(), values["passphrase"]
    if bool(key) == bool(passphrase):
        raise InvalidInput("give the recovery key or the passphrase (one of them)")
    token = values["token"].strip() or env_secret(ENV_TOKEN) or None
    result = restore(
        home,
        values["agent"].strip(),
        values["url"].strip(),
        token,
        recovery_key=crypto.parse_recovery_key(key) if key else None,
        passphrase=passphrase or None,
        store_token=bool(values["token"].strip()),
        at=values.get("at", "").strip() or None,
        progress=progress,
    )
    return (
        f"restored {result.agent_id!r}: {result.memories} memories, {result.lessons} "
        f"lesson(s), {result.tree_nodes} tree node(s), version {result.version}"
    )


class RestoreStep(Message):
    def __init__(self, progress: RestoreProgress) -> None:
        super().__init__()
        self.progress = progress


PHASES = {
    "critical": "hot memory and tree",
    "memories": "memories",
    "swap": "swapping in",
    "done": "done",
}


class RestoreModal(ModalScreen[str | None]):
    """Runs a restore, shows its progress (rows read of the total, the phase, when the home
    became usable), then its outcome; returns the restored agent id."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, home: Path, values: dict[str, str]) -> None:
        super().__init__(classes="modal")
        self.home = home
        self.values = values
        self.running = True
        self.ok = False
        self.seen: list[RestoreProgress] = []

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog") as dialog:
            dialog.border_title = shown(f"Restore {self.values['agent'].strip()!r}")
            yield ProgressBar(total=None, show_eta=False, id="progress")
            yield Static("connecting…", id="stage", markup=False)
            yield Static("", id="report", markup=False)

    def on_mount(self) -> None:
        self._run()

    @work(thread=True, exclusive=True, group="restore", exit_on_error=False)
    def _run(self) -> None:
        def progress(step: RestoreProgress) -> None:
            self.post_message(RestoreStep(step))

        try:
            text = restore_agent(self.home, self.values, progress)
        except Exception as exc:
            self.app.call_from_thread(self._finished, "", describe_error(exc))
            return
        self.app.call_from_thread(self._finished, text, "")

    def on_restore_step(self, message: RestoreStep) -> None:
        p = message.progress
        self.seen.append(p)
        self.query_one(ProgressBar).update(total=max(1, p.total_rows), progress=p.rows)
        usable = " · usable now" if p.usable else ""
        self.query_one("#stage", Static).update(
            f"{PHASES.get(p.phase, p.phase)}: {p.rows:,}/{p.total_rows:,} rows, "
            f"{p.bytes / 1024:,.0f}/{p.total_bytes / 1024:,.0f} KB, {p.memories:,} memories"
            f"{usable}"
        )

    def _finished(self, text: str, error: str) -> None:
        self.running = False
        bar = self.query_one(ProgressBar)
        if error:
            self.query_one("#stage", Static).update("restore failed")
            self.query_one("#report", Static).update(f"{printable(error)}\n\nesc closes")
            self.app.post_message(ActionFailed(error, "restore failed"))
            return
        self.ok = True
        bar.update(total=bar.total or 1, progress=bar.total or 1)
        self.query_one("#report", Static).update(f"{printable(text)}\n\nesc closes")
        self.app.post_message(ActionDone(text))

    def action_close(self) -> None:
        if not self.running:
            self.dismiss(self.values["agent"].strip() if self.ok else None)
