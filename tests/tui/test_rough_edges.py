"""The newcomer's rough edges, by key presses: the theme is remembered, the tree starts over
for another agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from textual.command import CommandList
from textual.pilot import Pilot
from textual.widgets import Input, Select, Static, Tree
from textual.widgets._footer import FooterKey
from textual.widgets._select import SelectOverlay
from textual.widgets._toast import Toast

from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tests.tui.test_app import drive, fill_form
from tiermem.core.engine import Memory
from tiermem.tui.app import TiermemApp
from tiermem.tui.app.screens.restore import RestoreModal
from tiermem.tui.app.widgets.memory_table import MemoryTable


def test_the_chosen_theme_is_remembered_in_the_home(demo_home: Path) -> None:
    first = make_app(demo_home)
    chosen: list[str] = []

    async def toggle(pilot: Pilot[None]) -> None:
        before = first.theme
        await pilot.press("T")
        await settle(pilot)
        assert first.theme != before
        chosen.append(first.theme)

    drive(first, toggle)
    assert json.loads((demo_home / "tui-state.json").read_text()) == {"theme": chosen[0]}
    second = make_app(demo_home)

    async def check(pilot: Pilot[None]) -> None:
        assert second.theme == chosen[0]

    drive(second, check)


def test_a_broken_state_file_is_ignored(demo_home: Path) -> None:
    (demo_home / "tui-state.json").write_text("{not json")
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        assert app.theme == "tiermem-dark"

    drive(app, body)


def test_the_tree_starts_at_the_new_agents_root_after_switching(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("2")
        await settle(pilot)
        tree: Tree[str] = app.screen.query_one("#cat-tree", Tree)
        await pilot.press("down", "down", "down")
        await settle(pilot)
        assert tree.cursor_node is not None and tree.cursor_node.data
        await pilot.press("A")
        await settle(pilot)
        await pilot.press("down", "enter")  # default, research
        await settle(pilot)
        assert app.agent_id == "research"
        assert tree.cursor_node is tree.root
        assert "all memories" in str(app.screen.query_one("#node-title", Static).render())
        assert not any(n.is_expanded for n in tree.root.children)

    drive(app, body)


def _palette_options(app: TiermemApp) -> list[str]:
    options = app.screen.query_one(CommandList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def _palette(pilot: Pilot[None], query: str) -> list[str]:
    await pilot.press("ctrl+p")
    await settle(pilot)
    await pilot.press(*query)
    for _ in range(40):  # the providers search in the background
        await pilot.pause(0.05)
        options = _palette_options(pilot.app)  # type: ignore[arg-type]
        if options and any(o.startswith(("Tree:", "Memory:")) for o in options):
            break
    return _palette_options(pilot.app)  # type: ignore[arg-type]


def test_the_palette_finds_a_tree_node_and_opens_it(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        options = await _palette(pilot, "projects")
        assert options[0].startswith("Tree: projects"), options
        await pilot.press("enter")
        await settle(pilot)
        tree: Tree[str] = app.screen.query_one("#cat-tree", Tree)
        await settle(pilot)
        assert tree.cursor_node is not None and tree.cursor_node.data == "projects"

    drive(app, body)


def test_the_palette_finds_memories_and_commands_and_opens_a_memory(demo_home: Path) -> None:
    with Memory(demo_home, clock=FixedClock(NOW)) as mem:
        peanuts_id = next(
            m.id
            for chunk in mem.memories.iter_all()
            for m in chunk
            if m.text == "Luna is allergic to peanuts"
        )
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        options = await _palette(pilot, "peanuts")
        memories = [o for o in options if o.startswith("Memory:")]
        assert memories, options
        await pilot.press("escape")
        await settle(pilot)
        commands = await _palette(pilot, "consolidate")
        assert any(o.startswith("Consolidate") for o in commands), commands
        await pilot.press("escape")
        options = await _palette(pilot, "peanuts")
        index = options.index(memories[0])
        await pilot.press(*["down"] * index, "enter")
        await settle(pilot)
        table = app.screen.query_one(MemoryTable)
        assert app.screen.query_one("#search", Input).value == ""  # the listing, not a search
        assert table.row_count > 1
        assert table.current_id() == peanuts_id  # the memory itself is under the cursor
        assert "Luna is allergic to peanuts" in str(app.screen.query_one("#detail-main").render())

    drive(app, body)


EDITOR_SCRIPT = """import sys
path = sys.argv[1]
with open(path, encoding="utf-8") as handle:
    text = handle.read()
