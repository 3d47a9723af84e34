"""Stored text inside the TUI's markup comes out as written, whatever brackets, backslashes,
`$` or control characters it holds: as a value of `markup` (the panels) and through `literal`
(the palette's help line, a Textual API that takes only a string). Rich's markup is never given
stored text: the Tree's labels are built as Text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from textual.content import Content

from tiermem.core.printable import printable
from tiermem.tui.app.widgets.format import literal, markup, markup_lines

TRICKY = st.text(alphabet=st.sampled_from("[]\\/$@#=:ab05m \x1b\x07\u202e"), max_size=16)


@given(TRICKY, st.text(max_size=12))
def test_markup_values_are_shown_as_written(text: str, other: str) -> None:
    shown = markup("[b]x[/b] $text [dim]y[/dim] [b]$other[/b]", text=text, other=other)
    assert shown.plain == f"x {printable(text)} y {printable(other)}"
    assert (shown.spans[0].start, shown.spans[0].end) == (0, 1)  # our own tags still apply


@given(st.lists(TRICKY, max_size=4))
def test_markup_lines_keep_each_line(texts: list[str]) -> None:
    joined = markup_lines(markup("[dim]$t[/dim]", t=t) for t in texts)
    assert joined.plain == "\n".join(printable(t) for t in texts)


def _expected(text: str) -> str:
    shown = printable(text)
    return shown + "\u200b" if shown.endswith("\\") else shown


@given(TRICKY, st.text(max_size=12))
def test_literal_in_a_markup_string_shows_the_text_as_written(text: str, other: str) -> None:
    source = f"[b]x[/b] {literal(text)} [dim]y[/dim] [b]{literal(other)}[/b]"
    assert Content.from_markup(source).plain == f"x {_expected(text)} y {_expected(other)}"
