"""Editing in the user's own editor ($VISUAL, else $EDITOR) with the TUI suspended."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from textual.app import App, SuspendNotSupported


def run_editor(app: App[Any], path: Path) -> str | None:
    """Open `path` in the editor and wait for it; None when it ran, else why nothing changed."""
    command = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not command:
        return "set $EDITOR (or $VISUAL) to edit in your own editor"
    argv = [*shlex.split(command), str(path)]
    try:
        try:
            with app.suspend():
                code = subprocess.run(argv, check=False).returncode
        except SuspendNotSupported:  # no terminal to hand over (tests, a browser session)
            code = subprocess.run(
                argv, check=False, stdin=subprocess.DEVNULL, capture_output=True
            ).returncode
    except OSError as exc:
        return f"cannot run {argv[0]}: {exc.strerror}"
    return None if code == 0 else f"{argv[0]} exited with {code}: nothing saved"
