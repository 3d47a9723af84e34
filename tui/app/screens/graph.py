"""Graph: the knowledge graph's entities, most mentioned first; `/` searches the agent's graph
and every space it includes, as `tiermem graph search` does (`core.scoped.graph_search`: a
name or a question), each entity labelled with its space; the highlighted one's relations with
their time spans, and the memories and episodes that mention it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from tiermem.core import episodes, scoped
from tiermem.core import graph as graphmod
from tiermem.core.engine import Memory
from tiermem.core.graph import view
from tiermem.core.graph.store import Entity
from tiermem.tui.app.messages import ActionFailed, describe_error
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.widgets.format import count, markup, markup_lines, one_line
from tiermem.tui.app.widgets.plain_table import PlainTable

ENTITIES = 500
"""Entities listed at once; the filter reaches the others."""
NO_ENTITIES = "no entities yet: conversations add them"


@dataclass(frozen=True)
class Listed:
    """One entity row: the entity, and the space whose graph holds it (None: the agent's)."""

    entity: Entity
    space: str | None = None

    @property
    def key(self) -> str:
        """The row's key: an entity id is unique within its scope only."""
        return self.entity.id if self.space is None else f"{self.space}/{self.entity.id}"


@dataclass(frozen=True)
class GraphData:
    entities: list[Listed]
    total: int  # the agent's entities, listed or not
    relations: int
    episodes: int
    filtered: bool = False


class EntityLoaded(Message, bubble=False):
    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__()
        self.data = data


def entity_text(data: dict[str, Any]) -> Content:
    """The detail pane: relations with spans, then what mentions the entity."""
    lines = [
        markup(
            "[b]$name[/b] [dim]$kind · $id$space[/dim]",
            name=data["name"],
            kind=data["kind"],
            id=data["id"],
            space=f" · space {data['space']}" if data.get("space") else "",
        )
    ]
    if data["aliases"]:
        lines.append(markup("[dim]also[/dim] $aliases", aliases=", ".join(data["aliases"])))
    lines.append(markup(""))
    lines.append(markup("[b]relations[/b]" if data["relations"] else "[dim]no relations[/dim]"))
    for r in data["relations"]:
        template = "$line" if r["current"] else "[dim]$line[/dim]"
        lines.append(markup(template, line=view.relation_line(r)))
    if data["memories"]:
        lines += [markup(""), markup(f"[b]memories[/b] ({len(data['memories'])})")]
        lines += [markup("- $text", text=one_line(m["text"], 100)) for m in data["memories"]]
    if data["episodes"]:
        lines += [markup(""), markup(f"[b]episodes[/b] ({len(data['episodes'])})")]
        lines += [
            markup(
                "- [dim]$day[/dim] $abstract",
                day=e["started_at"][:10],
                abstract=one_line(e["abstract"], 100),
            )
            for e in data["episodes"]
        ]
    return markup_lines(lines)


def entities_shown(data: GraphData) -> str:
    """How many entities the table lists, of how many (the list stops at `ENTITIES`)."""
    listed, total = count(len(data.entities)), count(data.total)
    if data.filtered:  # at the cap, more may match than are listed
        more = "+" if len(data.entities) >= ENTITIES else ""
        return f"{listed}{more} of {total} entities match the filter"
    return (
        f"{total} entities" if len(data.entities) == data.total else f"{listed} of {total} entities"
    )


class GraphScreen(DataScreen[GraphData]):
    MODE = "graph"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("escape", "leave_filter", "Table", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._selected: str | None = None
        self._filter = ""
        self._rows: dict[str, Listed] = {}

    def compose_body(self) -> ComposeResult:
        with Horizontal(classes="split", id="graph-body"):
            with Vertical(id="graph-left"):
                yield Input(
                    placeholder="/ search: a name or a question…", id="entity-filter", compact=True
                )
                yield PlainTable(id="entities", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="entity-side"):
                yield Static(f"[dim]{NO_ENTITIES}[/dim]", id="entity")

    def on_mount(self) -> None:
        table = self.query_one("#entities", DataTable)
        table.border_title = "Entities"
        table.add_columns("name", "kind", "mentions", "space")
        self.query_one("#entity-side").border_title = "Relations and mentions"
        table.focus()

    def reload(self) -> None:
        if self.is_mounted:
            self._filter = self.query_one("#entity-filter", Input).value
        super().reload()

    def fetch(self, memory: Memory) -> GraphData:
        store = graphmod.store_for(memory)
        total, relations = store.count()
        query = self._filter.strip()
        if query and memory.cfg.memory_on(memory.agent_id):
            listed = searched(memory, query)
        else:  # the whole list, or (memory off) the person's own graph by name
            listed = [Listed(e) for e in store.entities(query=query, limit=ENTITIES)]
        found = episodes.count(memory.db, memory.agent_id)
        return GraphData(listed, total, relations, found, bool(query))

    def show(self, data: GraphData) -> None:
        table = self.query_one("#entities", DataTable)
        table.clear()
        self._rows = {row.key: row for row in data.entities}
        for listed in data.entities:
            e = listed.entity
            table.add_row(
                one_line(e.name, 28), e.kind, count(e.mentions), listed.space or "", key=listed.key
            )
        table.border_subtitle = (
            f"{entities_shown(data)} · {count(data.relations)} relations · "
            f"{count(data.episodes)} episodes"
        )
        if data.entities:
            ids = [e.key for e in data.entities]
            row = ids.index(self._selected) if self._selected in ids else 0
            table.move_cursor(row=row, animate=False)
            self._open(ids[row])
            return
        self._selected = None
        empty = "no entity matches the filter" if data.filtered else NO_ENTITIES
        self.query_one("#entity", Static).update(f"[dim]{empty}[/dim]")

    @on(Input.Changed, "#entity-filter")
    def _filter_changed(self) -> None:
        self.reload()

    @on(Input.Submitted, "#entity-filter")
    def _filter_submitted(self) -> None:
        self.query_one("#entities", DataTable).focus()

    def action_filter(self) -> None:
        self.query_one("#entity-filter", Input).focus()

    def action_leave_filter(self) -> None:
        box = self.query_one("#entity-filter", Input)
        if box.has_focus:
            self.query_one("#entities", DataTable).focus()
        elif box.value:
            box.value = ""

    @on(DataTable.RowHighlighted, "#entities")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and event.row_key.value != self._selected:
            self._open(event.row_key.value)

    def _open(self, key: str) -> None:
        self._selected = key
        memory = self.tiermem.memory
        row = self._rows.get(key)
        if memory is not None and row is not None:
            self._load_entity(memory, row)

    @work(thread=True, exclusive=True, group="entity", exit_on_error=False)
    def _load_entity(self, memory: Memory, row: Listed) -> None:
        try:
            if row.space is None:
                data = view.entity_view(memory, row.entity.id)
            else:
                with memory.open_space(row.space) as space:
                    data = view.entity_view(space, row.entity.id)
        except Exception as exc:
            self.post_message(ActionFailed(describe_error(exc)))
            return
        self.post_message(EntityLoaded(data | {"space": row.space, "key": row.key}))

    def on_entity_loaded(self, message: EntityLoaded) -> None:
        if message.data["key"] == self._selected:
            self.query_one("#entity", Static).update(entity_text(message.data))


def searched(memory: Memory, query: str) -> list[Listed]:
    """What `graph search` finds for `query` in the agent's graph and every space it includes
    (`core.scoped.graph_search`), best first, each entity with its space."""
    found = scoped.graph_search(memory, query)
    return [
        Listed(
            Entity(e["id"], e["name"], e["kind"], (e["name"], *e["aliases"]), e["mentions"]),
            e["space"],
        )
        for e in found["entities"][:ENTITIES]
    ]
