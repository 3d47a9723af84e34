"""Commands run on a pseudo-terminal, as a person starts them, and the bytes they write to it:
what a real terminal would be sent (Pilot and pipes never show it)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Sequence


def open_terminal(
    command: Sequence[str], env: dict[str, str], rows: int = 40, cols: int = 160
) -> tuple[subprocess.Popen[bytes], int]:
    """`command` started with a `rows` x `cols` pty as its terminal; the pty's reading end."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    return proc, master


def read_until(master: int, out: bytearray, needle: bytes | None, seconds: float) -> bool:
    """Read into `out` until it holds `needle` (True), the command closes the terminal, or
    `seconds` pass. `needle=None` reads until the terminal closes."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the command closed the terminal
                chunk = b""
            if not chunk:
                return needle is not None and needle in out
            out += chunk
        if needle is not None and needle in out:
            return True
    return False
