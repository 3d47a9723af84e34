"""The write path's core modules import no UI or network library (httpx, click, textual)."""

from __future__ import annotations

import pytest

from tests.test_import_hygiene import imported_after

WRITE_MODULES = [
    "conversation",
    "dedup",
    "distill",
    "ingest",
    "llm",
    "memory_md",
    "metadata",
    "transcript",
    "validate",
    "watch",
]


@pytest.mark.parametrize("module", WRITE_MODULES)
def test_write_modules_stay_in_their_layer(module: str) -> None:
    forbidden = ("textual", "httpx", "click", "tiermem.tui", "tiermem.sync")
    assert imported_after(f"import tiermem.core.{module}", forbidden) == []
