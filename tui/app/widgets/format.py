"""Formatting shared by the screens (UTC times, so what is shown never depends on the host).
Stored text reaches the screen through `markup` (as a value in our markup), `shown` (a Text),
`one_line` or `core.printable`: its control characters shown as escapes, never sent to the terminal."""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.text import Text
from textual.content import Content

from tiermem.core.printable import printable


def markup(template: str, **values: object) -> Content:
    """Textual markup of ours with each `$name` filled by `values` as plain text. Textual reads
    the tags before it fills the values, so stored text is never read as markup, whatever its
    brackets and backslashes; control characters are shown as escapes."""
    return Content.from_markup(template, **{k: printable(str(v)) for k, v in values.items()})


def literal(text: str) -> str:
    """Stored text as a markup string, for the Textual APIs that take only a string (the
    command palette's help line); `markup` is for the rest. Textual reads every `[` not after a
    backslash as a tag (its and Rich's `escape` only escape tag-like ones, so `[1, 2` broke the
    markup around it); a final backslash would escape the tag after it, so a zero-width space
    follows it. Control characters are shown as escapes."""
    escaped = printable(text).replace("[", "\\[")
    return escaped + "\u200b" if escaped.endswith("\\") else escaped


def markup_lines(lines: Iterable[Content]) -> Content:
    """Lines made by `markup`, one below the other."""
    return Content("\n").join(lines)


def shown(*parts: str | tuple[str, str]) -> Text:
    """Stored text as a Text, as written: never markup (Rich and Textual read brackets and
    backslashes differently, so no one escape suits both), control characters shown as
    escapes. A part may be (text, style)."""
    return Text.assemble(
        *(printable(p) if isinstance(p, str) else (printable(p[0]), p[1]) for p in parts)
    )


def day(ts: float | None) -> str:
    return "never" if ts is None else time.strftime("%Y-%m-%d", time.gmtime(ts))


def stamp(ts: float | None) -> str:
    return "never" if ts is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))


def count(n: int) -> str:
    return f"{n:,}"


def kib(n: float) -> str:
    return f"{n / 1024:.1f} KB"


def compact(n: int) -> str:
    """12 → 12, 12_345 → 12.3k, 1_234_567 → 1.2M."""
    size = abs(n)
    if size >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if size >= 10_000:
        return f"{n / 1000:.1f}k"
    return f"{n:,}"


def one_line(text: str, width: int) -> str:
    """`text` on one line of at most `width` characters, control characters shown."""
    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


BARS = "▁▂▃▄▅▆▇█"


def spark(values: list[float]) -> str:
    """A one-line sparkline (▁…█, scaled to the largest value; zero or less is ▁)."""
    top = max(values, default=0.0)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[max(0, round(v / top * (len(BARS) - 1)))] for v in values)
