"""`literal`: any stored text inside the TUI's markup comes out as written, whatever brackets,
backslashes or control characters it holds, under both markup readers the TUI meets (Textual's
content markup for Static and option lists, Rich's for tree labels)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from rich.text import Text
from textual.content import Content

from tiermem.tui.app.widgets.format import literal, printable

TEMPLATE = "[b]x[/b] {} [dim]y[/dim] [b]{}[/b]"
TRICKY = st.text(alphabet=st.sampled_from("[]\\/$@#=:ab05m \x1b\x07\u202e"), max_size=16)


def _expected(text: str) -> str:
    shown = printable(text)
    return shown + "\u200b" if shown.endswith("\\") else shown


@given(TRICKY, st.text(max_size=12))
def test_textual_markup_shows_the_text_as_written(text: str, other: str) -> None:
    markup = TEMPLATE.format(literal(text), literal(other))
    assert Content.from_markup(markup).plain == f"x {_expected(text)} y {_expected(other)}"


@given(TRICKY, st.text(max_size=12))
def test_rich_markup_shows_the_text_as_written(text: str, other: str) -> None:
    markup = TEMPLATE.format(literal(text), literal(other))
    assert Text.from_markup(markup).plain == f"x {_expected(text)} y {_expected(other)}"
