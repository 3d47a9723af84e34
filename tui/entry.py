"""The `tiermem` command's entry point (the console script and `python -m tiermem.tui`).

It first offers the command to the resident process (`tiermem resident`), which runs it
without this process importing anything more; otherwise it loads the CLI inside its own guard,
so Ctrl-C at any moment, even while the CLI is still being imported, ends with one line and exit
code 130, never a traceback.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not `typing`'s: this module imports nothing it does not need at once
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import NoReturn

INTERRUPTED = 130
"""`tiermem.core.errors.EXIT_INTERRUPTED`, written out: this module runs before any other loads."""


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the CLI (in the resident process if one runs); every failure becomes one line on
    stderr and a documented exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    code = _in_resident(args)
    if code is None:
        code = run_here(args)
    if code == INTERRUPTED:
        _exit_interrupted()
    sys.exit(code)


def run_here(args: list[str]) -> int:
    """Run the CLI in this process and return its exit code."""
    try:
        from tiermem.tui.cli import run

        return run(args)
    except KeyboardInterrupt:  # the CLI was still loading; `run` handles it from then on
        _say_interrupted(args)
        return INTERRUPTED


def _in_resident(args: list[str]) -> int | None:
    """The exit code of `args` run by the resident process, or None to run it here."""
    try:
        from tiermem.tui.resident import client

        return client.forward(args) if client.wanted(args) else None
    except KeyboardInterrupt:  # before the command could start there
        _say_interrupted(args)
        return INTERRUPTED


def _say_interrupted(args: list[str]) -> None:
    """What `run` says of an interrupt, for one that came before `run` could."""
    if "--json" in args:
        import json

        error = {"error": "interrupted", "type": "Interrupted", "exit_code": INTERRUPTED}
        sys.stdout.write(json.dumps(error) + "\n")
    sys.stderr.write("tiermem: error: interrupted\n")


def _exit_interrupted() -> NoReturn:
    """Exit an interrupted run with its documented code, not by the signal.

    CPython was seen ending its own process with SIGINT at exit, after an interrupt that landed
    inside an `eval` (a namedtuple being built during an import) had been handled. Every
    committed write is already durable, so the exit skips the interpreter's clean-up; only the
    logs and the output streams are flushed.
    """
    import contextlib

    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(INTERRUPTED)
