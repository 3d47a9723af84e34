"""What the real TUI writes to a real (pseudo-)terminal: a stored memory's control sequences
are shown as escapes, never sent. Pilot runs headless, with no terminal to attack, so the app
runs here as a user starts it, in a pty, and its output bytes are read."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.terminal import open_terminal, read_until
from tiermem.core.engine import Memory

TITLE = "\x1b]0;OWNEDTITLE\x07"  # would retitle the terminal window
BLINK = "\x1b[5mBLINKY\x1b[0m"  # would restyle the terminal
TEXT = f"zzmarker {TITLE} then {BLINK} after the deploy"


def _tui_output(home: Path) -> bytes:
    env = {**os.environ, "TERM": "xterm-256color", "TIERMEM_HOME": str(home)}
    proc, master = open_terminal([sys.executable, "-m", "tiermem.tui", "tui"], env)
    out = bytearray()
    try:
        assert read_until(master, out, b"zzmarker", 60), bytes(out[-2000:])  # the dashboard
        os.write(master, b"3")  # the Memories screen: its table and the detail panel
        out.clear()
        assert read_until(master, out, b"zzmarker", 30), bytes(out[-2000:])
        read_until(master, out, None, 1.0)  # the rest of the screen
        os.write(master, b"e")  # the edit form holds the text in its fields
        assert read_until(master, out, b"Edit memory", 30), bytes(out[-2000:])
        read_until(master, out, None, 1.0)
        os.write(master, b"\x1b")  # escape: cancel
        read_until(master, out, None, 1.0)
        os.write(master, b"q")
        proc.wait(timeout=30)
        read_until(master, out, None, 0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return bytes(out)


def test_a_memory_cannot_drive_the_terminal_it_is_shown_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Memory(home) as mem:
        mem.store(TEXT, "notes")
    out = _tui_output(home)
    assert TITLE.encode() not in out and b"\x1b]0;OWNEDTITLE" not in out
    assert BLINK.encode() not in out and b"\x1b[5mBLINKY" not in out
    assert out.count(b"\\x1b]0;OWNEDTITLE") >= 2  # shown as an escape: table, detail, form
