"""`tiermem completion show|install` for bash, zsh and fish, and completion itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tiermem.core.errors import InvalidInput
from tiermem.tui.cli import run

TIERMEM = [sys.executable, "-m", "tiermem.tui"]


@pytest.fixture
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "ZDOTDIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("shell", "mark"),
    [
        ("bash", "complete -o"),
        ("zsh", "compdef"),
        ("fish", "complete --no-files --command tiermem"),
    ],
)
def test_show_prints_the_script_of_each_shell(capsys, shell: str, mark: str) -> None:
    assert run(["completion", "show", shell]) == 0
    out = capsys.readouterr().out
    assert mark in out and "_TIERMEM_COMPLETE" in out


def test_install_adds_one_source_line_however_often_it_runs(capsys, fake_home: Path) -> None:
    assert run(["completion", "install", "bash"]) == 0
    assert run(["completion", "install", "bash"]) == 0
    rc = (fake_home / ".bashrc").read_text()
    assert rc.count("# tiermem completion") == 1
    script = fake_home / ".local" / "share" / "tiermem" / "completion.bash"
    assert str(script) in rc and "_tiermem_completion" in script.read_text()
    if shutil.which("bash"):
        done = subprocess.run(
            ["bash", "-c", f". {rc.split()[2]} && complete -p tiermem"],
            capture_output=True,
            text=True,
        )
        assert "_tiermem_completion" in done.stdout, done.stderr


def test_install_appends_to_an_existing_rc_file(capsys, fake_home: Path) -> None:
    (fake_home / ".zshrc").write_text("export EDITOR=vi")
    assert run(["completion", "install", "zsh"]) == 0
    lines = (fake_home / ".zshrc").read_text().splitlines()
    assert lines[0] == "export EDITOR=vi" and lines[1].endswith("# tiermem completion")


def test_fish_gets_its_completions_file(capsys, fake_home: Path) -> None:
    assert run(["--json", "completion", "install", "fish"]) == 0
    target = fake_home / ".config" / "fish" / "completions" / "tiermem.fish"
    assert "complete --no-files --command tiermem" in target.read_text()


def test_the_shell_comes_from_shell_when_not_named(
    capsys, fake_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHELL", "/usr/bin/zsh")
    assert run(["completion", "install"]) == 0
    assert (fake_home / ".zshrc").exists()
    monkeypatch.setenv("SHELL", "/bin/tcsh")
    assert run(["completion", "show"]) == InvalidInput.exit_code
    assert "name one of bash, zsh, fish" in capsys.readouterr().err


def test_completion_completes_commands_and_import_formats(tmp_path: Path) -> None:
    def complete(words: str, cword: int) -> str:
        env = os.environ | {
            "_TIERMEM_COMPLETE": "bash_complete",
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
        }
        return subprocess.run(TIERMEM, env=env, capture_output=True, text=True).stdout

    assert "plain,store" in complete("tiermem sto", 1)
    assert "plain,chatgpt" in complete("tiermem import --from ch", 3)
