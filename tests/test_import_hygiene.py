"""Layer boundaries (ARCHITECTURE §1), checked at run time in a clean interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE_MODULES = [
    "config",
    "consolidate",
    "db",
    "engine",
    "errors",
    "hot",
    "interchange",
    "metrics",
    "migrations",
    "paths",
    "retrieve",
    "scoring",
    "tokens",
    "tree",
    "warm",
]


def imported_after(statement: str, watched: tuple[str, ...]) -> list[str]:
    code = f"{statement}\nimport sys\nprint(','.join(m for m in {watched!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_imports_no_ui_or_network(module: str) -> None:
    forbidden = ("textual", "httpx", "click", "tiermem.tui", "tiermem.sync")
    assert imported_after(f"import tiermem.core.{module}", forbidden) == []


def test_no_bare_top_level_packages(tmp_path) -> None:
    code = (
        "import importlib.util as u; print([m for m in ('core', 'sync', 'tui') if u.find_spec(m)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[]"
