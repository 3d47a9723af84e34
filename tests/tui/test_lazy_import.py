"""Modules imported on first use: an import cut short by Ctrl-C is retried, never left half-run."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tiermem.tui.cli.lazy import lazy_import

_BODY = """
from pathlib import Path
flag = Path(__file__).with_suffix(".interrupt")
if flag.exists():
    flag.unlink()
    raise KeyboardInterrupt
def answer():
    return 42
"""


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("lazy_probe")]:
        del sys.modules[name]


def test_nothing_runs_until_first_use(module_dir: Path) -> None:
    (module_dir / "lazy_probe_a.py").write_text(_BODY)
    probe = lazy_import("lazy_probe_a")
    assert "lazy_probe_a" not in sys.modules
    assert probe.answer() == 42
    assert "lazy_probe_a" in sys.modules


def test_an_interrupted_first_use_imports_again_next_time(module_dir: Path) -> None:
    (module_dir / "lazy_probe_b.py").write_text(_BODY)
    (module_dir / "lazy_probe_b.interrupt").touch()
    probe = lazy_import("lazy_probe_b")
    with pytest.raises(KeyboardInterrupt):
        probe.answer()
    assert "lazy_probe_b" not in sys.modules  # no half-run module for other importers
    assert probe.answer() == 42
    import lazy_probe_b  # type: ignore[import-not-found]

    assert lazy_probe_b.answer() == 42


def test_a_missing_module_fails_at_first_use_with_import_error(module_dir: Path) -> None:
    probe = lazy_import("lazy_probe_missing")
    with pytest.raises(ImportError):
        probe.anything  # noqa: B018


def test_a_loaded_module_is_returned_as_itself() -> None:
    assert lazy_import("sys") is sys


def test_threads_touching_it_at_once_all_see_the_whole_module(module_dir: Path) -> None:
    """The TUI's workers may be the first to use a module, several at a time."""
    (module_dir / "lazy_probe_c.py").write_text(
        "import time\ntime.sleep(0.05)  # a slow import: the threads overlap inside it\n"
        "def answer():\n    return 42\n"
    )
    probe = lazy_import("lazy_probe_c")
    start = threading.Barrier(8)

    def use() -> int:
        start.wait()
        return int(probe.answer())

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: use(), range(8)))
    assert answers == [42] * 8
