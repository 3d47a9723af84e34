"""The tiermem TUI: an agent's memory for a person, over the core facade and the sync engine.

The event loop never touches the database: every read and write runs in a thread worker that
posts a typed message back (`tiermem.tui.app.messages`). A poll of `PRAGMA data_version` notices
commits by other processes (an agent storing while you browse) and reloads the open screen.
"""

from __future__ import annotations

import gc
import time
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import Theme
from textual.worker import get_current_worker

from tiermem.core.engine import Memory
from tiermem.core.paths import DEFAULT_AGENT
from tiermem.core.printable import printable
from tiermem.core.remember import Entry, remember
from tiermem.tui.app.messages import (
    ActionDone,
    ActionFailed,
    DataChanged,
    MemoryOpened,
    describe_error,
)
from tiermem.tui.app.palette import MemoryProvider
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.screens.dashboard import DashboardScreen
from tiermem.tui.app.screens.graph import GraphScreen
from tiermem.tui.app.screens.hot import HotScreen
from tiermem.tui.app.screens.importing import ImportForm, ImportModal, ImportRequest
from tiermem.tui.app.screens.memories import MemoriesScreen
from tiermem.tui.app.screens.metrics import MetricsScreen
from tiermem.tui.app.screens.modals import (
    AgentModal,
    ConsolidateModal,
    Field,
    FormModal,
    memory_fields,
    parse_importance,
    split_lines,
)
from tiermem.tui.app.screens.skills import SkillsModal
from tiermem.tui.app.screens.spaces import SpacesModal
from tiermem.tui.app.screens.sync import SyncScreen, pull_now, push_now, sync_now
from tiermem.tui.app.screens.tree import TreeScreen
from tiermem.tui.app.state import load_state, save_state
from tiermem.tui.app.widgets.nav import SCREENS

DARK = "tiermem-dark"
LIGHT = "tiermem-light"
WATCH_SECONDS = 0.4


def theme_dirs() -> list[Path]:
    """Where theme files live: `assets/themes` in a checkout, `tiermem/assets/themes` when
    installed from the wheel."""
    return [Path(__file__).resolve().parents[2] / "assets" / "themes"]


def load_themes() -> list[Theme]:
    """The theme files (TOML, one `Theme` each). A broken file is skipped, never fatal."""
    themes: list[Theme] = []
    seen: set[str] = set()
    for folder in theme_dirs():
        for path in sorted(folder.glob("*.toml")) if folder.is_dir() else []:
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
                theme = Theme(**data)
            except (OSError, ValueError, TypeError):
                continue
            if theme.name not in seen:
                seen.add(theme.name)
                themes.append(theme)
    return themes


