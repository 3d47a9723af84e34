"""What every screen shares: the top bar, the footer, and loading its data in a worker."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar, cast

from textual import work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.worker import get_current_worker

from tiermem.core.engine import Memory
from tiermem.tui.app.messages import ActionFailed, Loaded, describe_error
from tiermem.tui.app.widgets.footer import QuitFirstFooter
from tiermem.tui.app.widgets.nav import NavBar

if TYPE_CHECKING:
    from tiermem.tui.app import TiermemApp

T = TypeVar("T")


class DataScreen(Screen[None], Generic[T]):
    """A screen whose content is `fetch(memory)` (run in a thread), then `show(data)`."""

    MODE: ClassVar[str] = ""

    @property
    def tiermem(self) -> TiermemApp:
        return cast("TiermemApp", self.app)

    def compose(self) -> ComposeResult:
        yield NavBar(self.MODE, self.tiermem.agent_id)
        yield from self.compose_body()
        yield QuitFirstFooter()

    def compose_body(self) -> ComposeResult:
        raise NotImplementedError

    def on_screen_resume(self) -> None:
        self.reload()

    def agent_changed(self, agent_id: str) -> None:
        if self.is_mounted:
            self.query_one(NavBar).set_agent(agent_id)

    def reload(self) -> None:
        memory = self.tiermem.memory
        if memory is not None and self.is_mounted:
            self._load(memory)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load(self, memory: Memory) -> None:

        if get_current_worker().is_cancelled:
            return  # a newer request replaced this one before it started
        try:
            data = self.fetch(memory)
        except Exception as exc:
            self.post_message(ActionFailed(describe_error(exc)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(Loaded(data))

    def on_loaded(self, message: Loaded[T]) -> None:
        self.show(message.data)

    def fetch(self, memory: Memory) -> T:
        """Read what the screen shows (in a worker thread: the only place the DB is used)."""
        raise NotImplementedError

    def show(self, data: T) -> None:
        raise NotImplementedError
