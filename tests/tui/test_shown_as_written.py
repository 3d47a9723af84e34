"""Values a person typed come back on screen the way a person writes them."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Tree

from tests.tui.conftest import make_app
from tests.tui.test_app import drive, fill_form, goto
from tiermem.tui.app.screens.hot import HotScreen


def _labels(tree: Tree[object]) -> list[str]:
    out, stack = [], [tree.root]
    while stack:
        node = stack.pop()
        out.append(str(node.label))
        stack.extend(node.children)
    return out


def test_a_profile_list_on_the_hot_screen_reads_as_a_list_not_python(demo_home: Path) -> None:
    app = make_app(demo_home)

    async def body(pilot: Pilot[None]) -> None:
        await goto(pilot, "4")
        await pilot.press("o")
        await fill_form(pilot, {"key": "languages", "value": '["English", "Portuguese (B1)"]'})
        assert isinstance(app.screen, HotScreen)
        labels = _labels(app.screen.query_one("#hot-tree", Tree))
        assert "languages: English, Portuguese (B1)" in labels
        assert "topics_loved: systems, cycling" in labels
        assert not [label for label in labels if "['" in label]

    drive(app, body)
