"""Tree: the category tree with warm/cold counts and last activity; selecting a node lists its
memories (newest first, a page at a time)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode as UINode

from tiermem.core import curate
from tiermem.core.engine import Memory
from tiermem.core.errors import TiermemError
from tiermem.core.tree import TreeIndex, normalize_path
from tiermem.tui.app.messages import ActionFailed, describe_error
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.screens.memories import MemoriesScreen
from tiermem.tui.app.screens.modals import ConfirmModal, Field, FormModal
from tiermem.tui.app.widgets.format import count, day, markup
from tiermem.tui.app.widgets.memory_table import ListedRow, MemoryTable

NODE_PAGE = 200


@dataclass(frozen=True)
class NodeRows:
    path: str
    rows: list[ListedRow]
    total: int


class NodeLoaded(Message, bubble=False):
    def __init__(self, data: NodeRows) -> None:
        super().__init__()
        self.data = data


def node_rows(memory: Memory, path: str) -> NodeRows:
    now, scoring = memory.now(), memory.cfg.scoring
    category = path or None
    listed = curate.list_memories(memory, category=category, limit=NODE_PAGE)
    rows = [ListedRow(x, x.record.score(now, scoring)) for x in listed]
    return NodeRows(path, rows, curate.count_memories(memory, category=category))


def label(name: str, warm: int, cold: int, last: float | None) -> Text:
    """A node's line; a Text, so its name is shown as written (never markup or emoji codes)."""
    text = Text.assemble(name, "  ", (str(warm), "bold"), "w ", (f"{cold}c", "dim"))
    if last is not None:
        text.append("  ").append(day(last), style="dim")
    return text


class TreeScreen(DataScreen[TreeIndex]):
    MODE = "tree"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "add_node", "Add node"),
        Binding("x", "remove_node", "Remove node"),
        Binding("m", "open_memories", "In Memories"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._selected = ""
        self._fresh = False

    def agent_changed(self, agent_id: str) -> None:
        """Another agent's tree: start at its root, nothing of the last tree kept open."""
        super().agent_changed(agent_id)
        self._selected = ""
        self._fresh = True

    def compose_body(self) -> ComposeResult:
        with Horizontal(classes="split", id="tree-body"):
            tree: Tree[str] = Tree("all memories", data="", id="cat-tree")
            tree.show_root = True
            yield tree
            with Vertical(id="node-side"):
                yield Static("select a node", id="node-title")
                yield MemoryTable(id="node-memories")

    def on_mount(self) -> None:
        self.query_one("#cat-tree").border_title = "Categories"
        self.query_one("#cat-tree").focus()

    def select_path(self, path: str) -> None:
        """Show one node (from the command palette)."""
        self._selected = path
        self.reload()

    def fetch(self, memory: Memory) -> TreeIndex:
        return memory.tree()

    def show(self, data: TreeIndex) -> None:
        tree: Tree[str] = self.query_one("#cat-tree", Tree)
        expanded = set() if self._fresh else {n.data for n in _walk(tree.root) if n.is_expanded}
        if self._fresh:
            self._fresh = False
            tree.call_after_refresh(tree.move_cursor, tree.root, animate=False)
        tree.clear()
        tree.root.set_label(label("all memories", data.root_warm, data.root_cold, None))
        tree.root.data = ""

        def add(parent: UINode[str], path: str) -> None:
            for child in data.children(path):
                node = data.nodes[child]
                ui = parent.add(
                    label(child.rpartition("/")[2], node.warm, node.cold, node.last_activity),
                    data=child,
                    allow_expand=bool(data.children(child)),
                )
                add(ui, child)
                if child in expanded:
                    ui.expand()

        add(tree.root, "")
        tree.root.expand()
        tree.border_subtitle = (
            f"{len(data.nodes)}/{data.cfg.max_nodes} nodes · "
            f"{data.size_bytes()}/{data.cfg.max_bytes} B"
        )
        for ui in _walk(tree.root):
            if ui.data == self._selected:
                parent = ui.parent
                while parent is not None:
                    parent.expand()
                    parent = parent.parent
                tree.call_after_refresh(tree.move_cursor, ui, animate=False)
                break
        self._list(self._selected)

    @on(Tree.NodeHighlighted, "#cat-tree")
    def _highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        path = event.node.data or ""
        if path != self._selected:
            self._selected = path
            self._list(path)

    def _list(self, path: str) -> None:
        memory = self.tiermem.memory
        if memory is not None:
            self._load_node(memory, path)

    @work(thread=True, exclusive=True, group="node", exit_on_error=False)
    def _load_node(self, memory: Memory, path: str) -> None:

        try:
            data = node_rows(memory, path)
        except Exception as exc:
            self.post_message(ActionFailed(describe_error(exc)))
            return
        self.post_message(NodeLoaded(data))

    def on_node_loaded(self, message: NodeLoaded) -> None:
        data = message.data
        if data.path != self._selected:
            return
        shown = len(data.rows)
        more = f" (newest {shown}; m opens all in Memories)" if shown < data.total else ""
        self.query_one("#node-title", Static).update(
            markup(
                f"[b]$path[/b] · {count(data.total)} memories{more}",
                path=data.path or "all memories",
            )
        )
        table = self.query_one("#node-memories", MemoryTable)
        table.fill(data.rows, keep=table.current_id())

    # -- actions ----------------------------------------------------------------------------

    def action_add_node(self) -> None:
        base = f"{self._selected}/" if self._selected else ""

        def added(values: dict[str, str] | None) -> None:
            if values is not None:
                with contextlib.suppress(TiermemError):
                    self._selected = normalize_path(values["path"])  # show the new node
                self.tiermem.perform(
                    lambda mem: f"added {mem.tree_add(values['path'], values['description']).path}"
                )

        self.app.push_screen(
            FormModal(
                "Add a tree node",
                [
                    Field("path", "Path", base, "projects/evoclaw/bsc", required=True),
                    Field("description", "Description", placeholder="what lives here"),
                ],
                note="Limits: 50 nodes, depth 4, 10 children, 2 KB.",
            ),
            added,
        )

    def action_remove_node(self) -> None:
        path = self._selected
        if not path:
            self.notify("select a node to remove", severity="warning")
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.tiermem.perform(lambda mem: "removed " + ", ".join(mem.tree_remove(path)))

        self.app.push_screen(
            ConfirmModal(f"Remove {path} and its children? Only empty nodes can go."),
            confirmed,
        )

    async def action_open_memories(self) -> None:
        path = self._selected or None
        await self.app.switch_mode("memories")
        if isinstance(self.app.screen, MemoriesScreen):
            self.app.screen.set_category(path)


def _walk(node: UINode[str]) -> list[UINode[str]]:
    out = [node]
    for child in node.children:
        out += _walk(child)
    return out
