"""The CLI imports a command's module only when that command runs: `tiermem --help` and the
everyday memory commands never load sync, the network, crypto, keyring, the TUI or MCP. Checked
in a clean interpreter running `python -m tiermem.tui`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tiermem.tui.cli import app
from tiermem.tui.cli.registry import ROOT, SYNC

HEAVY = ("tiermem.sync", "httpx", "cryptography", "textual", "mcp", "keyring")
COMMANDS = "tiermem.tui.cli.commands"
MARK = "imported modules: "
RUN_AS_MAIN = f"""
import json, runpy, sys
sys.argv = ["tiermem", *sys.argv[1:]]
try:
    runpy.run_module("tiermem.tui", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
sys.stderr.write({MARK!r} + json.dumps(sorted(sys.modules)) + "\\n")
"""


def imported_by(*args: str) -> list[str]:
    """The modules `python -m tiermem.tui ARGS` has loaded when it finishes."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_AS_MAIN, *args], capture_output=True, text=True, check=True
    )
    [line] = [x for x in done.stderr.splitlines() if x.startswith(MARK)]
    modules: list[str] = json.loads(line.removeprefix(MARK))
    return modules


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]


def command_modules(modules: list[str]) -> list[str]:
    return [m.removeprefix(COMMANDS + ".") for m in modules if m.startswith(COMMANDS + ".")]


def test_help_imports_no_command_module_and_nothing_heavy() -> None:
    modules = imported_by("--help")
    assert "tiermem.tui.cli" in modules
    assert heavy(modules) == []
    assert command_modules(modules) == []


def test_a_commands_help_imports_only_its_module() -> None:
    modules = imported_by("retrieve", "--help")
    assert heavy(modules) == []
    assert command_modules(modules) == ["memory"]


@pytest.mark.parametrize(
    "args",
    [
        ["store", "--text", "The deploy runs on Fridays", "--category", "work/deploy"],
        ["retrieve", "deploy"],
        ["hot"],
        ["hot", "--add-lesson", "Deploy only on Fridays"],
    ],
    ids=["store", "retrieve", "hot", "hot-edit"],
)
def test_memory_commands_import_nothing_heavy(tmp_path: Path, args: list[str]) -> None:
    assert heavy(imported_by("--home", str(tmp_path), *args)) == []


@pytest.mark.parametrize(
    "registry, group", [(ROOT, []), (SYNC, ["sync"])], ids=["tiermem", "tiermem sync"]
)
def test_the_registry_help_lines_are_the_commands_own(registry, group) -> None:
    for name, entry in registry.items():
        assert entry.module.startswith(COMMANDS + "."), name
        command = entry.load()
        assert command.name == name
        listed = click.Command(name, help=entry.help).get_short_help_str(10_000)
        assert listed == command.get_short_help_str(10_000), f"tiermem {' '.join(group)} {name}"


def test_the_sync_group_lists_the_sync_registry() -> None:
    ctx = click.Context(app, info_name="tiermem")
    sync = app.get_command(ctx, "sync")
    assert isinstance(sync, click.Group)
    assert sync.list_commands(click.Context(sync, parent=ctx)) == sorted(SYNC)
