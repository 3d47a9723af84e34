"""The `tiermem` command run in-process for tests, written once instead of in every module."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tiermem.tui.cli import run


def run_cli(
    capsys: pytest.CaptureFixture[str], *argv: str, stdin: str | None = None
) -> tuple[int, str, str]:
    """Run `tiermem ARGV` here, standard input from `stdin` when given: (exit code, out, err)."""
    before = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = run(list(argv))
    finally:
        sys.stdin = before
    out, err = capsys.readouterr()
    return code, out, err


def cli(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    """Run `tiermem --home HOME ARGS`: (exit code, out, err)."""
    return run_cli(capsys, "--home", str(home), *args)


def cli_json(capsys: pytest.CaptureFixture[str], home: Path, *args: str, code: int = 0) -> Any:
    """Run `tiermem --home HOME --json ARGS`, check the exit code, return the parsed output."""
    rc, out, err = cli(capsys, home, "--json", *args)
    assert rc == code, err
    return json.loads(out)


def cli_result(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, Any]:
    """Run `tiermem --home HOME --json ARGS`: the exit code and the parsed output, or on a
    failure the error text (for the test's own assertion on the code)."""
    code, out, err = cli(capsys, home, "--json", *args)
    return code, json.loads(out) if code == 0 else err


class Cli:
    """`tiermem` bound to one home and agent ("" for the home's default); remembers all it
    printed, so a test can scan the output for secrets."""

    def __init__(self, capsys: pytest.CaptureFixture[str], home: Path, agent_id: str = "") -> None:
        self.capsys = capsys
        self.home = home
        self.agent_id = agent_id
        self.printed: list[str] = []

    def __call__(
        self, *args: str, stdin: str | None = None, home: Path | None = None
    ) -> tuple[int, str, str]:
        agent = ["--agent-id", self.agent_id] if self.agent_id else []
        code, out, err = run_cli(
            self.capsys, "--home", str(home or self.home), *agent, *args, stdin=stdin
        )
        self.printed += [out, err]
        return code, out, err

    def json(self, *args: str, stdin: str | None = None, home: Path | None = None) -> Any:
        code, out, err = self("--json", *args, stdin=stdin, home=home)
        assert code == 0, err
        return json.loads(out)
