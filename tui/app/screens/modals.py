"""Modal dialogs: confirm, a small form, switch agent, consolidate with progress."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, ProgressBar, Static, TextArea
from textual.widgets.option_list import Option

from tiermem.core import curate
from tiermem.core.consolidate import MODES, ConsolidationReport, steps
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.printable import printable
from tiermem.core.rows import MemoryRow
from tiermem.tui.app.messages import describe_error


def parse_importance(raw: str) -> float:
    try:
        value = float(raw.strip() or "0.5")
    except ValueError:
        raise InvalidInput(f"importance must be a number between 0 and 1 (got {raw!r})") from None
    if not 0.0 <= value <= 1.0:
        raise InvalidInput(f"importance must be between 0 and 1 (got {value:g})")
    return value


def split_lines(raw: str) -> list[str]:
    """One metadata value a line (a command may hold commas and semicolons), blanks dropped."""
    return [part.strip() for part in raw.splitlines() if part.strip()]


@dataclass(frozen=True)
class Field:
    name: str
    label: str
    value: str = ""
    placeholder: str = ""
    required: bool = False
    lines: int = 1
    """More than one: a text area that many lines high (enter starts a new line)."""


META = (("urls", "URLs"), ("commands", "Commands"), ("paths", "Paths"))


def memory_fields(record: MemoryRow | None = None) -> list[Field]:
    """The store form, or (given a memory) the edit form filled with it."""
    m = record
    fields = [
        Field("text", "Text", m.text if m else "", "the fact to remember", True, lines=2),
        Field("category", "Category", m.category if m else "", "projects/evoclaw/bsc", True),
        Field(
            "importance",
            "Importance",
            f"{m.importance:g}" if m else "0.5",
            "0-1: 0.9 critical, 0.5 fact, 0.2 casual",
        ),
    ]
    for name, label in META:
        value = "\n".join(getattr(m, name)) if m else ""
        fields.append(Field(name, label, value, "one a line", lines=2))
    return fields


class ConfirmModal(ModalScreen[bool]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__(classes="modal")
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="question", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class FormModal(ModalScreen[dict[str, str] | None]):
    """A few labelled inputs; enter on the last one (or ctrl+s) submits, escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Save"),
    ]

    def __init__(self, title: str, fields: Sequence[Field], note: str = "") -> None:
        super().__init__(classes="modal")
        self.title_text = title
        self.fields = list(fields)
        self.note = note

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog form") as dialog:
            dialog.border_title = self.title_text
            if self.note:
                yield Static(self.note, classes="note", markup=False)
            for field in self.fields:
                yield Label(field.label + (" *" if field.required else ""))
                if field.lines > 1:
                    area = TextArea(
                        printable(field.value),
                        placeholder=field.placeholder,
                        id=f"f-{field.name}",
                        compact=True,
                        show_cursor=True,
                        highlight_cursor_line=False,
                    )
                    area.styles.height = field.lines
                    yield area
                else:
                    yield Input(
                        printable(field.value),
                        placeholder=field.placeholder,
                        id=f"f-{field.name}",
                        compact=True,
                    )
            with Horizontal(classes="buttons"):
                yield Button("Save (ctrl+s)", variant="primary", id="save")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        """The first field has the focus: what is typed goes straight into it."""
        if self.fields:
            self.query_one(f"#f-{self.fields[0].name}").focus()

    def values(self) -> dict[str, str]:
        """What each field holds. A field shows its value's control characters as escapes
        (`core.printable`: they would reach the terminal); left as shown, it keeps the value
        exactly as it was."""
        out: dict[str, str] = {}
        for f in self.fields:
            widget = self.query_one(f"#f-{f.name}")
            typed = (
                widget.text
                if isinstance(widget, TextArea)
                else widget.value
                if isinstance(widget, Input)
                else ""
            )
            out[f.name] = f.value if typed == printable(f.value) else typed
        return out

    def action_submit(self) -> None:
        values = self.values()
        missing = [f.label for f in self.fields if f.required and not values[f.name].strip()]
        if missing:
            self.notify(f"{', '.join(missing)} cannot be empty", severity="error")
            return
        self.dismiss(values)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _next(self, event: Input.Submitted) -> None:
        inputs = [w for w in self.query("Input, TextArea") if w.id and w.id.startswith("f-")]
        index = inputs.index(event.input)
        if index + 1 < len(inputs):
            inputs[index + 1].focus()
        else:
            self.action_submit()

    @on(Button.Pressed, "#save")
    def _save(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)


