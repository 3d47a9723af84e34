"""Shared fixtures: a fake clock and real memory homes on disk, for both database drivers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tiermem.core.engine import Memory
from tiermem.core.scoring import DAY

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

START = 1_767_225_600.0  # 2026-01-01 00:00 UTC


class Clock:
    """A clock tests move by hand; the engine reads it through `Memory(clock=...)`."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["libsql", "sqlite3"])
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


MemoryFactory = Callable[..., Memory]


@pytest.fixture
def open_memory(tmp_path: Path, clock: Clock, driver: str) -> Iterator[MemoryFactory]:
    """Open `Memory` objects on one home; all are closed at the end of the test."""
    opened: list[Memory] = []

    def factory(agent_id: str = "default", **kwargs: object) -> Memory:
        mem = Memory(tmp_path / "home", agent_id, clock=clock, driver=driver, **kwargs)  # type: ignore[arg-type]
        opened.append(mem)
        return mem

    yield factory
    for mem in opened:
        mem.close()


@pytest.fixture
def mem(open_memory: MemoryFactory) -> Memory:
    return open_memory()
