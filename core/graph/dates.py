"""Dates in a sentence, read against the date the text was written ("last weekend" in a note of
2026-10-19 is 2026-10-17), and dates a person types (`--at 2026-03`, `--since "March 3"`).

A bare day ("on October 12") takes the year that fits what the sentence says: the most recent
one for something that happened, the next one for a plan, the nearest one for an event."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

from tiermem.core.errors import InvalidInput
from tiermem.core.temporal import MONTHS as MONTHS
from tiermem.core.temporal import NUMBERS as NUMBERS

Lean = Literal["past", "future", "near"]
DAY = 86400.0
WEEKDAYS = {
    name: i
    for i, names in enumerate(
        (
            "monday mon",
            "tuesday tue tues",
            "wednesday wed",
            "thursday thu thur thurs",
            "friday fri",
            "saturday sat",
            "sunday sun",
        )
    )
    for name in names.split()
}
UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_FROM = {"since", "from", "as of", "starting", "beginning", "effective", "starting from"}
_UNTIL = {"until", "till", "til", "through", "up to", "up until"}


@dataclass(frozen=True)
class Found:
    """One date phrase of a sentence: where it is, what day it means, and how it bounds."""

    start: int
    end: int
    ts: float
    role: str
    """"from", "until" or "at" (a point: "on March 3", "last weekend")."""
    future: bool
    """The phrase itself looks ahead ("next month", "in two weeks", "tomorrow"); a calendar
    date does not ("since 2026-02" in a note of January is a fact, not a plan)."""


def midnight(day: dt.date) -> float:
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()


def to_day(ts: float) -> dt.date:
    return dt.datetime.fromtimestamp(ts, dt.UTC).date()


def iso(ts: float) -> str:
    return to_day(ts).isoformat()


def _num(word: str) -> int:
    word = " ".join(word.casefold().split())
    return int(word) if word.isdigit() else NUMBERS.get(word, 1)


@cache
def _pattern() -> re.Pattern[str]:
    """The date phrases, compiled on first use."""
    month = "|".join(sorted(MONTHS, key=len, reverse=True))
    weekday = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
    number = r"\d{1,3}|a\s+couple(?:\s+of)?|couple\s+of|a\s+few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
    prep = (
        r"(?:(?P<p>since|from|as\s+of|starting(?:\s+from)?|beginning|effective|until|till|til|"
        r"through|up\s+(?:to|until)|on|in|at|by|for|around|about|before|after)\s+)?"
    )
    ordinal = r"(?:st|nd|rd|th)?"
    return re.compile(
        rf"""\b{prep}(?:the\s+)?(?:
          (?P<iso>(?:19|20)\d\d-\d\d(?:-\d\d)?)\b
        | (?P<dmy>\d{{1,2}})[./](?P<dmm>\d{{1,2}})[./](?P<dmyy>(?:19|20)\d\d)\b
        | (?P<md_m>{month})\.?\s+(?P<md_d>\d{{1,2}}){ordinal}\b(?:,?\s+(?P<md_y>(?:19|20)\d\d))?
        | (?P<dm_d>\d{{1,2}}){ordinal}\s+(?:of\s+)?(?P<dm_m>{month})\b\.?(?:,?\s+(?P<dm_y>(?:19|20)\d\d))?
        | (?:(?P<m_mod>early|mid|late|end\s+of|beginning\s+of|the\s+end\s+of)\s+)?(?P<m_m>{month})\b\.?(?:\s+(?P<m_y>(?:19|20)\d\d))?
        | (?P<year>(?:19|20)\d\d)\b
        | (?P<ago_n>{number})\s+(?P<ago_u>day|week|month|year)s?\s+ago\b
        | (?P<in_n>{number})\s+(?P<in_u>day|week|month|year)s?\b(?P<in_later>\s+(?:from\s+now|later))?
        | (?P<rel_w>last|next|this|past|coming)\s+(?P<rel_u>week|month|year|weekend|{weekday})\b
        | (?P<word>today|tonight|yesterday|tomorrow|the\s+day\s+after\s+tomorrow)\b
        | (?P<wd>{weekday})\b
        )""",
        re.IGNORECASE | re.VERBOSE,
    )


def find(text: str, ref: float, lean: Lean = "past") -> list[Found]:
    """The date phrases of `text` read against `ref` (the text's own date)."""
    today = to_day(ref)
    out = []
    for m in _pattern().finditer(text):
        if _bare_word(m):
            continue
        hit = _read(m, today, lean)
        if hit is not None:
            ts, future = hit
            out.append(Found(m.start(), m.end(), ts, _role(m), future))
    return out


def _bare_word(m: re.Match[str]) -> bool:
    """A weekday or month name alone, in lower case or abbreviated and with no preposition: a
    word ("I sat down", "to march"), not a date."""
    word = m.group("wd") or (m.group("m_m") if not m.group("m_y") else None)
    if not word or m.group("p"):
        return False
    return word[0].islower() or len(word.rstrip(".")) <= 3


def _role(m: re.Match[str]) -> str:
    prep = " ".join((m.group("p") or "").casefold().split())
    if prep in _FROM or (prep == "for" and m.group("in_n")):
        return "from"
    if prep in _UNTIL:
        return "until"
    return "at"


def _read(m: re.Match[str], today: dt.date, lean: Lean) -> tuple[float, bool] | None:
    """The day a date phrase means, and whether it looks ahead; None for a number that is not
    a date ("in 3 steps" never gets here, "for 2 days" is a span, not a day)."""
    prep = (m.group("p") or "").casefold()
    try:
        if m.group("iso") or m.group("dmy"):
            return _absolute(m), False
        day = _calendar(m, today, lean)
        if day is not None:
            return midnight(day), False
        return _relative(m, today, prep, lean)
    except (ValueError, OverflowError):
        return None


def _absolute(m: re.Match[str]) -> float:
    if m.group("iso"):
        parts = [int(p) for p in m.group("iso").split("-")]
        return midnight(dt.date(parts[0], parts[1], parts[2] if len(parts) > 2 else 1))
    day, month, year = int(m.group("dmy")), int(m.group("dmm")), int(m.group("dmyy"))
    return midnight(dt.date(year, month, day))


def _calendar(m: re.Match[str], today: dt.date, lean: Lean) -> dt.date | None:
    """A month, a day of a month or a year, with the year the sentence's lean picks."""
    if m.group("year") and m.group("p"):
        return dt.date(int(m.group("year")), 1, 1)
    month_name = m.group("md_m") or m.group("dm_m") or m.group("m_m")
    if not month_name:
        return None
    if m.group("m_m") and month_name.casefold() == "may" and not (m.group("p") or m.group("m_y")):
        return None  # "may" the verb
    month = MONTHS[month_name.casefold().rstrip(".")]
    day_text = m.group("md_d") or m.group("dm_d")
    year_text = m.group("md_y") or m.group("dm_y") or m.group("m_y")
    day = int(day_text) if day_text else _month_day(m.group("m_mod"))
    if year_text:
        return dt.date(int(year_text), month, day)
    return _pick_year(today, month, day, lean)


def _month_day(modifier: str | None) -> int:
    mod = " ".join((modifier or "").casefold().split())
    return {"mid": 15, "late": 20, "end of": 28, "the end of": 28}.get(mod, 1)


def _pick_year(today: dt.date, month: int, day: int, lean: Lean) -> dt.date:
    candidates = [dt.date(today.year + k, month, day) for k in (-1, 0, 1)]
    if lean == "past":
        return max(c for c in candidates if c <= today + dt.timedelta(days=2))
    if lean == "future":
        return min(c for c in candidates if c >= today - dt.timedelta(days=2))
    return min(candidates, key=lambda c: abs((c - today).days))


def _relative(m: re.Match[str], today: dt.date, prep: str, lean: Lean) -> tuple[float, bool] | None:
    if m.group("ago_n"):
        days = _num(m.group("ago_n")) * UNIT_DAYS[m.group("ago_u").casefold()]
        return midnight(today - dt.timedelta(days=days)), False
    if m.group("in_n"):
        days = _num(m.group("in_n")) * UNIT_DAYS[m.group("in_u").casefold()]
        if prep in ("for", "since"):  # "for 3 years", "since 2 years": began that long ago
            return midnight(today - dt.timedelta(days=days)), False
        if prep == "in" or m.group("in_later"):
            return midnight(today + dt.timedelta(days=days)), True
        return None
    if m.group("rel_w"):
        return _named_relative(m.group("rel_w").casefold(), m.group("rel_u").casefold(), today)
    if m.group("word"):
        word = " ".join(m.group("word").casefold().split())
        shift = {"yesterday": -1, "tomorrow": 1, "the day after tomorrow": 2}.get(word, 0)
        return midnight(today + dt.timedelta(days=shift)), shift > 0
    if m.group("wd"):
        ahead = prep in ("on", "by", "until", "till") or lean != "past"
        return _weekday(today, WEEKDAYS[m.group("wd").casefold()], "coming" if ahead else "")
    return None


def _named_relative(which: str, unit: str, today: dt.date) -> tuple[float, bool]:
    """'last weekend', 'next month', 'this Friday'."""
    step = {"last": -1, "past": -1, "next": 1, "coming": 1, "this": 0}[which]
    if unit in WEEKDAYS:
        return _weekday(today, WEEKDAYS[unit], {-1: "last", 1: "next", 0: "coming"}[step])
    if unit == "weekend":
        if step < 0:  # the Saturday before today
            saturday = today - dt.timedelta(days=(today.weekday() - 5) % 7 or 7)
        else:  # the coming one (today's, on a Saturday or Sunday, for "this weekend")
            ahead = (5 - today.weekday()) % 7
            saturday = today + dt.timedelta(days=ahead or (7 if step > 0 else 0))
            if today.weekday() == 6 and step == 0:
                saturday = today - dt.timedelta(days=1)
        return midnight(saturday), saturday > today
    if unit == "week":
        monday = today - dt.timedelta(days=today.weekday()) + dt.timedelta(days=7 * step)
        return midnight(monday if step else today), step > 0
    if unit == "month":
        months = today.year * 12 + today.month - 1 + step
        first = dt.date(months // 12, months % 12 + 1, 1)
        return midnight(first if step else today), step > 0
    return midnight(dt.date(today.year + step, 1, 1) if step else today), step > 0


def _weekday(today: dt.date, weekday: int, which: str) -> tuple[float, bool]:
    """A weekday name: the coming one for a plan or "on Friday", the last one otherwise."""
    if which in ("next", "coming"):
        ahead = (weekday - today.weekday()) % 7 or 7
        if which == "next" and ahead < 2:
            ahead += 7
        return midnight(today + dt.timedelta(days=ahead)), True
    back = (today.weekday() - weekday) % 7 or 7
    return midnight(today - dt.timedelta(days=back)), False


def parse_when(text: str, now: float) -> float:
    """A date a person typed: Unix seconds, an ISO date or time, or a phrase ("March 3",
    "last week"), read against now. The end of a day is not meant: the day's start is."""
    value = text.strip()
    if not value:
        raise InvalidInput("a date is empty: use YYYY-MM-DD")
    if re.fullmatch(r"\d{9,11}(?:\.\d+)?", value):
        return float(value)
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    if parsed is not None:
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()
    found = find(value, now, "past")
    if found and found[0].start == 0 and found[0].end >= len(value.rstrip(".")):
        return found[0].ts
    raise InvalidInput(f"not a date: {text!r} (use YYYY-MM-DD, YYYY-MM or e.g. 'March 3')")
