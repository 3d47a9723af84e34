"""`tiermem` with no command (or `tiermem tui`) opens the TUI; `tiermem serve` serves it to a
browser, on loopback unless --lan says otherwise; the CLI never imports Textual up front."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tiermem.tui import cli
from tiermem.tui.app import TiermemApp
from tiermem.tui.cli.commands import serve


def test_importing_the_cli_does_not_import_textual() -> None:
    code = "import tiermem.tui.cli, sys; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str]]:
    calls: list[tuple[Any, str]] = []

    def fake_run(self: TiermemApp, *args: object, **kwargs: object) -> None:
        calls.append((self.home, self.agent_id))

    monkeypatch.setattr(TiermemApp, "run", fake_run)
    return calls


@pytest.mark.parametrize("args", [[], ["tui"]], ids=["no-command", "tui"])
def test_no_command_or_tui_opens_the_app(
    launched: list[tuple[Any, str]], tmp_path: Path, args: list[str], monkeypatch
) -> None:
    monkeypatch.setattr(cli, "interactive_terminal", lambda: True)
    assert cli.run(["--home", str(tmp_path), "--agent-id", "bob", "store", "--text", "x"]) == 0
    assert cli.run(["--home", str(tmp_path), "--agent-id", "bob", *args]) == 0
    assert launched == [(tmp_path, "bob")]


def test_the_first_run_opens_the_default_agent_in_a_new_home(
    launched: list[tuple[Any, str]], tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(cli, "interactive_terminal", lambda: True)
    assert cli.run(["--home", str(tmp_path / "new")]) == 0
    assert launched == [(tmp_path / "new", "default")]


def test_no_command_without_a_terminal_prints_help(
    launched: list[tuple[Any, str]], monkeypatch, capsys
) -> None:
    monkeypatch.setattr(cli, "interactive_terminal", lambda: False)
    assert cli.run([]) == 0
    assert "Usage: tiermem" in capsys.readouterr().out
    assert launched == []


def test_help_still_prints_help(launched: list[tuple[Any, str]], capsys) -> None:
    assert cli.run(["--help"]) == 0
    out = capsys.readouterr().out
    assert "Without a command, opens the terminal UI" in out and "serve" in out
    assert launched == []


class FakeServer:
    started: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, command: str, host: str, port: int, title: str, public_url: str) -> None:
        self.kwargs = {"command": command, "host": host, "port": port, "public_url": public_url}

    def serve(self) -> None:
        FakeServer.started.append(self.kwargs)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    import textual_serve.server

    FakeServer.started = []
    monkeypatch.setattr(textual_serve.server, "Server", FakeServer)
    monkeypatch.setattr(serve, "lan_address", lambda: "192.168.1.20")
    return FakeServer.started


def test_serve_listens_on_loopback_by_default(served: list[dict[str, Any]], tmp_path) -> None:
    assert cli.run(["--home", str(tmp_path), "serve", "--port", "8765"]) == 0
    [started] = served
    assert started["host"] == "127.0.0.1" and started["port"] == 8765
    assert started["public_url"] == "http://127.0.0.1:8765"
    assert started["command"].endswith(f"-m tiermem.tui --home {tmp_path} --agent-id default tui")


def test_serve_on_the_lan_needs_the_explicit_flag(served: list[dict[str, Any]], capsys) -> None:
    assert cli.run(["serve", "--host", "192.168.1.20"]) == 3
    assert "add --lan" in capsys.readouterr().err
    assert served == []
    assert cli.run(["serve", "--lan"]) == 0
    assert served[-1]["host"] == "0.0.0.0"
    assert served[-1]["public_url"] == "http://192.168.1.20:8000"
    assert cli.run(["serve", "--lan", "--host", "192.168.1.20"]) == 0
    assert served[-1]["host"] == "192.168.1.20"
    assert cli.run(["serve", "--host", "::1"]) == 0
    assert served[-1]["public_url"] == "http://[::1]:8000"
