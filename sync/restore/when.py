"""The point in time a restore can be bounded by (`restore --at`)."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from tiermem.core.errors import InvalidInput
from tiermem.sync import hlc

__all__ = ["parse_at"]

_MAX_DEVICE: Final = "f" * 32


def parse_at(text: str) -> str:
    """A point in time as an inclusive upper bound on versions: an HLC version as is, or a
    time — Unix seconds, or ISO 8601 (``2026-11-20``, ``2026-11-20T14:30``, with or without a
    zone; without one it is local time) — as the last version of that millisecond."""
    text = text.strip()
    try:
        hlc.parse(text)
        return text
    except ValueError:
        pass
    seconds: float
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = datetime.fromisoformat(text).timestamp()
        except ValueError:
            raise InvalidInput(
                f"--at {text!r}: give a version (from `sync status`/`restore`), Unix seconds "
                "or an ISO date/time such as 2026-11-20T14:30"
            ) from None
    if seconds < 0:
        raise InvalidInput("--at must not be before 1970")
    return f"{round(seconds * 1000):018d}.999999.{_MAX_DEVICE}"
