"""Rules for the shipped code: modules under 600 lines and functions under 80 (or
docs/ARCHITECTURE.md says why), and no planning labels that mean nothing to a reader."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sizes.py"


def load_sizes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sizes", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_oversized_module_or_function_is_a_listed_exception() -> None:
    sizes = load_sizes()
    assert [x for x in sizes.oversized() if x not in sizes.listed_exceptions()] == []


def test_the_check_sees_a_long_function(tmp_path: Path) -> None:
    sizes = load_sizes()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ARCHITECTURE.md").write_text("## Size limits and their exceptions\n")
    (tmp_path / "core").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "core" / "long.py").write_text(f"def long():\n{body}")
    assert sizes.oversized(tmp_path) == ["core/long.py:long"]


PLANNING_LABEL = re.compile(r"seed 00[0-9]|helper [0-9]|\b6[A-E]\b|ARCHITECTURE §", re.IGNORECASE)


def test_no_planning_labels_in_shipped_code() -> None:
    root = SCRIPT.parent.parent
    found = [
        f"{path.relative_to(root)}:{number}"
        for package in ("core", "sync", "ops", "tui")
        for path in sorted((root / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if PLANNING_LABEL.search(line)
    ]
    assert found == []
