"""Write-path fixtures: transcripts on disk, the CLI on a home, a real loopback LLM server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.chat_server import ChatServer, chat_server, completion
from tiermem.tui.cli import run

__all__ = ["FIXTURES", "ChatServer", "chat_server", "cli", "cli_json", "completion", "home"]

FIXTURES = Path(__file__).parent / "fixtures"


def cli(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    code = run(["--home", str(home), *args])
    out, err = capsys.readouterr()
    return code, out, err


def cli_json(capsys: pytest.CaptureFixture[str], home: Path, *args: str, code: int = 0) -> Any:
    rc, out, err = cli(capsys, home, "--json", *args)
    assert rc == code, err
    return json.loads(out)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"
