"""Stored text as a person's terminal shows it.

A memory may hold terminal control sequences (pasted from a web page, written by an agent). Put
on a terminal as they are, they move the cursor, clear the screen, retitle the window or
reorder a line. Every human view (the CLI's text output, the TUI) shows them as escapes;
`--json`, exports and the database keep the text exact.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls but tab and newline (escape sequences, carriage return, bell), DEL, and
the bidirectional marks and overrides."""


def printable(text: str) -> str:
    """`text` with each control character as its escape (ESC as `\\x1b`)."""
    return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), text)
