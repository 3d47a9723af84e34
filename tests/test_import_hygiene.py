"""Layer boundaries at run time: importing every module of a layer, in a clean interpreter, loads
nothing from the layers above it. The static rules are import-linter contracts in pyproject.toml
(run by `.ci/run`); this catches what static analysis cannot see (imports made by libraries)."""

from __future__ import annotations

import subprocess
import sys

import pytest

UI_AND_NETWORK = ("textual", "httpx", "click", "mcp", "keyring")
FRONT_ENDS = ("tiermem.tui", "tiermem.ops", "textual", "mcp")
LAYERS = {
    "tiermem.core": (*UI_AND_NETWORK, "tiermem.sync", "tiermem.ops", "tiermem.tui"),
    "tiermem.sync": FRONT_ENDS,
}


def loaded_after_importing_all(package: str, watched: tuple[str, ...]) -> list[str]:
    """Import every module under `package` (found, not listed) and report the watched ones."""
    code = (
        "import importlib, pkgutil, sys\n"
        f"root = importlib.import_module({package!r})\n"
        "for m in pkgutil.walk_packages(root.__path__, root.__name__ + '.'):\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except ImportError as exc:  # an optional extra that is not installed\n"
        "        if 'sentence_transformers' not in str(exc): raise\n"
        f"print(','.join(w for w in {watched!r} if w in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_a_layer_loads_nothing_from_above_it(package: str) -> None:
    assert loaded_after_importing_all(package, LAYERS[package]) == []


def test_no_bare_top_level_packages(tmp_path) -> None:
    code = (
        "import importlib.util as u; "
        "print([m for m in ('core', 'sync', 'ops', 'tui') if u.find_spec(m)])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "[]"
