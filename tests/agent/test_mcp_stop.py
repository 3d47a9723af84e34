"""`tiermem mcp` stops on the first ctrl-C or when its client closes standard input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tiermem.core.errors import EXIT_INTERRUPTED

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def _server(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tiermem.tui", "--home", str(tmp_path / "home"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )


def _initialized(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INITIALIZE) + "\n")
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    assert reply["id"] == 1 and "serverInfo" in reply["result"]


def test_closing_standard_input_ends_the_server_with_0(tmp_path: Path) -> None:
    proc = _server(tmp_path)
    _initialized(proc)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def test_one_ctrl_c_ends_the_server(tmp_path: Path) -> None:
    proc = _server(tmp_path)
    _initialized(proc)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert proc.returncode == EXIT_INTERRUPTED
    assert err.strip() == "tiermem: mcp server stopped (ctrl+c)"
