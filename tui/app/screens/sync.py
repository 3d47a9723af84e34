"""Sync: the engine's state (this device, last push and pull, errors, next retry), then tabs
for the outbox of critical-state changes waiting to be pushed, the push/pull history (errors
included), the vault's devices and the conflicts merges recorded; push, pull or sync now,
resolve a conflict, and restore an agent (`screens.restore`).

The sync engine (`tiermem.sync`) is imported only inside the workers: it brings httpx and
cryptography, which the first paint does not need. The device list needs the network, so it
loads on its own (when the screen is shown, after a sync action, or on `D`), never on the
refreshes that follow every local write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import DataTable, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from tiermem.core import conflicts as conflicts_mod
from tiermem.core import snapshot
from tiermem.core.conflicts import Conflict
from tiermem.core.engine import Memory
from tiermem.tui.app.messages import describe_error
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.screens.modals import FormModal
from tiermem.tui.app.screens.restore import RestoreModal, restore_fields
from tiermem.tui.app.widgets.format import markup, one_line, stamp
from tiermem.tui.app.widgets.plain_table import PlainTable

if TYPE_CHECKING:
    from tiermem.sync.devices.membership import DeviceInfo
    from tiermem.sync.engine import PullResult, PushResult, SyncEvent

T = TypeVar("T")
TABS = ("outbox", "history", "devices", "conflicts")
HISTORY_ROWS = 200


@dataclass(frozen=True)
class Part(Generic[T]):
    """One tab's rows, or why there are none."""

    rows: list[T] = field(default_factory=list)
    note: str = ""


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
    last_pull: float | None = None
    pulls: int = 0
    pending_memories: int = 0
    pending_graph: int = 0
    """Episodes and entities changed since their last push."""
    last_error: str | None = None
    last_error_at: float | None = None
    next_retry: float | None = None
    secrets: str = ""
    notes: list[str] = field(default_factory=list)
    history: Part[SyncEvent] = field(default_factory=Part)
    conflicts: Part[Conflict] = field(default_factory=Part)
    about: dict[str, str] = field(default_factory=dict)
    """conflict id → what it is about (a memory's text, a tree node, a hot item)"""

    @property
    def errors(self) -> int:
        return sum(1 for h in self.history.rows if h.kind == "error")

    @property
    def open_conflicts(self) -> int:
        return sum(1 for c in self.conflicts.rows if not c.resolved)


def conflicts_part(mem: Memory) -> Part[Conflict]:
    """Open conflicts first, then the resolved ones (newest first in each)."""
    found = conflicts_mod.list_conflicts(mem.db, mem.agent_id, include_resolved=True)
    rows = [c for c in found if not c.resolved] + [c for c in found if c.resolved]
    return Part(rows, "" if rows else "no conflicts: every merge agreed")


def sync_view(mem: Memory) -> SyncView:
    """The outbox, the engine's status, its history and the conflicts (local: no network)."""
    # lazy: the sync engine brings httpx and cryptography, not needed for the first paint
    from tiermem.sync.engine import SyncEngine

    outbox = snapshot.pending(mem.db, mem.agent_id)
    conflicts = conflicts_part(mem)
    about = {c.id: conflicts_mod.about(mem.db, mem.agent_id, c, 32) for c in conflicts.rows}
    with SyncEngine(mem) as engine:
        s = engine.status()
        events = engine.history(HISTORY_ROWS) if s.status is not None else []
    history = Part(events, "" if events else "nothing pushed or pulled yet")
    if s.status is None:
        return SyncView(
            outbox,
            "not set up",
            notes=["set up with `tiermem sync init --url URL`, or R restores from a vault"],
            history=history,
            conflicts=conflicts,
            about=about,
        )
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
        last_pull=s.last_pull_at,
        pulls=s.pulls,
        pending_memories=s.pending_memories,
        pending_graph=s.pending_graph,
        last_error=s.last_error,
        last_error_at=s.last_error_at,
        next_retry=s.retry_at,
        secrets=f"{s.secret_store} store · token {s.token_source} · "
        f"passphrase {'on' if s.passphrase else 'off'}",
        history=history,
        conflicts=conflicts,
        about=about,
    )