class AgentModal(ModalScreen[str | None]):
    """Pick an agent of this home, or type a new agent id."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, memory: Memory | None, current: str) -> None:
        super().__init__(classes="modal")
        self.memory = memory
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog") as dialog:
            dialog.border_title = "Switch agent"
            yield OptionList(id="agents")
            yield Input(placeholder="or a new agent id, then enter", id="new-agent", compact=True)

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        if self.memory is not None:
            self._list(self.memory)

    @work(thread=True, exit_on_error=False)
    def _list(self, memory: Memory) -> None:
        try:
            agents = curate.list_agents(memory.db)
        except Exception:
            agents = [self.current]
        self.app.call_from_thread(self._fill, agents)

    def _fill(self, agents: list[str]) -> None:
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options(
            [Option(f"{a}{'  (current)' if a == self.current else ''}", id=a) for a in agents]
        )
        if self.current in agents:
            options.highlighted = agents.index(self.current)

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    @on(Input.Submitted)
    def _typed(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConsolidateModal(ModalScreen[None]):
    """Choose a mode, watch its steps run (a bar fed by the consolidation's progress hook),
    read the report."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, memory: Memory) -> None:
        super().__init__(classes="modal")
        self.memory = memory
        self.running = False
        self.seen: list[tuple[str, int, int]] = []
        """Every progress report, in order (what the bar showed)."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog") as dialog:
            dialog.border_title = "Consolidate"
            yield OptionList(
                Option("quick    re-score, promote, archive, evict", id="quick"),
                Option("daily    quick + prune idle tree nodes", id="daily"),
                Option("monthly  daily + tree rebuild + frozen cleanup", id="monthly"),
                Option("full     monthly + archive re-score + report", id="full"),
                id="modes",
            )
            yield ProgressBar(total=None, show_eta=False, id="progress")
            yield Static("", id="steps", markup=False)
            yield Static("", id="report", markup=False)

    def on_mount(self) -> None:
        self.query_one("#progress").display = False
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected, "#modes")
    def _start(self, event: OptionList.OptionSelected) -> None:
        mode = event.option.id or "quick"
        if self.running or mode not in MODES:
            return
        self.running = True
        self.query_one("#modes").display = False
        self.query_one("#progress").display = True
        plan = ", ".join(steps(mode))
        self.query_one("#report", Static).update(
            f"{mode}: reading back MEMORY.md{'' if mode == 'quick' else ' and daily notes'}…\n"
            f"then: {plan}"
        )
        self._run(mode)

    @work(thread=True, exclusive=True, group="consolidate", exit_on_error=False)
    def _run(self, mode: str) -> None:
        def progress(step: str, done: int, total: int) -> None:
            self.app.call_from_thread(self._progress, step, done, total)

        try:
            report = self.memory.consolidate(mode, progress)
        except Exception as exc:
            self.app.call_from_thread(self._finished, None, describe_error(exc))
            return
        self.app.call_from_thread(self._finished, report, "")

    def _progress(self, step: str, done: int, total: int) -> None:
        self.seen.append((step, done, total))
        self.query_one(ProgressBar).update(total=total, progress=done)
        lines = [f"✓ {name}" for name, _, _ in self.seen[:-1]]
        if done < total:
            lines.append(f"… {step} ({done + 1}/{total})")
        self.query_one("#steps", Static).update("\n".join(lines))
        self.query_one("#report", Static).update("" if done == total else "running…")

    def _finished(self, report: ConsolidationReport | None, error: str) -> None:
        self.running = False
        bar = self.query_one(ProgressBar)
        if bar.total is None:
            bar.update(total=1, progress=1 if report is not None else 0)
        if self.seen and report is not None:
            self.query_one("#steps", Static).update(f"✓ {len(self.seen) - 1} steps done")
        if report is None:
            self.query_one("#report", Static).update(f"failed: {printable(error)}\n\nesc closes")
            self.notify(error, severity="error")
            return
        self.query_one("#report", Static).update(printable(summary(report)) + "\n\nesc closes")

    def action_close(self) -> None:
        if not self.running:
            self.dismiss(None)


def summary(report: ConsolidationReport) -> str:
    lines = [
        f"{report.mode}: {len(report.promoted)} promoted to hot, {len(report.evicted)} evicted, "
        f"{report.deleted_frozen} frozen deleted, {len(report.tree_pruned)} tree nodes pruned, "
        f"{len(report.tree_added)} added"
    ]
    if report.after is not None:
        b, a = report.before, report.after
        lines.append(
            f"warm {b.warm_count} → {a.warm_count} facts, {b.warm_bytes} → {a.warm_bytes} B; "
            f"cold {b.cold_count} → {a.cold_count}; hot {b.hot_bytes} → {a.hot_bytes} B"
        )
    lines += report.analysis[:6]
    return "\n".join(lines)
