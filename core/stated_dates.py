"""When a statement says its fact starts: a date in its text ("since 2025", "on October 12",
"last weekend"), read relative to when it was said; a plan's date without a year is the next
one. Frames use it for a claim's `valid_from`."""

from __future__ import annotations

import datetime as dt
import re

from tiermem.core.temporal import MONTHS, find_windows

_MONTH_NAMES = "|".join(sorted(MONTHS, key=len, reverse=True))
DATE = re.compile(
    rf"\b(?:(?P<m1>{_MONTH_NAMES})\.?\s+(?P<d1>\d{{1,2}})"
    rf"(?:st|nd|rd|th)?|(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?"
    rf"(?P<m2>{_MONTH_NAMES}))(?:,?\s+(?P<y>(?:19|20)\d\d))?\b",
    re.IGNORECASE,
)
"""A day and month, either way round, with an optional year ("Oct 21", "4 November 2026")."""
_SINCE_YEAR = re.compile(r"\bsince\s+(?P<y>(?:19|20)\d\d)\b", re.IGNORECASE)
_ISO = re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<m>\d\d)-(?P<d>\d\d)\b")


def valid_from(text: str, said_at: float, ahead: bool = False) -> float | None:
    """The date a statement says its fact starts ("since 2025", "on October 12", "last
    weekend"), relative to when it was said (`ahead`: a plan, so a date without a year is
    the next one); None when it names none."""
    said = dt.datetime.fromtimestamp(said_at, dt.UTC)
    if ahead:
        if (named := _next_date(text, said)) is not None:
            return named
        m = _COMING.search(text)  # "starting next week"
        return said_at + _COMING_DAYS[m[1].casefold()] * 86400.0 if m else None
    if m := _ISO.search(text):
        return _day(int(m["y"]), int(m["m"]), int(m["d"]))
    if m := DATE.search(text):
        month = MONTHS[(m["m1"] or m["m2"]).casefold()]
        day = int(m["d1"] or m["d2"])
        year = int(m["y"]) if m["y"] else said.year
        return _day(year, month, day)
    if m := _SINCE_YEAR.search(text):
        return _day(int(m["y"]), 1, 1)
    windows = find_windows(text, said_at, dt.UTC)
    if windows:
        return min(said_at, windows[0].start + 86400.0)
    return None


def _next_date(text: str, said: dt.datetime) -> float | None:
    """The first date on or after `said` that a plan names ("in March", "on May 2")."""
    m = DATE.search(text)
    month_only = re.search(
        rf"\b(in|by|from|early|late|mid|end of)[- ]+({_MONTH_NAMES})\b", text, re.I
    )
    if m:
        month, day = MONTHS[(m["m1"] or m["m2"]).casefold()], int(m["d1"] or m["d2"])
    elif month_only:
        month = MONTHS[month_only[2].casefold()]
        day = _PART_OF_MONTH.get(month_only[1].casefold(), 1)
    else:
        return None
    year = int(m["y"]) if m and m["y"] else said.year
    when = _day(year, month, day)
    if when is not None and when < said.timestamp() and not (m and m["y"]):
        when = _day(year + 1, month, day)
    return when


_COMING = re.compile(r"\b(tomorrow|tmrw|next week|next month|next year)\b", re.IGNORECASE)
_COMING_DAYS = {"tomorrow": 1, "tmrw": 1, "next week": 7, "next month": 30, "next year": 365}
"""How far off a plan without a date is ("two designers report to me starting next week")."""
_PART_OF_MONTH = {"mid": 15, "late": 20, "end of": 25}
"""The first day a part of a month can mean ("late September": from the 20th)."""


def _day(year: int, month: int, day: int) -> float | None:
    try:
        return dt.datetime(year, month, day, tzinfo=dt.UTC).timestamp()
    except ValueError:
        return None
