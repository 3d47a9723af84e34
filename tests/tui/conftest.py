"""TUI test fixtures: a deterministic demo home (built once, copied per test), no cursor blink,
a fixed clock, and `settle`, which waits for the workers instead of sleeping."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from tests.tui.demo import NOW, FixedClock, build
from tiermem.tui.app import TiermemApp


@pytest.fixture(scope="session")
def demo_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("demo") / "home"
    build(home)
    return home


@pytest.fixture
def demo_home(demo_source: Path, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(demo_source, home)
    return home


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
    yield


def make_app(home: Path, *, watch: bool = False, agent_id: str = "default") -> TiermemApp:
    return TiermemApp(home, agent_id, clock=FixedClock(NOW), watch=watch)


async def settle(pilot: Pilot[None], rounds: int = 40) -> None:
    """Wait until no worker runs and the messages they posted are handled."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            return
