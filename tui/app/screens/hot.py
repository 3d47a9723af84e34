"""Hot: the structured hot state beside the MEMORY.md it renders, with its limits shown; every
edit goes through the engine, which enforces them (5 KB, 20 lessons, 10 events, 10 tasks)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.markdown import Markdown
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode as UINode

from tiermem.core.config import HotConfig
from tiermem.core.engine import Memory
from tiermem.core.hot import HotState, HotStore, replace_item, value_text
from tiermem.core.printable import printable
from tiermem.core.tokens import count_tokens
from tiermem.tui.app.editor import run_editor
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.screens.modals import ConfirmModal, Field, FormModal, parse_importance
from tiermem.tui.app.widgets.format import count, day, one_line, shown
from tiermem.tui.app.widgets.gauge import Gauge


@dataclass(frozen=True)
class HotData:
    state: HotState
    markdown: str
    size: int
    tokens: int
    limits: HotConfig


@dataclass(frozen=True)
class Item:
    """What a node of the hot tree stands for."""

    kind: str  # identity | owner_profile | lesson | event | task | project | section
    key: str  # the mapping key or the item id


def pruned_note(pruned: list[str]) -> str:
    return "" if not pruned else " · moved to warm: " + "; ".join(one_line(p, 40) for p in pruned)


def _value(raw: str) -> Any:
    """A profile value: JSON when it parses (lists, numbers), else the text itself."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


Change = Callable[[HotState, dict[str, str]], object]


@dataclass(frozen=True)
class EditForm:
    """The form that edits one hot item, and how its values change the hot state."""

    title: str
    fields: list[Field]
    change: Change


def lesson_form(shown: HotState, key: str) -> EditForm | None:
    lesson = next((x for x in shown.critical_lessons if x.id == key), None)
    if lesson is None:
        return None

    def change(state: HotState, v: dict[str, str]) -> object:
        return replace_item(
            state.critical_lessons,
            key,
            lambda: HotStore.add_lesson(
                state,
                v["text"],
                parse_importance(v["importance"]),
                v["category"] or "general",
                lesson.timestamp,
                source_id=lesson.source_id,
            ),
        )

    fields = [
        Field("text", "Lesson", lesson.text, required=True),
        Field("importance", "Importance", f"{lesson.importance:g}"),
        Field("category", "Category", lesson.category),
    ]
    return EditForm("Edit lesson", fields, change)


def task_form(shown: HotState, key: str) -> EditForm | None:
    task = next((x for x in shown.active_context.tasks if x.id == key), None)
    if task is None:
        return None

    def change(state: HotState, v: dict[str, str]) -> object:
        return replace_item(
            state.active_context.tasks,
            key,
            lambda: HotStore.add_task(state, v["text"], task.timestamp, v["status"]),
        )

    fields = [
        Field("text", "Task", task.text, required=True),
        Field("status", "Status", task.status, "pending, in progress, blocked…"),
    ]
    return EditForm("Edit task", fields, change)


def event_form(shown: HotState, key: str) -> EditForm | None:
    event = next((x for x in shown.active_context.events if x.id == key), None)
    if event is None:
        return None

    def change(state: HotState, v: dict[str, str]) -> object:
        return replace_item(
            state.active_context.events,
            key,
            lambda: HotStore.add_event(state, v["text"], event.timestamp),
        )

    return EditForm("Edit event", [Field("text", "Event", event.text, required=True)], change)


def project_form(shown: HotState, key: str) -> EditForm | None:
    project = next((x for x in shown.active_context.projects if x.id == key), None)
    if project is None:
        return None

    def change(state: HotState, v: dict[str, str]) -> object:
        return replace_item(
            state.active_context.projects,
            key,
            lambda: HotStore.upsert_project(
                state, v["name"], v["description"], v["status"], project.updated_at
            ),
        )

    fields = [
        Field("name", "Name", project.name, required=True),
        Field("description", "Description", project.description),
        Field("status", "Status", project.status),
    ]
    return EditForm("Edit project", fields, change)


EDIT_FORMS: dict[str, Callable[[HotState, str], EditForm | None]] = {
    "lesson": lesson_form,
    "task": task_form,
    "event": event_form,
    "project": project_form,
}
"""The edit form of each kind of list item (None: the item is gone meanwhile)."""


