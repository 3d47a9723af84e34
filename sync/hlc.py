"""Hybrid logical clocks: record versions that sort by time, never repeat, and break ties by
device.

A version is ``(wall_ms, counter, device)``: the wall clock in milliseconds, a counter for
events within the same millisecond (or while the wall clock is behind the last version seen),
and the writer's device id as the final tie-break. Its text form has fixed widths, so comparing
the text compares the clocks; it is what the ``records.version`` column stores and what the
record's associated data binds::

    000001767225600000.000000.0123456789abcdef0123456789abcdef
    └ wall_ms (18 digits) ┘└ counter ┘└ device id (32 hex) ┘
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["MAX_SKEW_MS", "Hlc", "ahead", "bounded", "parse", "tick"]

MAX_SKEW_MS: Final = 24 * 3600 * 1000
"""How far past the local wall clock a version seen elsewhere may move this device's clock:
a day covers any honest clock error, and a wrong or hostile version cannot push it further."""

_WALL_DIGITS: Final = 18
_COUNTER_DIGITS: Final = 6
_MAX_COUNTER: Final = 10**_COUNTER_DIGITS - 1
_MAX_WALL: Final = 10**_WALL_DIGITS - 1
_TEXT: Final = re.compile(r"([0-9]{18})\.([0-9]{6})\.([0-9a-f]{32})")


@dataclass(frozen=True, order=True, slots=True)
class Hlc:
    wall_ms: int
    counter: int
    device: str  # 32 lowercase hex digits (16 bytes)

    def __post_init__(self) -> None:
        if not 0 <= self.wall_ms <= _MAX_WALL or not 0 <= self.counter <= _MAX_COUNTER:
            raise ValueError(f"hybrid logical clock out of range: {self.wall_ms}, {self.counter}")
        if not re.fullmatch(r"[0-9a-f]{32}", self.device):
            raise ValueError("an HLC device id is 32 lowercase hex digits")

    def __str__(self) -> str:
        return f"{self.wall_ms:018d}.{self.counter:06d}.{self.device}"


def parse(text: str) -> Hlc:
    """The clock of a version string (ValueError if it is not one)."""
    match = _TEXT.fullmatch(text)
    if match is None:
        raise ValueError("not a tiermem version (hybrid logical clock)")
    return Hlc(int(match[1]), int(match[2]), match[3])


def bounded(seen: Hlc, now_ms: int, device: str) -> Hlc:
    """`seen` as this device's clock, no further than `MAX_SKEW_MS` past `now_ms`."""
    limit = now_ms + MAX_SKEW_MS
    if seen.wall_ms > limit:
        return Hlc(limit, 0, device)
    return Hlc(seen.wall_ms, seen.counter, device)


def ahead(clock: Hlc, now_ms: int) -> bool:
    """The clock is further ahead of the wall clock than any version may move it."""
    return clock.wall_ms > now_ms + MAX_SKEW_MS


def tick(last: Hlc | None, now_ms: int, device: str) -> Hlc:
    """The next version for `device`: after `last` (this device's last version, or the newest
    version it has seen), and at the wall clock `now_ms` when that is later."""
    if last is None or now_ms > last.wall_ms:
        return Hlc(max(now_ms, 0), 0, device)
    if last.counter < _MAX_COUNTER:
        return Hlc(last.wall_ms, last.counter + 1, device)
    return Hlc(last.wall_ms + 1, 0, device)
