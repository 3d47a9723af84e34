"""Reliability-suite fixtures: replayable seeds and figures reported at the end of the run.

Every random test takes its seed from the `seed` fixture: `TIERMEM_SEED=N` replays a run, and
without it each test has a fixed seed of its own (so CI is deterministic). The seed and the
figures a test measures are printed in a "reliability" section of the terminal summary, with or
without `-s`, and are part of every assertion message that can fail on them.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable

import pytest

from tests.sync.conftest import sqld  # noqa: F401 (the real libSQL server, one per session)

SEED_ENV = "TIERMEM_SEED"
_SEEDS: list[tuple[str, int]] = []
_FIGURES: list[tuple[str, str]] = []

Record = Callable[[str], None]


def env_int(name: str, default: int) -> int:
    """A bounded count from the environment (how CI and nightly runs scale a test)."""
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    raw = os.environ.get(SEED_ENV, "").strip()
    value = int(raw) if raw else zlib.crc32(request.node.name.encode()) % 1_000_000
    _SEEDS.append((request.node.nodeid, value))
    request.node.user_properties.append(("seed", value))
    print(f"seed={value} (replay with {SEED_ENV}={value})")
    return value


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Record:
    """`figures("200 kills: 0 corruptions")` — shown in the terminal summary."""

    def record(line: str) -> None:
        _FIGURES.append((request.node.nodeid, line))
        request.node.user_properties.append(("figure", line))
        print(line)

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _SEEDS and not _FIGURES:
        return
    terminalreporter.section("reliability")
    for nodeid, value in _SEEDS:
        terminalreporter.write_line(f"{nodeid}: seed={value} ({SEED_ENV}={value} replays it)")
    for nodeid, line in _FIGURES:
        terminalreporter.write_line(f"{nodeid}: {line}")
