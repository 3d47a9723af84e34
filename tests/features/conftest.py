"""The CLI as users run it: `tiermem.tui.cli.run` with a fresh home per test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem.tui.cli import run


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], home: Path) -> None:
        self.capsys, self.home = capsys, home

    def __call__(self, *args: str) -> tuple[int, str, str]:
        code = run(["--home", str(self.home), *args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str) -> Any:
        code, out, err = self("--json", *args)
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], home: Path) -> Cli:
    return Cli(capsys, home)
