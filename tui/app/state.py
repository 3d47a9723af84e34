"""What the TUI remembers between runs (the chosen theme), in `tui-state.json` in the home."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from tiermem.core.files import replace_text

STATE_FILE = "tui-state.json"


def load_state(home: Path) -> dict[str, Any]:
    """The saved state; empty when the file is missing or unreadable (never an error)."""
    try:
        data = json.loads((home / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_state(home: Path, **values: Any) -> None:
    """Merge `values` into the saved state (atomically; a read-only home is left alone)."""
    state = load_state(home) | values
    with contextlib.suppress(OSError):
        replace_text(home / STATE_FILE, json.dumps(state, indent=1) + "\n")
