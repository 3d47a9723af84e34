"""Sync: the engine's state (this device, last push, errors, next retry), the outbox of
critical-state changes waiting to be pushed, push now, and the restore flow.

The sync engine (`tiermem.sync`) is imported only inside the workers: it brings httpx and
cryptography, which the first paint does not need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.tui.messages import ActionDone, ActionFailed, describe_error
from tiermem.tui.screens.base import DataScreen
from tiermem.tui.screens.modals import Field, FormModal
from tiermem.tui.widgets.format import stamp


@dataclass(frozen=True)
class SyncView:
    outbox: list[tuple[int, str, str, float]]
    state: str
    """'not set up', 'pending' (init did not finish) or 'ready'."""
    url: str | None = None
    device: str | None = None
    epoch: int | None = None
    inflight: str | None = None
    last_push: float | None = None
    last_version: str | None = None
    pushes: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    next_retry: float | None = None
    secrets: str = ""
    notes: list[str] = field(default_factory=list)


def sync_view(mem: Memory) -> SyncView:
    """The outbox and the engine's status (no network)."""
    from tiermem.sync.engine import SyncEngine

    outbox = snapshot.pending(mem.db, mem.agent_id)
    with SyncEngine(mem) as engine:
        s = engine.status()
    if s.status is None:
        return SyncView(outbox, "not set up", notes=["set up with `tiermem sync init --url URL`"])
    return SyncView(
        outbox,
        s.status,
        url=s.url,
        device=s.device_id,
        epoch=s.epoch,
        inflight=s.inflight_version,
        last_push=s.last_push_at,
        last_version=s.last_push_version,
        pushes=s.pushes,
        last_error=s.last_error,
        last_error_at=s.last_error_at,
        next_retry=s.retry_at,
        secrets=f"{s.secret_store} store · token {s.token_source} · "
        f"passphrase {'on' if s.passphrase else 'off'}",
    )


def push_now(mem: Memory) -> str:
    """One push attempt (the daemon is the one that keeps retrying)."""
    from tiermem.sync.engine import SyncEngine
    from tiermem.sync.retry import RetryPolicy

    with SyncEngine(mem) as engine:
        result = engine.push(RetryPolicy(max_attempts=1))
    if not result.pushed:
        return result.note
    return (
        f"pushed version {result.version} ({result.changes} change(s), "
        f"{result.seconds * 1000:.0f} ms)"
    )


def restore_fields(agent_id: str) -> list[Field]:
    return [
        Field("url", "Database URL", placeholder="libsql://…", required=True),
        Field("token", "Token", placeholder="empty: $TIERMEM_SYNC_TOKEN or none"),
        Field("agent", "Agent", agent_id, required=True),
        Field("recovery_key", "Recovery key", placeholder="the key shown at `sync init`"),
        Field("passphrase", "or passphrase", placeholder="if the vault has one"),
    ]


def restore_agent(home: Path, values: dict[str, str]) -> str:
    """Restore an agent's critical state into this home (it must hold no memory of it)."""
    from tiermem.sync import crypto
    from tiermem.sync.restore import restore
    from tiermem.sync.secrets import ENV_TOKEN, env_secret

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
    )
    return (
        f"restored {result.agent_id!r}: {result.lessons} lesson(s), {result.tree_nodes} tree "
        f"node(s), version {result.version}"
    )


class SyncScreen(DataScreen[SyncView]):
    MODE = "sync"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("P", "app.push", "Push now"),
        Binding("R", "restore", "Restore"),
    ]

    def compose_body(self) -> ComposeResult:
        with Vertical(id="sync-body"):
            yield Static("…", id="sync-state", classes="panel")
            yield DataTable(id="outbox", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#sync-state").border_title = "Sync"
        table = self.query_one("#outbox", DataTable)
        table.border_title = "Outbox: changes of critical state (hot + tree) to push"
        table.add_columns("#", "kind", "reason", "queued")

    def fetch(self, memory: Memory) -> SyncView:
        return sync_view(memory)

    def show(self, data: SyncView) -> None:
        retry = stamp(data.next_retry) if data.next_retry else "-"
        lines = [
            f"[b]state[/b] {data.state}"
            + (f" · {data.url} · epoch {data.epoch}" if data.url else "")
            + f"   [b]outbox[/b] {len(data.outbox)} pending",
            f"[b]last push[/b] {stamp(data.last_push)}"
            + (f" (version {data.last_version})" if data.last_version else "")
            + f" · {data.pushes} push(es) from this home   [b]next retry[/b] {retry}",
            f"[b]last error[/b] {data.last_error or '-'}"
            + (f" ({stamp(data.last_error_at)})" if data.last_error_at else ""),
        ]
        if data.device:
            lines.append(f"[b]this device[/b] {data.device[:16]}… · {data.secrets}")
        if data.inflight:
            lines.append(f"[b]in flight[/b] {data.inflight} (sent again until confirmed)")
        lines += [f"[dim]{n}[/dim]" for n in data.notes]
        self.query_one("#sync-state", Static).update("\n".join(lines))
        table = self.query_one("#outbox", DataTable)
        table.clear()
        for seq, kind, reason, created in data.outbox[-500:]:
            table.add_row(str(seq), kind, reason, stamp(created), key=str(seq))

    def action_restore(self) -> None:
        memory = self.tiermem.memory
        if memory is None:
            return

        def chosen(values: dict[str, str] | None) -> None:
            if values is not None:
                self.notify("restoring…", timeout=3)
                self._restore(memory.home.root, values)

        self.app.push_screen(
            FormModal(
                "Restore an agent from sync",
                restore_fields(self.tiermem.agent_id),
                note="Brings back hot memory and the tree into this home; the agent must have "
                "no memory here yet.",
            ),
            chosen,
        )

    @work(thread=True, exclusive=True, group="restore", exit_on_error=False)
    def _restore(self, home: Path, values: dict[str, str]) -> None:

        try:
            text = restore_agent(home, values)
        except Exception as exc:
            self.post_message(ActionFailed(describe_error(exc), "restore failed"))
            return
        self.post_message(ActionDone(text))
        self.app.call_from_thread(self.tiermem.open_agent, values["agent"].strip())
