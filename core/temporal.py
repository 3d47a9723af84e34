"""Time cues in a query ("last week", "in May", "three days ago") as date windows.

Retrieval raises memories whose creation time falls inside a window the query names; it never
filters, because people are approximate about time ("a month ago" may be five weeks). Windows are
calendar-based in the given time zone (the machine's by default) and widened by a day of slack
on both sides, so a time-zone mismatch between storing and asking cannot push a memory out.

Relative cues that need another event ("before the trip") are not windows: they are left to the
keyword match of the event's words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache

from tiermem.core.errors import InvalidInput

DAY = 86400.0
SLACK = DAY

MONTHS = {
    name: i
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
WEEKDAYS = {
    name: i
    for i, name in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "a couple of": 2,
    "couple of": 2,
    "a couple": 2,
    "three": 3,
    "a few": 3,
    "few": 3,
    "several": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}
"""Length of one unit in days, for 'N units ago' and 'the past N units'."""

_NUM = r"(?:\d{1,3}|a\s+couple\s+of|couple\s+of|a\s+couple|a\s+few|few|several|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"day|week|month|year"
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_WEEKDAY = "|".join(WEEKDAYS)
_CUES = re.compile(
    rf"""\b(?:
      (?P<ago>(?P<an>{_NUM})\s+(?P<au>{_UNIT})s?\s+ago)
    | (?P<past>(?:the\s+)?(?P<pw>past|last|previous)\s+(?:(?P<pn>{_NUM})\s+)?(?P<pu>{_UNIT})s?)
    | (?P<lastday>(?:last|this\s+past)\s+(?P<lwd>{_WEEKDAY}|weekend))
    | (?P<this>this\s+(?P<tunit>week|month|year))
    | (?P<ref>today|tonight|yesterday|recently|lately)
    | (?P<month>(?:in|during|since|of|last|this)\s+(?P<mname>{_MONTH})\b\.?(?:\s+(?P<myear>\d{{4}}))?)
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)
RECENT_DAYS = 30.0
"""What 'recently' and 'lately' mean."""


@dataclass(frozen=True)
class TimeWindow:
    """A span of dates a query's time cue names."""

    cue: str
    """The words of the query that named the window."""
    start: float
    end: float
    """Seconds since the epoch, start inclusive, end exclusive (slack included)."""

    def contains(self, when: float) -> bool:
        return self.start <= when < self.end

    def describe(self) -> str:
        first = datetime.fromtimestamp(self.start + SLACK, UTC).date()
        last = datetime.fromtimestamp(max(self.start, self.end - SLACK - 1), UTC).date()
        span = first.isoformat() if first == last else f"{first.isoformat()}..{last.isoformat()}"
        return f"{self.cue!r} → {span}"


_TRIGGERS = re.compile(
    rf"\b(?:ago|past|last|previous|this|today|tonight|yesterday|recently|lately|{_MONTH})\b",
    re.IGNORECASE,
)


def find_windows(query: str, now: float, tz: tzinfo | None = None) -> list[TimeWindow]:
    """The date windows the query names, relative to `now`."""
    if not _TRIGGERS.search(query):  # the common case, cheaply
        return []
    zone = tz or _local_zone()
    today = datetime.fromtimestamp(now, zone).date()
    windows = []
    for m in _CUES.finditer(query):
        span = _span(m, now, today, zone)
        if span is not None:
            cue = " ".join(m.group(0).split()).lower()
            windows.append(TimeWindow(cue, span[0] - SLACK, span[1] + SLACK))
    return windows


TIME_WORDS = frozenset(
    [
        "ago",
        "day",
        "days",
        "week",
        "weeks",
        "month",
        "months",
        "year",
        "years",
        "past",
        "last",
        "previous",
        "recently",
        "lately",
        "yesterday",
        "today",
        "tonight",
        "weekend",
        "this",
        "few",
        "couple",
        "several",
    ]
) | frozenset(NUMBERS)


@lru_cache(maxsize=1)
def _local_zone() -> tzinfo:
    return datetime.now().astimezone().tzinfo or UTC


