"""The CLI as users run it: `tiermem.tui.cli.run` with a fresh home per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clikit import Cli


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], home: Path) -> Cli:
    return Cli(capsys, home)