with open(path, "w", encoding="utf-8") as handle:
    handle.write(text.replace("peanuts", "peanuts and sesame") + ADDED)
"""


def _editor(tmp_path: Path, monkeypatch, added: str) -> None:
    script = tmp_path / "editor.py"
    script.write_text(EDITOR_SCRIPT.replace("ADDED", repr(added)))
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")


def test_a_memory_opens_in_the_editor_and_its_edit_is_saved(
    demo_home: Path, tmp_path: Path, monkeypatch
) -> None:
    _editor(tmp_path, monkeypatch, "")
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("3")
        await settle(pilot)
        with Memory(demo_home, clock=FixedClock(NOW)) as mem:
            target = mem.retrieve("peanuts", limit=1, reinforce=False).hits[0].memory
        table = app.screen.query_one(MemoryTable)
        table.move_cursor(row=table.get_row_index(target.id))
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        with Memory(demo_home, clock=FixedClock(NOW)) as mem:
            [hit] = mem.retrieve("sesame", reinforce=False).hits
        assert hit.memory.text == "Luna is allergic to peanuts and sesame"

    drive(app, body)


def test_memory_md_opens_in_the_editor_and_is_read_back(
    demo_home: Path, tmp_path: Path, monkeypatch
) -> None:
    _editor(tmp_path, monkeypatch, "\\nThe fuse box is behind the pantry door.\\n")
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        assert any(n.message.startswith("MEMORY.md read back") for n in app._notifications)
        with Memory(demo_home, clock=FixedClock(NOW)) as mem:
            assert mem.retrieve("fuse box pantry", reinforce=False).hits

    drive(app, body)


def test_without_an_editor_it_says_how_to_set_one(demo_home: Path, monkeypatch) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("4")
        await settle(pilot)
        await pilot.press("E")
        await settle(pilot)
        assert any("set $EDITOR" in n.message for n in app._notifications)

    drive(app, body)


def test_quit_stays_in_the_footer_at_80_columns_on_every_screen(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        for key in "123456":
            await pilot.press(key)
            await settle(pilot)
            quit_key = next(
                k for k in app.screen.query(FooterKey) if k.action in ("quit", "app.quit")
            )
            assert quit_key.region.width > 0 and quit_key.region.right <= 80, key
        await pilot.press("q")

    drive(app, body, size=(80, 24))
    assert app.return_code == 0


def _app_with(tmp_path: Path, *facts: tuple[str, str]) -> TiermemApp:
    """The app on a new home holding `facts` (text, category)."""
    home = tmp_path / "home"
    with Memory(home, clock=FixedClock(NOW)) as mem:
        for text, category in facts:
            mem.store(text, category, 0.5)
    return make_app(home)


LITERAL_TEXTS = (
    "the closing tag [/] belongs in the template",
    "wrap it as [bold]loud[/bold] in the docs",
    "the status emoji code is :smile: in chat",
)


def test_memories_that_look_like_markup_are_listed_as_written(tmp_path: Path) -> None:
    """Memory text is data: the table shows `[/]`, `[bold]` and `:smile:` literally (a markup
    parse would fail on the first, style the second and draw an emoji for the third)."""
    app = _app_with(tmp_path, *((text, "notes/markup") for text in LITERAL_TEXTS))

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("3")
        await settle(pilot)
        table = app.screen.query_one(MemoryTable)
        shown = [str(table.get_row_at(i)[-1]) for i in range(table.row_count)]
        rendered = [table._get_row_renderables(i).cells[-1] for i in range(table.row_count)]
        assert sorted(shown) == sorted(LITERAL_TEXTS)
        assert sorted(r.plain for r in rendered) == sorted(LITERAL_TEXTS)  # type: ignore[union-attr]

    drive(app, body, size=(200, 34))  # wide enough that no text is cut short


def test_a_category_that_looks_like_markup_is_shown_as_written(tmp_path: Path) -> None:
    """Category names may hold any printable text: the Tree screen shows `[bold]` and `:smile:`
    as typed (they were taken for a style and an emoji)."""
    app = _app_with(tmp_path, ("a fact in an odd category", "notes/[bold]odd :smile: x"))

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("2")
        await settle(pilot)
        for key in ("down", "space"):  # onto `notes`, then open it
            await pilot.press(key)
            await settle(pilot)
        tree = app.screen.query_one(Tree)
        [notes] = tree.root.children
        assert [str(child.label).split("  ")[0] for child in notes.children] == [
            "[bold]odd-:smile:-x"
        ]

    drive(app, body)


def _toasts(app: TiermemApp) -> list[str]:
    """What the visible toasts say, as rendered."""
    return [str(toast.render().plain) for toast in app.screen.query(Toast)]


def test_an_error_quoting_what_was_typed_is_shown_as_written(demo_home: Path) -> None:
    """Notifications quote input, errors and paths: `[/]` typed as the importance used to crash
    the app when its error toast was drawn (Textual read it as a closing tag)."""
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("3")
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        await fill_form(
            pilot, {"text": "a fact", "category": "notes", "importance": "[/] :smile: [bold]x"}
        )
        await pilot.pause(0.2)
        assert any("got '[/] :smile: [bold]x'" in toast for toast in _toasts(app)), _toasts(app)
        app.save_screenshot(str(demo_home / "shot.svg"))  # draws every toast

    drive(app, body)
    assert app.return_code in (None, 0)


def test_a_restore_of_an_agent_named_like_markup_shows_its_name(demo_home: Path) -> None:
    """The restore dialog's title quotes the agent as typed (it crashed on `[/]`)."""
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("6")
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        await fill_form(pilot, {"url": "http://127.0.0.1:9", "agent": "odd[/]agent"})
        modal = app.screen
        assert isinstance(modal, RestoreModal)
        dialog = modal.query_one(".dialog")
        assert dialog.border_title is not None
        assert "Restore 'odd[/]agent'" in str(dialog._border_title.plain)  # type: ignore[union-attr]
        await pilot.pause(0.2)
        app.save_screenshot(str(demo_home / "shot.svg"))
        assert _toasts(app), "the failed restore says why"

    drive(app, body)
    assert app.return_code in (None, 0)