class HotScreen(DataScreen[HotData]):
    MODE = "hot"
    markdown = ""
    """The MEMORY.md on display."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("i", "set_key('identity')", "Identity"),
        Binding("o", "set_key('owner_profile')", "Profile"),
        Binding("l", "add_lesson", "Lesson"),
        Binding("v", "add_event", "Event"),
        Binding("t", "add_task", "Task"),
        Binding("j", "add_project", "Project"),
        Binding("e", "edit", "Edit"),
        Binding("E", "edit_memory_md", "MEMORY.md in $EDITOR", show=False),
        Binding("c", "complete_task", "Done"),
        Binding("x,delete", "remove", "Remove", key_display="x"),
    ]
    data: HotData | None = None

    def compose_body(self) -> ComposeResult:
        yield Gauge("hot", id="hot-gauge")
        with Horizontal(classes="split", id="hot-body"):
            with Vertical(id="hot-left"):
                tree: Tree[Item] = Tree("hot state", id="hot-tree")
                tree.show_root = False
                yield tree
            with VerticalScroll(id="hot-md", classes="panel"):
                yield Static("", id="memory-md")

    def on_mount(self) -> None:
        self.query_one("#hot-tree").border_title = "Hot state"
        self.query_one("#hot-md").border_title = "MEMORY.md"
        self.query_one("#hot-tree").focus()

    def fetch(self, memory: Memory) -> HotData:
        markdown = memory.memory_md()
        return HotData(
            memory.hot(),
            markdown,
            memory.hot_size_bytes(),
            count_tokens(markdown),
            memory.cfg.hot,
        )

    def show(self, data: HotData) -> None:
        self.data = data
        lim = data.limits
        self.query_one("#hot-gauge", Gauge).set(
            data.size,
            lim.max_bytes,
            f"{count(data.size)}/{count(lim.max_bytes)} B · {data.tokens} tokens",
        )
        tree: Tree[Item] = self.query_one("#hot-tree", Tree)
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        tree.clear()
        s, ctx = data.state, data.state.active_context
        pending = sum(1 for t in ctx.tasks if t.status == "pending")
        sections: list[tuple[str, str, list[tuple[Text, Item]]]] = [
            (
                "Identity",
                "identity",
                [
                    (shown(f"{k}: {value_text(v)}"), Item("identity", k))
                    for k, v in s.identity.items()
                ],
            ),
            (
                "Owner profile",
                "owner_profile",
                [
                    (shown(f"{k}: {value_text(v)}"), Item("owner_profile", k))
                    for k, v in s.owner_profile.items()
                ],
            ),
            (
                f"Projects ({len(ctx.projects)})",
                "project",
                [
                    (shown(p.name, " ", (p.status, "dim")), Item("project", p.id))
                    for p in ctx.projects
                ],
            ),
            (
                f"Tasks ({pending}/{lim.max_pending_tasks} pending)",
                "task",
                [(shown(f"[{t.status}] {t.text}"), Item("task", t.id)) for t in ctx.tasks],
            ),
            (
                f"Events ({len(ctx.events)}/{lim.max_events})",
                "event",
                [(shown(f"{day(e.timestamp)} {e.text}"), Item("event", e.id)) for e in ctx.events],
            ),
            (
                f"Lessons ({len(s.critical_lessons)}/{lim.max_lessons})",
                "lesson",
                [
                    (shown(f"{x.importance:.2f} {x.text}"), Item("lesson", x.id))
                    for x in s.critical_lessons
                ],
            ),
        ]
        target: UINode[Item] | None = None
        for title, kind, items in sections:
            section = tree.root.add(f"[b]{title}[/b]", data=Item("section", kind), expand=True)
            if section.data == cursor:
                target = section
            for text, item in items:
                leaf = section.add_leaf(text, data=item)
                if item == cursor:
                    target = leaf
        if target is not None:
            tree.move_cursor(target, animate=False)
        self.markdown = data.markdown
        self.query_one("#memory-md", Static).update(Markdown(printable(data.markdown)))

    # -- edits ------------------------------------------------------------------------------

    def _current(self) -> Item | None:
        node = self.query_one("#hot-tree", Tree).cursor_node
        data = node.data if node is not None else None
        return data if isinstance(data, Item) else None

    def _form(self, title: str, fields: list[Field], apply: Any, note: str = "") -> None:
        def done(values: dict[str, str] | None) -> None:
            if values is not None:
                self.tiermem.perform(lambda mem: apply(mem, values))

        self.app.push_screen(FormModal(title, fields, note=note), done)

    def action_set_key(self, which: str) -> None:
        current = self._current()
        key = current.key if current is not None and current.kind == which else ""
        title = "Identity" if which == "identity" else "Owner profile"
        mapping = {} if self.data is None else getattr(self.data.state, which)
        value = mapping.get(key, "")
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

        def apply(mem: Memory, v: dict[str, str]) -> str:
            value = None if not v["value"].strip() else _value(v["value"])
            pruned = mem.update_hot(which, {v["key"].strip(): value})
            verb = "removed" if value is None else "set"
            return f"{title.lower()}: {verb} {v['key'].strip()}{pruned_note(pruned)}"

        self._form(
            f"{title}: set a key",
            [
                Field("key", "Key", key, required=True),
                Field("value", "Value", shown, "text or JSON; empty removes the key"),
            ],
            apply,
            note="Hot memory stays under 5 KB; an edit that cannot fit is refused.",
        )

    def action_add_lesson(self) -> None:
        def apply(mem: Memory, v: dict[str, str]) -> str:
            _, pruned = mem.add_lesson(
                v["text"], parse_importance(v["importance"]), v["category"] or "general"
            )
            return "lesson added" + pruned_note(pruned)

        self._form(
            "Add a critical lesson",
            [
                Field("text", "Lesson", required=True),
                Field("importance", "Importance", "0.7"),
                Field("category", "Category", "general"),
            ],
            apply,
            note="At most 20 lessons: the least important goes first.",
        )

    def action_add_event(self) -> None:
        def apply(mem: Memory, v: dict[str, str]) -> str:
            return "event added" + pruned_note(mem.add_event(v["text"])[1])

        self._form(
            "Add an event",
            [Field("text", "Event", required=True)],
            apply,
            note="The last 10 events are kept.",
        )

    def action_add_task(self) -> None:
        def apply(mem: Memory, v: dict[str, str]) -> str:
            return "task added" + pruned_note(mem.add_task(v["text"])[1])

        self._form(
            "Add a task",
            [Field("text", "Task", required=True)],
            apply,
            note="At most 10 pending tasks.",
        )

    def action_add_project(self) -> None:
        def apply(mem: Memory, v: dict[str, str]) -> str:
            _, pruned = mem.add_project(v["name"], v["description"], v["status"])
            return "project saved" + pruned_note(pruned)

        self._form(
            "Add or update a project",
            [
                Field("name", "Name", required=True),
                Field("description", "Description"),
                Field("status", "Status", placeholder="active, paused…"),
            ],
            apply,
        )

    def action_edit_memory_md(self) -> None:
        """MEMORY.md in $EDITOR; what changed is read back into hot memory (as a hand edit)."""
        memory = self.tiermem.memory
        if memory is None:
            return
        path = memory.home.memory_md(memory.agent_id)
        if not path.exists():
            memory.write_memory_md()
        problem = run_editor(self.app, path)
        if problem is not None:
            self.notify(problem, severity="warning")
            return
        self.tiermem.perform(_read_back)

    def action_edit(self) -> None:
        """Edit the item under the cursor in place (its position in the list is kept); on a
        section heading, add an item to that section."""
        current, data = self._current(), self.data
        if current is not None and current.kind == "section":
            if current.key in ("identity", "owner_profile"):
                self.action_set_key(current.key)
            else:
                getattr(self, f"action_add_{current.key}")()
            return
        if current is None or data is None:
            self.notify("select an item to edit", severity="warning")
            return
        if current.kind in ("identity", "owner_profile"):
            self.action_set_key(current.kind)
            return
        form = EDIT_FORMS[current.kind](data.state, current.key)
        if form is None:
            self._gone()
            return
        self._edit_form(form)

    def _gone(self) -> None:
        self.notify("that item changed meanwhile: look again", severity="warning")
        self.reload()

    def _edit_form(self, form: EditForm) -> None:
        def apply(mem: Memory, v: dict[str, str]) -> str:
            _, pruned = mem.edit_hot(lambda state: form.change(state, v), must_fit=True)
            return f"{form.title.removeprefix('Edit ')} saved{pruned_note(pruned)}"

        self._form(
            form.title,
            form.fields,
            apply,
            note="Hot memory stays under 5 KB: edits that cannot fit are refused.",
        )

    def action_complete_task(self) -> None:
        current = self._current()
        if current is None or current.kind != "task":
            self.notify("select a task to complete", severity="warning")
            return
        self.tiermem.perform(lambda mem: "done: " + mem.complete_task(current.key)[0].text)

    def action_remove(self) -> None:
        current = self._current()
        if current is None or current.kind == "section":
            self.notify("select an item to remove", severity="warning")
            return
        if current.kind in ("identity", "owner_profile"):
            kind = current.kind

            def remove_key(mem: Memory) -> str:
                mem.update_hot(kind, {current.key: None})
                return f"removed {current.key}"

            action = remove_key
        else:

            def remove_item(mem: Memory) -> str:
                return f"removed {mem.remove_hot_item(current.key)}"

            action = remove_item

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.tiermem.perform(action)

        self.app.push_screen(
            ConfirmModal(f"Remove this {current.kind.replace('_', ' ')} item?"), confirmed
        )


def _read_back(mem: Memory) -> str:
    report = mem.read_back_memory_md()
    if report.error:
        return f"MEMORY.md not read back: {report.error}"
    if not report.edited:
        return "MEMORY.md unchanged"
    return f"MEMORY.md read back: {len(report.applied)} changes, {len(report.stored_ids)} new facts"
