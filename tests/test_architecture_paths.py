"""docs/ARCHITECTURE.md names files and folders; each must exist, so the page cannot drift from
the code unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATH = re.compile(
    r"`((?:core|sync|tui|ops|tests|scripts|benchmarks|packaging|docs|assets)/[\w./-]+)`"
)


def test_every_path_the_architecture_page_names_exists() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    named = sorted(set(PATH.findall(text)))
    assert len(named) > 40  # the page names the files of every main flow
    missing = [p for p in named if not (ROOT / p.rstrip("/.")).exists()]
    assert missing == []
