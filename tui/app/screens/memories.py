"""Memories: a lazily paged table with search-as-you-type through the engine's retrieval,
filters (tier, category, agent), and a detail pane; curation keys act on the row under the
cursor."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import msgspec
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Input, Select, Static
from textual.worker import get_current_worker

from tiermem.core import curate, supersession
from tiermem.core.curate import Listed
from tiermem.core.engine import Memory, tiers_for
from tiermem.core.printable import printable
from tiermem.core.retrieve import Explanation, RetrievalResult, search
from tiermem.core.rows import MemoryRow
from tiermem.tui.app.editor import run_editor
from tiermem.tui.app.messages import ActionFailed, DetailLoaded, Loaded, describe_error
from tiermem.tui.app.screens.base import DataScreen
from tiermem.tui.app.screens.modals import (
    ConfirmModal,
    FormModal,
    memory_fields,
    parse_importance,
    split_lines,
)
from tiermem.tui.app.widgets.detail import DetailData, MemoryDetail, load_detail
from tiermem.tui.app.widgets.format import count, one_line
from tiermem.tui.app.widgets.memory_table import ListedRow, MemoryTable

PAGE = curate.PAGE
PREFETCH = 25
MAX_RELOAD = 5000
SEARCH_ROWS = 50
"""Results shown while typing: every keystroke pays for each (explanation, table row)."""
TIERS = [("all tiers", "all"), ("warm", "warm"), ("cold+frozen", "cold"), ("frozen", "frozen")]
ANY = "*"


@dataclass(frozen=True)
class Params:
    query: str
    tier: str
    category: str | None
    size: int
    focus: str | None = None
    """A memory to list down to and put the cursor on (one opened from the palette)."""


@dataclass(frozen=True)
class Page:
    serial: int
    query: str
    rows: list[ListedRow]
    explanations: dict[str, Explanation]
    total: int
    more: bool
    append: bool = False
    status: str = ""
    categories: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)


def search_as_you_type(
    memory: Memory, query: str, tier: str | None, category: str | None
) -> RetrievalResult:
    """The engine's keyword retrieval, read-only (browsing is not the agent using its memory),
    with the last word matched as a prefix while it is being typed ("kube" finds
    "kubernetes") and a pool of at least `SEARCH_ROWS`."""
    cfg = memory.cfg.retrieval
    return search(
        memory.memories,
        memory.trees.load(),
        query,
        now=memory.now(),
        retrieval=msgspec.structs.replace(cfg, candidate_pool=max(cfg.candidate_pool, SEARCH_ROWS)),
        scoring=memory.cfg.scoring,
        limit=SEARCH_ROWS,
        tiers=tiers_for(tier),
        category=category,
        prefix=True,
    )


def fetch_page(memory: Memory, params: Params, serial: int, before: int | None = None) -> Page:
    """A listing page (newest first) or the retrieval results for `params.query`."""
    now, scoring = memory.now(), memory.cfg.scoring
    tier = None if params.tier == "all" else params.tier
    if params.query.strip():
        result = search_as_you_type(memory, params.query, tier, params.category)
        pinned = curate.pinned_ids(memory.db, memory.agent_id)
        rows = [
            ListedRow(Listed(0, h.memory, h.memory.id in pinned), h.explanation.score)
            for h in result.hits
        ]
        terms = ", ".join(result.terms) or "-"
        status = (
            f"{len(rows)} found for {one_line(params.query, 30)!r} · terms {terms} · "
            f"{len(result.categories)} tree match(es)"
        )
        if result.notes:
            status += " · " + "; ".join(result.notes)
        return Page(
            serial,
            params.query,
            rows,
            {h.memory.id: h.explanation for h in result.hits},
            len(rows),
            False,
            status=status,
            categories=sorted(memory.trees.load().nodes),
            agents=curate.list_agents(memory.db),
        )
    listed = (
        listing_down_to(memory, params.focus)
        if params.focus and before is None
        else curate.list_memories(
            memory, tier=tier, category=params.category, before_seq=before, limit=params.size
        )
    )
    rows = [ListedRow(x, x.record.score(now, scoring)) for x in listed]
    if before is not None:
        return Page(serial, "", rows, {}, 0, len(listed) == params.size, append=True)
    total = curate.count_memories(memory, tier=tier, category=params.category)
    return Page(
        serial,
        "",
        rows,
        {},
        total,
        len(listed) == params.size,
        status=f"{count(total)} memories, newest first",
        categories=sorted(memory.trees.load().nodes),
        agents=curate.list_agents(memory.db),
    )


def listing_down_to(memory: Memory, memory_id: str) -> list[Listed]:
    """The unfiltered listing, page by page, until it holds `memory_id` (bounded by
    `MAX_RELOAD` rows), so the table can put its cursor on that memory."""
    listed: list[Listed] = []
    before: int | None = None
    while len(listed) < MAX_RELOAD:
        page = curate.list_memories(memory, before_seq=before, limit=PAGE)
        listed += page
        if len(page) < PAGE or any(x.record.id == memory_id for x in page):
            break
        before = page[-1].seq
    return listed


class MemoriesScreen(DataScreen[Page]):
    MODE = "memories"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "search", "Search"),
        Binding("escape", "leave_search", "Table", show=False),
        Binding("e", "edit", "Edit"),
        Binding("E", "edit_in_editor", "Edit in $EDITOR", show=False),
        Binding("p", "pin", "Pin"),
        Binding("plus,equals_sign", "promote", "Promote", key_display="+"),
        Binding("minus", "demote", "Demote", key_display="-"),
        Binding("d,delete", "forget", "Forget", key_display="d"),
        Binding("u", "undo", "Undo"),
        Binding("U", "unsupersede", "Current again", show=False),
        Binding("y", "copy", "Copy", show=False),
        Binding("o", "open_url", "Open URL", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._serial = 0
        self.shown_serial = -1
        """The request whose rows the table shows (what a benchmark waits for)."""
        self._params = Params("", "all", None, PAGE)
        self._more = False
        self._paging = False
        self._last_seq: int | None = None
        self._explanations: dict[str, Explanation] = {}
        self._detail_serial = 0
        self._detail: DetailData | None = None
        self._shown_query = ""
        self._categories: list[str] = []
        self._agents: list[str] = []
        self._focus: str | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="filters"):
            yield Input(placeholder="/ search (retrieval)…", id="search", compact=True)
            yield Select(TIERS, value="all", allow_blank=False, id="tier", compact=True)
            yield Select(
                [("all categories", ANY)], value=ANY, allow_blank=False, id="category", compact=True
            )
            yield Select(
                [(self.tiermem.agent_id, self.tiermem.agent_id)],
                value=self.tiermem.agent_id,
                allow_blank=False,
                id="agent-filter",
                compact=True,
            )
        with Horizontal(id="mem-body", classes="split"):
            with Vertical(id="mem-left"):
                yield MemoryTable(id="memories")
                yield Static("…", id="mem-status", markup=False)  # quotes the search as typed
            yield MemoryDetail(id="detail", classes="panel")

    def on_mount(self) -> None:
        self.query_one("#detail").border_title = "Detail"
        self.query_one(MemoryTable).focus()

    # -- loading --------------------------------------------------------------------------

    def reload(self) -> None:
        table = self.query_one(MemoryTable)
        # a reload keeps what was scrolled into view (up to a bound), so the cursor stays put
        size = min(max(PAGE, table.row_count), MAX_RELOAD) if not self._params.query else PAGE
        self._params = Params(
            self.query_one("#search", Input).value,
            str(self.query_one("#tier", Select).value),
            self._category_value(),
            size,
            self._focus,
        )
        self._serial += 1
        super().reload()

    @property
    def serial(self) -> int:
        """The newest request (search, filter or reload) started."""
        return self._serial

    def _category_value(self) -> str | None:
        value = self.query_one("#category", Select).value
        return None if value == ANY or not isinstance(value, str) else value

    def fetch(self, memory: Memory) -> Page:
        return fetch_page(memory, self._params, self._serial)

    def show(self, data: Page) -> None:
        if data.serial != self._serial:
            return  # an older request finished after a newer one started
        self.shown_serial = data.serial
        table = self.query_one(MemoryTable)
        if data.append:
            self._paging = False
            table.append(data.rows)
        else:
            self._explanations = data.explanations
            same = data.query == self._shown_query
            self._shown_query = data.query
            keep = self._focus or (table.current_id() if same else None)
            self._focus = None
            table.fill(data.rows, keep=keep, top=not same and keep is None)
            self.query_one("#mem-status", Static).update(printable(data.status))
            self._sync_selects(data)
            self._show_detail(table.current_id())
        self._more = data.more
        if data.rows and not data.explanations:
            self._last_seq = data.rows[-1].listed.seq
        self._load_more_if_near_end()

    def _sync_selects(self, data: Page) -> None:
        category = self.query_one("#category", Select)
        if data.categories != self._categories:
            self._categories = data.categories
            current = category.value
            with self.prevent(Select.Changed):
                category.set_options(
                    [("all categories", ANY), *((Text(c), c) for c in data.categories)]
                )
                category.value = current if current in data.categories else ANY
        agent = self.query_one("#agent-filter", Select)
        if data.agents != self._agents:
            self._agents = data.agents
            with self.prevent(Select.Changed):
                agent.set_options([(a, a) for a in data.agents])
                agent.value = self.tiermem.agent_id

    def agent_changed(self, agent_id: str) -> None:
        super().agent_changed(agent_id)
        if self.is_mounted and agent_id in self._agents:
            with self.prevent(Select.Changed):
                self.query_one("#agent-filter", Select).value = agent_id

    @work(thread=True, exclusive=True, group="page", exit_on_error=False)
    def _next_page(self, memory: Memory, params: Params, serial: int, before: int) -> None:

        try:
            page = fetch_page(memory, params, serial, before)
        except Exception as exc:
            self.post_message(ActionFailed(describe_error(exc)))
            return
        self.post_message(Loaded(page))

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def _load_detail(
        self, memory: Memory, memory_id: str, explanation: Explanation | None, serial: int
    ) -> None:
        try:
            data: DetailData | None = load_detail(memory, memory_id, explanation)
        except Exception:
            data = None  # gone meanwhile (forgotten by another process): the pane empties
        if not get_current_worker().is_cancelled:
            self.post_message(DetailLoaded(data, serial))

    def _show_detail(self, memory_id: str | None) -> None:
        self._detail_serial += 1
        memory = self.tiermem.memory
        if memory_id is None or memory is None:
            self.query_one(MemoryDetail).show(None)
            return
        self._load_detail(memory, memory_id, self._explanations.get(memory_id), self._detail_serial)

    def on_detail_loaded(self, message: DetailLoaded) -> None:
        if message.serial == self._detail_serial:
            self._detail = message.data
            self.query_one(MemoryDetail).show(message.data)

    # -- events ---------------------------------------------------------------------------

    @on(Input.Changed, "#search")
    def _search(self) -> None:
        self.reload()

    @on(Input.Submitted, "#search")
    def _submitted(self) -> None:
        self.query_one(MemoryTable).focus()

    @on(Select.Changed, "#tier")
    @on(Select.Changed, "#category")
    def _filter(self) -> None:
        self.reload()

    @on(Select.Changed, "#agent-filter")
    def _agent(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self.tiermem.agent_id:
            self.tiermem.open_agent(event.value)

    @on(DataTable.RowHighlighted, "#memories")
    def _highlighted(self) -> None:
        self._show_detail(self.query_one(MemoryTable).current_id())
        self._load_more_if_near_end()

    @on(MemoryTable.ViewMoved)
    def _scrolled(self) -> None:
        self._load_more_if_near_end()

    def _load_more_if_near_end(self) -> None:
        """The next page, once the cursor or the bottom of the view (mouse wheel, a table that
        does not fill its view) is within `PREFETCH` rows of the last row loaded."""
        table = self.query_one(MemoryTable)
        memory = self.tiermem.memory
        if not (self._more and not self._paging and self._last_seq and memory):
            return
        last_seen = max(table.cursor_row, int(table.scroll_y) + table.size.height)
        if last_seen >= table.row_count - PREFETCH:
            self._paging = True
            params = Params(self._params.query, self._params.tier, self._params.category, PAGE)
            self._next_page(memory, params, self._serial, self._last_seq)

    def set_category(self, category: str | None) -> None:
        """Show one category (from the tree screen)."""
        select = self.query_one("#category", Select)
        if category and category not in self._categories:
            self._categories = [*self._categories, category]
            select.set_options([("all categories", ANY), *((Text(c), c) for c in self._categories)])
        select.value = category or ANY

    def open_memory(self, memory_id: str) -> None:
        """Show one memory (from the command palette): the whole listing, its row under the
        cursor and its detail beside it."""
        self._focus = memory_id
        with self.prevent(Input.Changed, Select.Changed):
            self.query_one("#search", Input).value = ""
            self.query_one("#tier", Select).value = "all"
            self.query_one("#category", Select).value = ANY
        self.query_one(MemoryTable).focus()
        self.reload()

    # -- actions --------------------------------------------------------------------------

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_leave_search(self) -> None:
        search = self.query_one("#search", Input)
        if search.has_focus:
            self.query_one(MemoryTable).focus()
        elif search.value:
            search.value = ""

    def _selected(self) -> str | None:
        memory_id = self.query_one(MemoryTable).current_id()
        if memory_id is None:
            self.notify("no memory selected", severity="warning")
        return memory_id

    def action_pin(self) -> None:
        memory_id = self._selected()
        if memory_id is None:
            return

        def toggle(mem: Memory) -> str:
            pinned = not curate.get_listed(mem, memory_id).pinned
            tier = curate.set_pinned(mem, memory_id, pinned)
            return f"pinned in {tier}" if pinned else "unpinned"

        self.tiermem.perform(toggle)

    def action_unsupersede(self) -> None:
        """A superseded memory made current again (a wrong supersession undone)."""
        memory_id = self._selected()
        if memory_id is not None:
            self.tiermem.perform(
                lambda mem: f"current again: {supersession.unsupersede(mem, memory_id).id}"
            )

    def action_promote(self) -> None:
        memory_id = self._selected()
        if memory_id is not None:
            self.tiermem.perform(lambda mem: f"promoted to {curate.raise_tier(mem, memory_id)}")

    def action_demote(self) -> None:
        memory_id = self._selected()
        if memory_id is not None:
            self.tiermem.perform(lambda mem: f"demoted to {curate.lower_tier(mem, memory_id)}")

    def action_forget(self) -> None:
        memory_id = self._selected()
        if memory_id is None:
            return
        detail = self._detail
        text = (
            detail.listed.record.text
            if detail is not None and detail.listed.record.id == memory_id
            else str(self.query_one(MemoryTable).get_row(memory_id)[5])
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.tiermem.perform(
                    lambda mem: f"forgot {curate.move_to_forgotten(mem, memory_id).id}",
                    undo_hint=True,
                )

        self.app.push_screen(
            ConfirmModal(
                f"Forget this memory?\n\n{text}\n\nIt leaves retrieval; u brings it back."
            ),
            confirmed,
        )

    def _loaded(self) -> MemoryRow | None:
        """The selected memory, once its detail is loaded (what copy and open act on)."""
        memory_id, detail = self._selected(), self._detail
        if memory_id is None:
            return None
        if detail is None or detail.listed.record.id != memory_id:
            self.notify("still loading this memory: try again", severity="warning")
            return None
        return detail.listed.record

    def action_copy(self) -> None:
        """The memory's text (and its commands, one a line) to the clipboard (OSC 52)."""
        record = self._loaded()
        if record is not None:
            self.app.copy_to_clipboard("\n".join([record.text, *record.commands]))
            self.notify("copied the text" + (" and commands" if record.commands else ""))

    def action_open_url(self) -> None:
        record = self._loaded()
        if record is None:
            return
        if not record.urls:
            self.notify("this memory has no URL", severity="warning")
            return
        self.app.open_url(record.urls[0])
        self.notify(f"opening {record.urls[0]}")

    def action_undo(self) -> None:
        self.tiermem.perform(lambda mem: f"brought back {curate.undo_forget(mem).id}")

    def action_edit(self) -> None:
        record = self._loaded()
        if record is not None:
            self._edit_form(record.id, record)

    def action_edit_in_editor(self) -> None:
        """The selected memory's text in $EDITOR (for a long one); saved when it changed."""
        record = self._loaded()
        if record is None:
            return
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"memory-{record.id}.md"
            path.write_text(record.text + "\n", encoding="utf-8")
            problem = run_editor(self.app, path)
            text = " ".join(path.read_text(encoding="utf-8").split())
        if problem is not None or not text or text == record.text:
            self.notify(problem or "unchanged", severity="warning" if problem else "information")
            return
        memory_id = record.id
        self.tiermem.perform(lambda mem: f"saved {curate.edit(mem, memory_id, text=text).id}")

    def _edit_form(self, memory_id: str, record: MemoryRow) -> None:
        def edited(values: dict[str, str] | None) -> None:
            if values is None:
                return

            def apply(mem: Memory) -> str:
                saved = curate.edit(
                    mem,
                    memory_id,
                    text=values["text"],
                    category=values["category"],
                    importance=parse_importance(values["importance"]),
                    urls=split_lines(values["urls"]),
                    commands=split_lines(values["commands"]),
                    paths=split_lines(values["paths"]),
                )
                return f"saved {saved.id}"

            self.tiermem.perform(apply)

        self.app.push_screen(FormModal("Edit memory", memory_fields(record)), edited)
