"""Forms open with their first field focused: what a person types goes into it, no tab first.
And an empty hot memory says it was never updated (not 1970)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from tests.tui.conftest import make_app, settle
from tests.tui.demo import NOW, FixedClock
from tests.tui.test_app import drive, fill_form, goto, keys, open_home, select_row
from tiermem.core.engine import Memory
from tiermem.tui.app.screens.hot import HotScreen
from tiermem.tui.app.screens.modals import FormModal


def first_field_focused(pilot: Pilot[None]) -> None:
    modal = pilot.app.screen
    assert isinstance(modal, FormModal)
    focused = modal.focused
    assert isinstance(focused, Input | TextArea)
    assert focused.id == f"f-{modal.fields[0].name}"


def test_store_form_focuses_its_first_field(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "3")
        await goto(pilot, "s")
        first_field_focused(pilot)
        await pilot.press(*keys("Typed straight into the store form"))
        await pilot.press("tab", *keys("notes/typed"), "ctrl+s")
        await settle(pilot)
        with open_home(demo_home) as mem:
            [hit] = mem.retrieve("typed straight store form", reinforce=False).hits
        assert hit.memory.text == "Typed straight into the store form"

    drive(app, body)


def test_edit_form_focuses_its_first_field(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "3")
        with open_home(demo_home) as mem:
            target = mem.retrieve("rust parser", limit=1, reinforce=False).hits[0].memory
        select_row(app, target.id)
        await settle(pilot)
        await goto(pilot, "e")
        first_field_focused(pilot)
        await pilot.press(*keys("Edited: "), "ctrl+s")
        await settle(pilot)
        with open_home(demo_home) as mem:
            [hit] = mem.retrieve("edited rust parser", reinforce=False).hits
        assert hit.memory.text == f"Edited: {target.text}"

    drive(app, body)


def test_add_lesson_form_focuses_its_first_field(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "4")
        await goto(pilot, "l")
        first_field_focused(pilot)
        await pilot.press(*keys("Typed lesson needs no tab"), "ctrl+s")
        await settle(pilot)
        with open_home(demo_home) as mem:
            lessons = [x.text for x in mem.hot().critical_lessons]
        assert "Typed lesson needs no tab" in lessons

    drive(app, body)


def test_empty_hot_memory_says_updated_never(tmp_path: Path) -> None:
    home = tmp_path / "home"
    open_home(home).close()
    app = make_app(home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "4")
        assert isinstance(app.screen, HotScreen)
        assert "*Updated never*" in app.screen.markdown
        assert "1970" not in app.screen.markdown

    drive(app, body)


def test_a_field_shown_with_escapes_keeps_its_text_unless_edited(tmp_path: Path) -> None:
    """The edit form shows a memory's control characters as escapes (they would reach the
    terminal); changing only the importance saves the text exactly as it was."""
    home = tmp_path / "home"
    text = "beep \x07 and \x1b[31mred\x1b[0m after the deploy"
    with Memory(home, clock=FixedClock(NOW)) as mem:
        memory_id = mem.store(text, "notes", 0.5).id
    app = make_app(home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "3")
        await goto(pilot, "e")
        area = app.screen.query_one("#f-text", TextArea)
        assert "\x1b" not in area.text and "\\x1b[31mred" in area.text
        await fill_form(pilot, {"importance": "0.9"})
        await settle(pilot)

    drive(app, body)
    with open_home(home) as mem:
        saved = mem.memories.get(memory_id)
    assert saved.text == text and saved.importance == 0.9
