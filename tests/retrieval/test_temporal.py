"""Time cues in queries → date windows (core/temporal.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tiermem.core.temporal import DAY, cue_words, find_windows

# Tuesday 30 May 2023, 23:00 UTC
NOW = datetime(2023, 5, 30, 23, 0, tzinfo=UTC).timestamp()


def at(year: int, month: int, day: int, hour: int = 12) -> float:
    return datetime(year, month, day, hour, tzinfo=UTC).timestamp()


def window(query: str) -> tuple[float, float]:
    [w] = find_windows(query, NOW, UTC)
    return w.start, w.end


@pytest.mark.parametrize(
    ("query", "inside", "outside"),
    [
        ("what did I buy 10 days ago?", [at(2023, 5, 20)], [at(2023, 5, 15), at(2023, 5, 25)]),
        ("a couple of days ago", [at(2023, 5, 28)], [at(2023, 5, 20)]),
        ("two weeks ago", [at(2023, 5, 16)], [at(2023, 5, 5), at(2023, 5, 27)]),
        ("a month ago", [at(2023, 4, 30)], [at(2023, 3, 20), at(2023, 5, 25)]),
        ("in the past two weeks", [at(2023, 5, 20), at(2023, 5, 30)], [at(2023, 5, 10)]),
        ("the past few months", [at(2023, 3, 15)], [at(2023, 1, 15)]),
        ("last week", [at(2023, 5, 24)], [at(2023, 5, 10)]),
        ("last month", [at(2023, 4, 10)], [at(2023, 3, 20)]),
        ("this year", [at(2023, 2, 1)], [at(2022, 12, 15)]),
        ("last Saturday", [at(2023, 5, 27)], [at(2023, 5, 24), at(2023, 5, 30)]),
        ("last weekend", [at(2023, 5, 27), at(2023, 5, 28)], [at(2023, 5, 24)]),
        ("yesterday", [at(2023, 5, 29)], [at(2023, 5, 26)]),
        ("in March", [at(2023, 3, 15)], [at(2023, 4, 15), at(2022, 3, 15)]),
        ("in December", [at(2022, 12, 15)], [at(2023, 1, 15)]),  # the most recent December
        ("in December 2021", [at(2021, 12, 15)], [at(2022, 12, 15)]),
        ("since January", [at(2023, 2, 1)], [at(2022, 12, 1)]),
        ("what have I been reading lately", [at(2023, 5, 10)], [at(2023, 3, 1)]),
    ],
)
def test_cues_name_windows(query: str, inside: list[float], outside: list[float]) -> None:
    start, end = window(query)
    for when in inside:
        assert start <= when < end, datetime.fromtimestamp(when, UTC)
    for when in outside:
        assert not start <= when < end, datetime.fromtimestamp(when, UTC)


@pytest.mark.parametrize(
    "query",
    [
        "How many hours have I spent playing games in total?",
        "This may be a silly question",  # "may" is a month only after in/during/since
        "Which book did I finish first?",
        "before the trip",  # needs another event: left to keywords
    ],
)
def test_no_cue_no_window(query: str) -> None:
    assert find_windows(query, NOW, UTC) == []


def test_windows_have_a_day_of_slack_and_describe_themselves() -> None:
    [w] = find_windows("yesterday", NOW, UTC)
    assert w.end - w.start == pytest.approx(3 * DAY)  # the day itself plus a day each side
    assert w.describe() == "'yesterday' → 2023-05-29"


def test_cue_words_keep_months_and_years() -> None:
    windows = find_windows("what did I do 3 weeks ago and in March 2023", NOW, UTC)
    assert cue_words(windows) == {"3", "weeks", "ago"}
