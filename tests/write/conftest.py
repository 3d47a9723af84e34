"""Write-path fixtures: transcripts on disk, the CLI on a home, a real loopback LLM server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chat_server import ChatServer, chat_server, completion

__all__ = ["FIXTURES", "ChatServer", "chat_server", "completion", "home"]

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"
