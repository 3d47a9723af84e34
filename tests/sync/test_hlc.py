"""Hybrid logical clocks: strictly increasing, text order = clock order, device as tie-break."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem.sync import hlc

DEVICES = st.binary(min_size=16, max_size=16).map(bytes.hex)
WALL = st.integers(0, 10**17)


@settings(max_examples=100, deadline=None, database=None)
@given(nows=st.lists(WALL, min_size=1, max_size=60), device=DEVICES)
def test_ticks_strictly_increase_whatever_the_wall_clock_does(nows: list[int], device: str) -> None:
    last = None
    versions = []
    for now in nows:
        last = hlc.tick(last, now, device)
        assert last.wall_ms >= now
        versions.append(last)
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    texts = [str(v) for v in versions]
    assert texts == sorted(texts)
    assert [hlc.parse(t) for t in texts] == versions


@settings(max_examples=100, deadline=None, database=None)
@given(
    a=st.tuples(WALL, st.integers(0, 999_999), DEVICES),
    b=st.tuples(WALL, st.integers(0, 999_999), DEVICES),
)
def test_text_order_is_clock_order(a: tuple[int, int, str], b: tuple[int, int, str]) -> None:
    x, y = hlc.Hlc(*a), hlc.Hlc(*b)
    assert (str(x) < str(y)) == (x < y) and (str(x) == str(y)) == (x == y)


def test_same_time_ties_are_broken_by_device() -> None:
    one = hlc.Hlc(1000, 3, "00" * 16)
    two = hlc.Hlc(1000, 3, "ff" * 16)
    assert one < two
    after = hlc.tick(two, 900, "00" * 16)  # another device, its wall clock behind
    assert after > two and after == hlc.Hlc(1000, 4, "00" * 16)


def test_counter_overflow_moves_to_the_next_millisecond() -> None:
    full = hlc.Hlc(5, 999_999, "ab" * 16)
    assert hlc.tick(full, 5, "ab" * 16) == hlc.Hlc(6, 0, "ab" * 16)


@pytest.mark.parametrize(
    "text",
    ["", "1.2.3", "000000000000000001.000000.XYZ", "000000000000000001.000000." + "AB" * 16],
)
def test_parse_rejects_what_is_not_a_version(text: str) -> None:
    with pytest.raises(ValueError):
        hlc.parse(text)


def test_fields_are_validated() -> None:
    with pytest.raises(ValueError):
        hlc.Hlc(-1, 0, "00" * 16)
    with pytest.raises(ValueError):
        hlc.Hlc(0, 10**6, "00" * 16)
    with pytest.raises(ValueError):
        hlc.Hlc(0, 0, "not hex")
