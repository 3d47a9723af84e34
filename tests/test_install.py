"""A lean install: what only one command needs is an extra, named when it is missing; the
version comes from the package metadata (pyproject is the one place it is written)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from tiermem.core.errors import MissingExtra
from tiermem.core.version import VERSION
from tiermem.tui.cli import run

PYPROJECT = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())


def test_serve_without_its_extra_names_the_extra(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "textual_serve", None)
    assert run(["--home", str(tmp_path), "serve"]) == MissingExtra.exit_code
    err = capsys.readouterr().err
    assert (
        err == 'tiermem: error: tiermem serve needs the serve extra: pip install "tiermem[serve]"\n'
    )


def test_the_browser_server_is_not_a_default_dependency() -> None:
    default = " ".join(PYPROJECT["project"]["dependencies"])
    assert "textual-serve" not in default
    assert any(
        d.startswith("textual-serve")
        for d in PYPROJECT["project"]["optional-dependencies"]["serve"]
    )
    for named in (
        "textual",
        "libsql-experimental",
        "cryptography",
        "watchdog",
        "httpx",
        "backoff",
        "mcp",
    ):
        assert f"{named}>" in default or f"{named}>=" in default, named


def test_version_comes_from_the_package_metadata(capsys) -> None:
    assert run(["--version"]) == 0
    assert version("tiermem") in capsys.readouterr().out


def test_the_project_metadata_is_complete() -> None:
    project = PYPROJECT["project"]
    for key in ("authors", "keywords", "classifiers", "urls", "readme", "license"):
        assert project.get(key), key
    assert {"Homepage", "Changelog", "Issues"} <= set(project["urls"])
    changelog = (Path(__file__).parents[1] / "CHANGELOG.md").read_text()
    assert f"## [{VERSION}]" in changelog
    assert version("tiermem") == VERSION  # the installed metadata reads it from core/version.py


def test_the_quickstart_ends_with_the_line_that_makes_tiermem_runnable(tmp_path: Path) -> None:
    script = (Path(__file__).parents[1] / "packaging" / "quickstart.sh").read_text()
    ending = script[script.index('bin="$PWD/.venv/bin"') :]
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "tiermem").write_text("#!/bin/sh\necho ran\n")
    (venv_bin / "tiermem").chmod(0o755)
    env = {"PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        ["bash", "-c", ending], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    line = done.stdout.splitlines()[-1].strip()
    assert line == f'export PATH="{venv_bin}:$PATH"'
    after = subprocess.run(
        ["bash", "-c", f"{line} && tiermem && {ending}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert after.stdout.splitlines() == ["ran", "tiermem is on your PATH: run tiermem --help"]
