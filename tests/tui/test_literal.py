"""`literal`: any stored text inside the TUI's markup (Textual's, read by Static, option lists,
the palette) comes out as written, whatever brackets, backslashes or control characters it
holds. Rich's markup is never given stored text: the Tree's labels are built as Text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from textual.content import Content

from tiermem.core.printable import printable
from tiermem.tui.app.widgets.format import literal

TEMPLATE = "[b]x[/b] {} [dim]y[/dim] [b]{}[/b]"
TRICKY = st.text(alphabet=st.sampled_from("[]\\/$@#=:ab05m \x1b\x07\u202e"), max_size=16)


def _expected(text: str) -> str:
    shown = printable(text)
    return shown + "\u200b" if shown.endswith("\\") else shown


@given(TRICKY, st.text(max_size=12))
def test_textual_markup_shows_the_text_as_written(text: str, other: str) -> None:
    markup = TEMPLATE.format(literal(text), literal(other))
    assert Content.from_markup(markup).plain == f"x {_expected(text)} y {_expected(other)}"