def device_part(mem: Memory) -> Part[DeviceInfo]:
    """The vault's devices (asks the server: run apart from the local refreshes)."""
    # lazy: the sync engine brings httpx and cryptography, not needed for the first paint
    from tiermem.sync.devices.membership import list_devices
    from tiermem.sync.engine import SyncEngine

    with SyncEngine(mem) as engine:
        if engine.settings() is None:
            return Part(note="sync is not set up: no devices")
        rows = list_devices(engine, touch=False)
    return Part(rows, "" if rows else "no devices registered")


# -- actions (each runs in a worker and returns what to tell the person) ---------------------


def _pushed(result: PushResult) -> str:
    if not result.pushed:
        return result.note
    return (
        f"pushed version {result.version} ({result.changes} change(s), "
        f"{result.seconds * 1000:.0f} ms)"
    )


def _pulled(result: PullResult) -> str:
    text = (
        f"pulled {result.applied} change(s) ({result.memories} memories, "
        f"{result.critical} critical), {result.conflicts} conflict(s)"
    )
    if result.rejected:
        text += f", {result.rejected} rejected (run `tiermem sync check`)"
    return text


def push_now(mem: Memory) -> str:
    """One push attempt (the daemon is the one that keeps retrying)."""
    # lazy: the sync engine brings httpx and cryptography, not needed for the first paint
    from tiermem.sync.engine import SyncEngine
    from tiermem.sync.vault.retry import RetryPolicy

    with SyncEngine(mem) as engine:
        return _pushed(engine.push(RetryPolicy(max_attempts=1)))


def pull_now(mem: Memory) -> str:
    # lazy: the sync engine brings httpx and cryptography, not needed for the first paint
    from tiermem.sync.engine import SyncEngine
    from tiermem.sync.vault.retry import RetryPolicy

    with SyncEngine(mem) as engine:
        return _pulled(engine.pull(RetryPolicy(max_attempts=1)))


def sync_now(mem: Memory) -> str:
    """Pull, then push (what the daemon does on each round)."""
    # lazy: the sync engine brings httpx and cryptography, not needed for the first paint
    from tiermem.sync.engine import SyncEngine
    from tiermem.sync.vault.retry import RetryPolicy

    with SyncEngine(mem) as engine:
        pulled, pushed = engine.sync(RetryPolicy(max_attempts=1))
    return f"{_pulled(pulled)}; {_pushed(pushed)}"


def resolve(mem: Memory, conflict_id: str, take: str) -> str:
    closed = conflicts_mod.resolve_conflict(mem.db, mem.agent_id, conflict_id, take, mem=mem)
    chosen = closed.kept_value if take == "kept" else closed.lost_value
    label = conflicts_mod.about(mem.db, mem.agent_id, closed, 32)
    return f"{label} · {closed.field}: {conflicts_mod.show(chosen, 40)} stays"


# -- the screen -------------------------------------------------------------------------------


class DevicesLoaded(Message, bubble=False):
    def __init__(self, part: Part[DeviceInfo]) -> None:
        super().__init__()
        self.part = part


def state_text(data: SyncView) -> Content:
    """The state panel: where this home syncs to, what waits, the last push, pull and error."""
    pending = f" + {data.pending_memories} memories" if data.pending_memories else ""
    pending += f" + {data.pending_graph} episodes/entities" if data.pending_graph else ""
    where = f" · $url · epoch {data.epoch}" if data.url else ""
    version = f" (version {data.last_version})" if data.last_version else ""
    error_at = f" ({stamp(data.last_error_at)})" if data.last_error_at else ""
    retry = stamp(data.next_retry) if data.next_retry else "-"
    template = (
        f"[b]state[/b] $state{where}   [b]outbox[/b] {len(data.outbox)} pending{pending}\n"
        f"[b]last push[/b] {stamp(data.last_push)}{version} · {data.pushes} push(es) from this "
        f"home   [b]next retry[/b] {retry}\n"
        f"[b]last pull[/b] {stamp(data.last_pull)} · {data.pulls} pull(s)   "
        f"[b]conflicts[/b] {data.open_conflicts} open\n[b]last error[/b] $error{error_at}"
    )
    if data.device:
        template += "\n[b]this device[/b] $device… · $secrets"
    if data.inflight:
        template += f"\n[b]in flight[/b] {data.inflight} (sent again until confirmed)"
    notes = {f"note{i}": note for i, note in enumerate(data.notes)}
    template += "".join(f"\n[dim]${name}[/dim]" for name in notes)
    return markup(
        template,
        state=data.state,
        url=data.url,
        error=data.last_error or "-",
        device=(data.device or "")[:16],
        secrets=data.secrets,
        **notes,
    )