def test_the_palette_shows_memories_and_nodes_that_look_like_markup_as_written(
    tmp_path: Path,
) -> None:
    """A palette hit quotes a memory, its category and a tree node's path: `[/]` in one
    crashed the palette as the hit was drawn."""
    app = _app_with(tmp_path, ("the closing tag [/] belongs in the template", "notes/[bold]odd[/]"))

    async def body(pilot: Pilot[None]) -> None:
        await _palette(pilot, "closing tag")
        options = app.screen.query_one(CommandList)
        lines = [
            "".join(s.text for s in options.render_line(y)) for y in range(options.size.height)
        ]
        shown = "\n".join(lines)
        assert "the closing tag [/] belongs" in shown, shown
        assert "notes/[bold]odd[/]" in shown, shown

    drive(app, body, size=(160, 40))


def test_a_category_that_looks_like_markup_is_offered_as_written(tmp_path: Path) -> None:
    """The Memories screen's category filter lists every category as written (`[bold]` in one
    was taken for a style: the filter offered `notes/odd[`)."""
    app = _app_with(tmp_path, ("a fact in an odd category", "notes/[bold]odd[/]"))

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("3")
        await settle(pilot)
        category = app.screen.query_one("#category", Select)
        category.focus()
        await pilot.press("enter")  # open the list
        await settle(pilot)
        overlay = category.query_one(SelectOverlay)
        lines = [
            "".join(s.text for s in overlay.render_line(y)) for y in range(overlay.size.height)
        ]
        assert any("notes/[bold]odd[/]" in line for line in lines), lines

    drive(app, body, size=(160, 40))


