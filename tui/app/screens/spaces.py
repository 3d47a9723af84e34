"""The spaces dialog: the home's shared memory spaces, which ones this agent includes and with
what role, include or exclude the highlighted one by keys, and the highlighted space's newest
memories with the member who wrote each (docs/spaces.md)."""

from __future__ import annotations

from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tiermem.core import spaces
from tiermem.core.engine import Memory
from tiermem.core.spaces import Role, SpaceInfo
from tiermem.tui.app.messages import describe_error
from tiermem.tui.app.widgets.format import shown

HINT = "i include (writer) · r include as reader · x exclude · esc close"
SHOWN = 8
"""Newest memories of the highlighted space shown below the list."""


class SpacesModal(ModalScreen[None]):
    """Every space; * marks those the agent includes. The highlighted one's members and newest
    memories (with their writers) are shown below the list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("i", "include('writer')", "Include"),
        Binding("r", "include('reader')", "As reader"),
        Binding("x", "exclude", "Exclude"),
    ]

    def __init__(self, memory: Memory) -> None:
        super().__init__(classes="modal")
        self.memory = memory
        self.spaces: list[SpaceInfo] = []
        self.details: dict[str, str] = {}

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Spaces"
            yield Static(HINT, classes="note")
            yield OptionList(id="spaces")
            yield Static("", id="space-detail", markup=False)

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="spaces", exit_on_error=False)
    def load(self) -> None:
        db, agent = self.memory.db, self.memory.agent_id
        found = spaces.listing(db, agent)
        details = {s.name: _detail(s, spaces.written(db, s.name)[:SHOWN]) for s in found}
        self.app.call_from_thread(self._show, found, details)

    def _show(self, found: list[SpaceInfo], details: dict[str, str]) -> None:
        self.spaces, self.details = found, details
        listing = self.query_one(OptionList)
        keep = listing.highlighted
        listing.clear_options()
        listing.add_options(
            [Option(shown(_line(s))) for s in found]
            or [Option("no spaces yet: tiermem spaces create NAME")]
        )
        if found:
            listing.highlighted = min(keep or 0, len(found) - 1)
        listing.focus()
        self._detail_of_highlighted()

    @on(OptionList.OptionHighlighted)
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._detail_of_highlighted()

    def _detail_of_highlighted(self) -> None:
        space = self._current()
        text = self.details.get(space.name, "") if space else ""
        self.query_one("#space-detail", Static).update(shown(text))

    def _current(self) -> SpaceInfo | None:
        index = self.query_one(OptionList).highlighted
        return self.spaces[index] if index is not None and index < len(self.spaces) else None

    def action_close(self) -> None:
        self.dismiss(None)

    def action_include(self, role: Role) -> None:
        space = self._current()
        if space is not None:
            self._change(space.name, role)

    def action_exclude(self) -> None:
        space = self._current()
        if space is not None:
            self._change(space.name, None)

    @work(thread=True, group="spaces-write", exit_on_error=False)
    def _change(self, name: str, role: Role | None) -> None:
        """Include the space with `role`, or exclude it (None)."""
        db, agent = self.memory.db, self.memory.agent_id
        try:
            if role is None:
                spaces.exclude(db, agent, name)
            else:
                spaces.include(db, agent, name, role, self.memory.now())
        except Exception as exc:
            self.app.call_from_thread(self.notify, describe_error(exc), severity="error")
            return
        done = f"excluded {name}" if role is None else f"included {name} ({role})"
        self.app.call_from_thread(self.notify, done, title="spaces")
        self.load()


def _line(space: SpaceInfo) -> str:
    mark = "*" if space.role else " "
    role = f" ({space.role})" if space.role else ""
    return f"{mark} {space.name}{role}: {space.memories} memories, {len(space.members)} members"


def _detail(space: SpaceInfo, newest: list[spaces.Written]) -> str:
    members = ", ".join(f"{a} ({r})" for a, r in space.members.items()) or "none"
    lines = [f"members: {members}", f"created by {space.created_by}", ""]
    for w in newest:
        text = "(undone)" if w.memory is None else w.memory.text
        lines.append(f"{w.writer}: {text}")
    return "\n".join(lines)