class SyncScreen(DataScreen[SyncView]):
    MODE = "sync"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("P", "app.push", "Push"),
        Binding("F", "pull", "Pull"),
        Binding("Y", "sync", "Sync"),
        Binding("R", "restore", "Restore"),
        Binding("D", "devices", "Devices", show=False),
        Binding("k", "resolve('kept')", "Keep ours"),
        Binding("t", "resolve('lost')", "Take theirs"),
        Binding("right_square_bracket", "tab(1)", "Next tab", key_display="]"),
        Binding("left_square_bracket", "tab(-1)", "Prev tab", key_display="[", show=False),
    ]
    view: SyncView | None = None
    devices: Part[DeviceInfo] | None = None

    def compose_body(self) -> ComposeResult:
        with Vertical(id="sync-body"):
            yield Static("…", id="sync-state", classes="panel")
            with TabbedContent(id="sync-tabs"):
                for tab in TABS:
                    with TabPane(tab.title(), id=f"tab-{tab}"):
                        yield Static("", id=f"{tab}-note", classes="tab-note")
                        yield PlainTable(id=tab, cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one("#sync-state").border_title = "Sync"
        columns = {
            "outbox": ("#", "kind", "reason", "queued"),
            "history": ("at", "kind", "version", "records", "bytes", "note"),
            "devices": ("", "device", "name", "added", "last seen", "state"),
            "conflicts": (
                "#",
                "about",
                "item",
                "field",
                "kept (here)",
                "lost (other)",
                "from",
                "state",
            ),
        }
        for tab, names in columns.items():
            self.query_one(f"#{tab}", DataTable).add_columns(*names)

    _devices_stale = False

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.reload_devices()

    def reload(self) -> None:
        """The local state on every refresh; the devices (network) only when an action asked."""
        super().reload()
        if self._devices_stale:
            self._devices_stale = False
            self.reload_devices()

    def reload_devices(self) -> None:
        memory = self.tiermem.memory
        if memory is not None and self.is_mounted:
            self._load_devices(memory)

    @work(thread=True, exclusive=True, group="devices", exit_on_error=False)
    def _load_devices(self, memory: Memory) -> None:
        """The listing runs in a daemon thread this worker waits for: an unreachable server
        (the listing retries with backoff) never holds up quitting the app."""
        found: list[Part[DeviceInfo]] = []

        def run() -> None:
            try:
                found.append(device_part(memory))
            except Exception as exc:
                found.append(Part(note=f"cannot list devices: {describe_error(exc)}"))

        thread = threading.Thread(target=run, name="tiermem-devices", daemon=True)
        thread.start()
        worker = get_current_worker()
        while thread.is_alive():
            thread.join(0.1)
            if worker.is_cancelled:
                return
        self.post_message(DevicesLoaded(found[0]))

    def fetch(self, memory: Memory) -> SyncView:
        return sync_view(memory)

    def show(self, data: SyncView) -> None:
        self.view = data
        self.query_one("#sync-state", Static).update(state_text(data))
        self._fill(
            "outbox",
            Part(data.outbox[-500:], "" if data.outbox else "nothing waiting to be pushed"),
            lambda r: (str(r[0]), r[1], r[2], stamp(r[3])),
            lambda r: str(r[0]),
        )
        self._fill(
            "history",
            data.history,
            lambda h: (
                stamp(h.at),
                Text(h.kind, style="bold red" if h.kind == "error" else ""),
                one_line(h.version or "-", 24),
                str(h.records),
                f"{h.bytes:,}",
                one_line(h.note, 60),
            ),
            None,
        )
        self._fill(
            "conflicts",
            data.conflicts,
            lambda c: (
                c.id[:8],
                one_line(data.about.get(c.id, c.item), 32),
                one_line(c.item, 24),
                c.field,
                conflicts_mod.show(c.kept_value, 24),
                conflicts_mod.show(c.lost_value, 24),
                c.lost_device[:8],
                f"took {c.resolution}" if c.resolved else Text("open", style="bold"),
            ),
            lambda c: c.id,
        )
        tabs = self.query_one(TabbedContent)
        tabs.get_tab("tab-outbox").label = f"Outbox ({len(data.outbox)})"
        tabs.get_tab("tab-history").label = (
            f"History ({data.errors} errors)" if data.errors else "History"
        )
        tabs.get_tab("tab-conflicts").label = f"Conflicts ({data.open_conflicts})"

    def on_devices_loaded(self, message: DevicesLoaded) -> None:
        self.devices = message.part
        self._fill(
            "devices",
            message.part,
            lambda d: (
                "●" if d.current else "",
                d.device_id[:16],
                d.name or "-",
                stamp(d.added),
                stamp(d.last_seen),
                "removed"
                if d.revoked
                else ("this device" if d.current else "active")
                + ("" if d.verified else " (unverified)"),
            ),
            lambda d: d.device_id,
        )
        active = sum(1 for d in message.part.rows if not d.revoked)
        self.query_one(TabbedContent).get_tab("tab-devices").label = f"Devices ({active})"

    def _fill(
        self,
        tab: str,
        part: Part[Any],
        cells: Callable[[Any], tuple[str | Text, ...]],
        key: Callable[[Any], str] | None,
    ) -> None:
        note = self.query_one(f"#{tab}-note", Static)
        note.update(markup("[dim]$note[/dim]", note=part.note) if part.note else "")
        note.display = bool(part.note)
        table = self.query_one(f"#{tab}", DataTable)
        keep = table.cursor_row
        table.clear()
        for row in part.rows:
            table.add_row(*cells(row), key=key(row) if key else None)
        if part.rows:
            table.move_cursor(row=min(keep, len(part.rows) - 1), animate=False)

    # -- actions ----------------------------------------------------------------------------

    def action_tab(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        index = TABS.index(str(tabs.active).removeprefix("tab-")) if tabs.active else 0
        tabs.active = f"tab-{TABS[(index + step) % len(TABS)]}"

    @on(TabbedContent.TabActivated)
    def _tab_shown(self, event: TabbedContent.TabActivated) -> None:
        self.query_one(f"#{str(event.pane.id).removeprefix('tab-')}", DataTable).focus()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keep and take act on the Conflicts tab only (and show in the footer only there)."""
        if action == "resolve":
            return self.query_one(TabbedContent).active == "tab-conflicts"
        return True

    def action_pull(self) -> None:
        self._devices_stale = True  # a pull may bring a rotation or a new device
        self.tiermem.perform(pull_now)

    def action_sync(self) -> None:
        self._devices_stale = True
        self.tiermem.perform(sync_now)

    def action_devices(self) -> None:
        self.query_one(TabbedContent).active = "tab-devices"
        self.reload_devices()

    def action_resolve(self, take: str) -> None:
        table = self.query_one("#conflicts", DataTable)
        if not table.row_count:
            self.notify("no conflict to resolve", severity="warning")
            return
        conflict_id = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        self.tiermem.perform(lambda mem: resolve(mem, conflict_id, take))

    def action_restore(self) -> None:
        memory = self.tiermem.memory
        if memory is None:
            return
        home = memory.home.root

        def restored(agent_id: str | None) -> None:
            if agent_id:
                self.tiermem.open_agent(agent_id)

        def chosen(values: dict[str, str] | None) -> None:
            if values is not None:
                self.app.push_screen(RestoreModal(home, values), restored)

        self.app.push_screen(
            FormModal(
                "Restore an agent from sync",
                restore_fields(self.tiermem.agent_id),
                note="Brings the agent's memory back into this home from the encrypted vault; "
                "the agent must have no memory here yet.",
            ),
            chosen,
        )