def test_a_search_typed_with_brackets_is_quoted_as_written(demo_home: Path) -> None:
    """The status line quotes the search: typing `[/]` crashed the Memories screen."""
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("3")
        await settle(pilot)
        await pilot.press("slash", *"deploy [/] [bold]x")
        await settle(pilot)
        status = str(app.screen.query_one("#mem-status", Static).render())
        assert "for 'deploy [/] [bold]x'" in status, status

    drive(app, body)


def test_everyday_brackets_in_a_memory_are_shown_as_written(tmp_path: Path) -> None:
    """An unclosed `[` (`the list [1, 2`) is ordinary text: Rich's escape left it alone and
    Textual read it as the start of a tag, so the Memories screen crashed drawing the detail
    panel, and the dashboard drawing its latest memories."""
    texts = ("the list [1, 2 is unfinished", "a path ends in C:\\", "TODO [ ] ship it")
    app = _app_with(tmp_path, *((text, "notes") for text in texts))

    async def body(pilot: Pilot[None]) -> None:
        latest = str(app.screen.query_one("#dash-latest", Static).render())
        assert all(text in latest for text in texts), latest
        await pilot.press("3")
        await settle(pilot)
        seen = []
        for _ in texts:
            seen.append(str(app.screen.query_one("#detail-main", Static).render()))
            await pilot.press("down")
            await settle(pilot)
        assert all(any(text in shown for shown in seen) for text in texts), seen

    drive(app, body, size=(160, 40))


def test_hot_items_that_look_like_markup_are_shown_as_written(tmp_path: Path) -> None:
    """The Hot screen's tree lists lessons as written: brackets, backslashes and control
    characters included (its labels were markup)."""
    home = tmp_path / "home"
    lessons = ("keep [1, 2 and [bold]x[/bold] apart", "a path ends in C:\\", "beep \x07 here")
    with Memory(home, clock=FixedClock(NOW)) as mem:
        for text in lessons:
            mem.add_lesson(text, 0.9)
    app = make_app(home)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("4")
        await settle(pilot)
        tree: Tree[object] = app.screen.query_one("#hot-tree", Tree)
        labels = []
        stack = [tree.root]
        while stack:
            node = stack.pop()
            labels.append(str(node.label))
            stack.extend(node.children)
        shown = "\n".join(labels)
        assert "keep [1, 2 and [bold]x[/bold] apart" in shown, shown
        assert "a path ends in C:\\" in shown and "beep \\x07 here" in shown, shown

    drive(app, body)


def test_the_dashboards_category_bars_line_up_whatever_the_names_hold(tmp_path: Path) -> None:
    """Each category's count sits in the same column: a name with brackets was padded after
    its escapes were added, so its line came out shifted by them."""
    app = _app_with(tmp_path, ("one fact", "[x]y"), ("two facts", "plain"), ("three", "plain"))

    async def body(pilot: Pilot[None]) -> None:
        bars = str(app.screen.query_one("#dash-categories", Static).render()).splitlines()
        counts = {line.split()[0]: line.index(line.split()[1]) for line in bars[:2]}
        assert set(counts) == {"[x]y", "plain"}, bars
        assert len(set(counts.values())) == 1, bars

    drive(app, body)