def cue_words(windows: list[TimeWindow]) -> set[str]:
    """Words of the cues that only expressed time ("ago", "weeks", "last", "10"): not worth
    searching as keywords. Month and weekday names and years stay (a memory may say them)."""
    words = {w for win in windows for w in re.findall(r"[^\W_]+", win.cue)}
    return {w for w in words if w in TIME_WORDS or (w.isdigit() and len(w) < 4)}


def _span(m: re.Match[str], now: float, today: date, zone: tzinfo) -> tuple[float, float] | None:
    def at(day: date) -> float:
        return datetime(day.year, day.month, day.day, tzinfo=zone).timestamp()

    start_of_today = at(today)
    if m.group("ago"):
        n, unit = _count(m.group("an")), m.group("au").lower()
        center = now - n * UNIT_DAYS[unit] * DAY
        half = max(1.0, UNIT_DAYS[unit] / 2) * DAY
        return center - half, center + half
    if m.group("past"):
        unit = m.group("pu").lower()
        if m.group("pn"):
            return now - _count(m.group("pn")) * UNIT_DAYS[unit] * DAY, now
        if m.group("pw").lower() == "past":
            return now - UNIT_DAYS[unit] * DAY, now
        return _calendar_start(today, unit, 1, at), now  # "last week": the previous one on
    if m.group("lastday"):
        name = m.group("lwd").lower()
        if name == "weekend":
            back = (today.weekday() - 5) % 7 or 7  # the Saturday before today
            saturday = today - timedelta(days=back)
            return at(saturday), at(saturday + timedelta(days=2))
        back = (today.weekday() - WEEKDAYS[name]) % 7 or 7
        day = today - timedelta(days=back)
        return at(day), at(day + timedelta(days=1))
    if m.group("this"):
        return _calendar_start(today, m.group("tunit").lower(), 0, at), now
    if m.group("ref"):
        word = m.group("ref").lower()
        if word in ("today", "tonight"):
            return start_of_today, now
        if word == "yesterday":
            return at(today - timedelta(days=1)), start_of_today
        return now - RECENT_DAYS * DAY, now
    if m.group("month"):
        month = MONTHS[m.group("mname").lower()]
        if m.group("mname").lower() == "may" and not m.group("myear"):
            prefix = m.group("month").split()[0].lower()
            if prefix not in ("in", "during", "since"):
                return None  # "this may be", "last may" is rare; keep it unambiguous
        year = int(m.group("myear")) if m.group("myear") else today.year
        if not m.group("myear") and month > today.month:
            year -= 1  # the most recent such month
        first = date(year, month, 1)
        following = date(year + month // 12, month % 12 + 1, 1)
        if m.group("month").lower().startswith("since"):
            return at(first), now
        return at(first), at(following)
    return None


def _calendar_start(today: date, unit: str, back: int, at: Callable[[date], float]) -> float:
    """Start of the calendar day/week/month/year `back` periods before today's."""
    if unit == "day":
        return at(today - timedelta(days=back))
    if unit == "week":
        return at(today - timedelta(days=today.weekday() + 7 * back))
    if unit == "month":
        months = today.year * 12 + today.month - 1 - back
        return at(date(months // 12, months % 12 + 1, 1))
    return at(date(today.year - back, 1, 1))


def _count(word: str) -> float:
    word = " ".join(word.lower().split())
    return float(word) if word.isdigit() else float(NUMBERS[word])


def end_of(value: str, what: str) -> tuple[float, bool]:
    """(the moment an ISO date ends (UTC) or an ISO date-time is, whether it was a day) of a
    date a person typed; `what` names it in the error."""
    text = value.strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return (moment + timedelta(days=1)).timestamp(), True
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"{what} {value!r} is not an ISO date (YYYY-MM-DD) or date-time"
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp(), False


def start_of(value: str, what: str) -> float:
    """The first moment of an ISO day (UTC), or an ISO date-time: where `--since` starts."""
    moment, day = end_of(value, what)
    return moment - DAY if day else moment


def parse_day(value: str, what: str = "--as-of") -> float:
    """The end of an ISO day (UTC, its last millisecond), or an ISO date-time: the moment
    `--as-of` and `--since` name."""
    moment, day = end_of(value, what)
    return moment - 1e-3 if day else moment
