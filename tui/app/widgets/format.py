"""Formatting shared by the screens (UTC times, so what is shown never depends on the host)."""

from __future__ import annotations

import time


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
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


BARS = "▁▂▃▄▅▆▇█"


def spark(values: list[float]) -> str:
    """A one-line sparkline (▁…█, scaled to the largest value; zero or less is ▁)."""
    top = max(values, default=0.0)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[max(0, round(v / top * (len(BARS) - 1)))] for v in values)