class TiermemApp(App[None]):
    """`TiermemApp(home, agent_id)`; `clock` fixes time for tests and demos."""

    CSS_PATH = "app.tcss"
    TITLE = "tiermem"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {MemoryProvider}
    MODES: ClassVar[dict[str, str | Callable[[], Screen[Any]]]] = {
        "dashboard": DashboardScreen,
        "tree": TreeScreen,
        "memories": MemoriesScreen,
        "hot": HotScreen,
        "metrics": MetricsScreen,
        "sync": SyncScreen,
        "graph": GraphScreen,
    }
    DEFAULT_MODE = "dashboard"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012 (a base-class attribute)
    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(key, f"switch_mode('{mode}')", title, show=False)
            for key, mode, title in SCREENS
        ),
        Binding("s", "store", "Store"),
        Binding("C", "consolidate", "Consolidate"),
        Binding("A", "switch_agent", "Agent"),
        Binding("K", "skills", "Skills", show=False),
        Binding("S", "spaces", "Spaces", show=False),
        Binding("I", "import_from", "Import", show=False),
        Binding("T", "toggle_theme", "Theme", show=False),
        Binding("question_mark", "toggle_keys", "Keys"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        home: Path | str | None = None,
        agent_id: str = DEFAULT_AGENT,
        *,
        clock: Callable[[], float] = time.time,
        driver: str | None = None,
        watch: bool = True,
    ) -> None:
        super().__init__()
        self.home = home
        self.agent_id = agent_id
        self.clock = clock
        self.driver = driver
        self.watch_changes = watch
        self.memory: Memory | None = None
        self._opened: dict[str, Memory] = {}
        self._data_version: int | None = None
        self._polling = False
        for theme in load_themes():
            self.register_theme(theme)
        if DARK in self.available_themes:
            self.theme = DARK

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification is plain text, whatever the caller asked: they quote what was
        typed, errors, paths and ids, where a `[/]` would crash the app as markup (and a
        control character would reach the terminal)."""
        super().notify(
            printable(message),
            title=printable(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    # -- opening memories (always in a worker) ---------------------------------------------

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.open_agent(self.agent_id)
        if self.watch_changes:
            self.set_interval(WATCH_SECONDS, self._poll_changes)
        self.call_after_refresh(settle_heap)

    @work(thread=True, exclusive=True, group="open", exit_on_error=False)
    def open_agent(self, agent_id: str) -> None:
        try:
            memory = self._opened.get(agent_id) or Memory(
                self.home, agent_id, clock=self.clock, driver=self.driver
            )
        except Exception as exc:
            self.post_message(ActionFailed(describe_error(exc), "cannot open memory"))
            return
        self.post_message(MemoryOpened(memory))

    def on_memory_opened(self, message: MemoryOpened) -> None:
        memory = message.memory
        if not self._opened:  # the first home opened: its remembered theme
            saved = load_state(memory.home.root).get("theme")
            if isinstance(saved, str) and saved in self.available_themes:
                self.theme = saved
        self._opened[memory.agent_id] = memory
        self.memory = memory
        self.agent_id = memory.agent_id
        self._data_version = None
        self.sub_title = f"{memory.agent_id} · {memory.home.root}"
        for screen in self._data_screens():
            screen.agent_changed(memory.agent_id)
        self.reload_current()

    def _remember_theme(self, theme: Theme) -> None:
        if self.memory is not None:
            save_state(self.memory.home.root, theme=theme.name)

    def on_unmount(self) -> None:
        gc.unfreeze()  # what the app kept alive can be collected once it is gone
        self.memory = None
        for memory in self._opened.values():
            memory.close()
        self._opened.clear()

    # -- the active screen's data ----------------------------------------------------------

    def _data_screens(self) -> list[DataScreen[Any]]:
        screens: list[DataScreen[Any]] = []
        for stack in self._screen_stacks.values():
            screens += [s for s in stack if isinstance(s, DataScreen)]
        return screens

    def reload_current(self) -> None:
        """Reload every screen in the current mode's stack (the one on top and any below a
        modal); the others reload when they are shown."""
        for screen in self.screen_stack:
            if isinstance(screen, DataScreen):
                screen.reload()

    def _poll_changes(self) -> None:
        if self.memory is not None and not self._polling:
            self._polling = True  # one poll at a time, even behind a long consolidation
            self._check_version(self.memory)

    @work(thread=True, exclusive=True, group="watch", exit_on_error=False)
    def _check_version(self, memory: Memory) -> None:
        try:
            version = int(memory.db.scalar("PRAGMA data_version"))
        except Exception:
            return  # the next poll tries again; a failing database shows up in the screens
        finally:
            self._polling = False
        if self._data_version is not None and version != self._data_version:
            self.post_message(DataChanged())
        self._data_version = version

    def on_data_changed(self, _message: DataChanged) -> None:
        self.reload_current()

    # -- actions: each runs in a worker and reports back -----------------------------------

    def perform(self, action: Callable[[Memory], str], *, undo_hint: bool = False) -> None:
        """Run a curation action off the event loop; its text becomes a notification."""
        if self.memory is None:
            self.notify("the memory is not open yet", severity="warning")
            return
        self._perform(self.memory, action, undo_hint)

    @work(thread=True, group="action", exit_on_error=False)
    def _perform(self, memory: Memory, action: Callable[[Memory], str], undo_hint: bool) -> None:
        try:
            text = action(memory)
        except Exception as exc:
            self.post_message(ActionFailed(describe_error(exc), reload=True))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(ActionDone(text, undo_hint))

    def on_action_done(self, message: ActionDone) -> None:
        text = message.text + ("  (u undoes)" if message.undo_hint else "")
        self.notify(text, title="done", timeout=4)
        self.reload_current()

    def on_action_failed(self, message: ActionFailed) -> None:
        self.notify(message.text, title=message.title, severity="error", timeout=8)
        if message.reload:
            self.reload_current()  # a failed push still recorded its error, for one

    def action_store(self) -> None:
        def stored(values: dict[str, str] | None) -> None:
            if values is None:
                return

            def store(mem: Memory) -> str:
                entry = Entry(
                    values["text"],
                    values["category"].strip() or None,
                    parse_importance(values["importance"]),
                    urls=split_lines(values["urls"]),
                    commands=split_lines(values["commands"]),
                    paths=split_lines(values["paths"]),
                    tags=split_lines(values["tags"]),
                    source="tui",
                )
                outcome = remember(mem, entry).outcome
                return (
                    f"{'stored' if outcome.created else 'already known, reinforced'}: {outcome.id}"
                )

            self.perform(store)

        tags = Field("tags", "Tags", "", "one a line (retrieve --tag finds them)", lines=2)
        self.push_screen(FormModal("Store a memory", [*memory_fields(), tags]), stored)

    def action_consolidate(self) -> None:
        if self.memory is None:
            self.notify("the memory is not open yet", severity="warning")
            return
        self.push_screen(ConsolidateModal(self.memory), lambda _: self.reload_current())

    def action_import_from(self) -> None:
        """Another tool's memory or a chat history: the form, then the dry run's report or the
        import with its bar."""
        memory = self.memory
        if memory is None:
            self.notify("the memory is not open yet", severity="warning")
            return

        def chosen(request: ImportRequest | None) -> None:
            if request is not None:
                self.push_screen(ImportModal(memory, request), imported)

        def imported(text: str | None) -> None:
            if text:
                self.notify(text, title="done", timeout=6)
            self.reload_current()

        self.push_screen(ImportForm(), chosen)

    def action_skills(self) -> None:
        """The skills dialog: proposed skills to accept, edit or reject."""
        if self.memory is None:
            self.notify("the memory is not open yet", severity="warning")
            return
        self.push_screen(SkillsModal(self.memory))

    def action_spaces(self) -> None:
        """The spaces dialog: shared spaces to include or exclude, with who wrote what."""
        if self.memory is None:
            self.notify("the memory is not open yet", severity="warning")
            return
        self.push_screen(SpacesModal(self.memory))

    def action_switch_agent(self) -> None:
        def chosen(agent_id: str | None) -> None:
            if agent_id and agent_id != self.agent_id:
                self.open_agent(agent_id)

        self.push_screen(AgentModal(self.memory, self.agent_id), chosen)

    def action_toggle_keys(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.theme == DARK else DARK

    def action_push(self) -> None:
        self.perform(push_now)

    def action_pull(self) -> None:
        self.perform(pull_now)

    def action_sync_now(self) -> None:
        self.perform(sync_now)

    async def action_restore(self) -> None:
        await self.switch_mode("sync")
        if isinstance(self.screen, SyncScreen):
            self.screen.action_restore()

    # -- the command palette ---------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        for key, mode, title in SCREENS:
            yield SystemCommand(
                f"Screen: {title}", f"Show the {title} screen (key {key})", self._switcher(mode)
            )
        yield SystemCommand("Store a memory", "Add a fact to warm memory (s)", self.action_store)
        yield SystemCommand(
            "Consolidate", "Run memory maintenance with a report (C)", self.action_consolidate
        )
        yield SystemCommand(
            "Switch agent", "Browse another agent's memory (A)", self.action_switch_agent
        )
        yield SystemCommand("Push now", "Push local changes to the sync vault", self.action_push)
        yield SystemCommand("Pull now", "Fetch other devices' changes", self.action_pull)
        yield SystemCommand("Sync now", "Pull, then push", self.action_sync_now)
        yield SystemCommand(
            "Restore from sync", "Restore an agent from the encrypted vault", self.action_restore
        )
        yield SystemCommand(
            "Toggle light/dark", "Switch between the tiermem themes (T)", self.action_toggle_theme
        )
        yield from super().get_system_commands(screen)

    def _switcher(self, mode: str) -> Callable[[], None]:
        def switch() -> None:
            self.switch_mode(mode)

        return switch


def settle_heap() -> None:
    """After the first paint: collect, then freeze what survives (modules, styles, widgets), so
    Python's full collections skip it. Without this, one full collection over that heap took
    about 100 ms, and it fell in the middle of the first switch to the Memories screen."""
    gc.collect()
    gc.freeze()
