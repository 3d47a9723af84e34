"""`sync init` against a host nobody answers on: it says its retry budget first, tries twice and
fails with one clear line (never the long backoff of a push)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tiermem.core.errors import TransportFailure
from tiermem.sync import crypto
from tiermem.tui.cli import run


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_init_with_an_unreachable_host_fails_after_its_stated_budget(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", "not-a-real-token")
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(bytes(32)))
    sleeps: list[float] = []
    monkeypatch.setattr("time.sleep", sleeps.append)
    url = f"http://127.0.0.1:{_closed_port()}"
    code = run(["--home", str(tmp_path / "home"), "sync", "init", "--url", url])
    err = capsys.readouterr().err.splitlines()
    assert code == TransportFailure.exit_code
    assert err[0] == (
        "contacting 127.0.0.1: 2 attempts, 5 s connect timeout each, at most 2 s between them"
    )
    assert len(sleeps) == 1 and sleeps[0] <= 2.0
    assert err[-1].startswith("tiermem: error: sync init could not finish:")
    assert "tiermem sync init` again" in err[-1]
