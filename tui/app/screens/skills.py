"""The skills dialog: skills proposed from repeated commands and tool calls, and the owner's
verdict on each (accept, accept an edited version, reject). Nothing here runs a skill."""

from __future__ import annotations

import json
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tiermem.core import skills
from tiermem.core.engine import Memory
from tiermem.core.skills import Skill
from tiermem.tui.app.messages import describe_error
from tiermem.tui.app.screens.modals import Field, FormModal
from tiermem.tui.app.widgets.format import shown

HINT = "a accept · e edit and accept · r reject · esc close"


class SkillsModal(ModalScreen[None]):
    """Every skill with its status; the highlighted one is shown in full below the list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("a", "decide('accepted')", "Accept"),
        Binding("r", "decide('rejected')", "Reject"),
        Binding("e", "edit", "Edit"),
    ]

    def __init__(self, memory: Memory) -> None:
        super().__init__(classes="modal")
        self.memory = memory
        self.skills: list[Skill] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Skills"
            yield Static(HINT, classes="note")
            yield OptionList(id="skills")
            yield Static("", id="skill-detail", markup=False)

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="skills", exit_on_error=False)
    def load(self) -> None:
        found = skills.listing(self.memory)
        self.app.call_from_thread(self._show, found)

    def _show(self, found: list[Skill]) -> None:
        self.skills = found
        listing = self.query_one(OptionList)
        keep = listing.highlighted
        listing.clear_options()
        listing.add_options(
            [
                Option(shown(f"[{s.status}] {s.name} ({s.conversations} conversations)"))
                for s in found
            ]
            or [Option("no skills yet: they are proposed when conversations repeat actions")]
        )
        if found:
            listing.highlighted = min(keep or 0, len(found) - 1)
        listing.focus()

    @on(OptionList.OptionHighlighted)
    def _detail(self, event: OptionList.OptionHighlighted) -> None:
        skill = self._current()
        text = json.dumps(skill.spec, indent=1) if skill else ""
        self.query_one("#skill-detail", Static).update(text)

    def _current(self) -> Skill | None:
        index = self.query_one(OptionList).highlighted
        return self.skills[index] if index is not None and index < len(self.skills) else None

    def action_close(self) -> None:
        self.dismiss(None)

    def action_decide(self, status: str, spec: object = None) -> None:
        skill = self._current()
        if skill is not None:
            self._decide(skill.name, status, spec)

    def action_edit(self) -> None:
        skill = self._current()
        if skill is None:
            return

        def edited(values: dict[str, str] | None) -> None:
            if values is None:
                return
            try:
                spec = json.loads(values["spec"])
            except json.JSONDecodeError as exc:
                self.notify(f"not valid JSON: {exc.msg}", severity="error")
                return
            self._decide(skill.name, "accepted", spec)

        text = json.dumps(skill.spec, indent=1)
        form = [Field("spec", "Skill (JSON)", text, required=True, lines=12)]
        self.app.push_screen(FormModal(f"Edit {skill.name}", form), edited)

    @work(thread=True, group="skills-write", exit_on_error=False)
    def _decide(self, name: str, status: str, spec: object) -> None:
        try:
            skills.decide(self.memory, name, status, spec)
        except Exception as exc:
            self.app.call_from_thread(self.notify, describe_error(exc), severity="error")
            return
        self.app.call_from_thread(self.notify, f"{status}: {name}", title="skills")
        self.load()
