"""The retrieval modules import nothing heavy or networked: the vector extra (torch,
sentence-transformers) loads only when vector retrieval is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

WATCHED = ("textual", "httpx", "click", "torch", "sentence_transformers", "numpy", "bm25s")


@pytest.mark.parametrize("module", ["retrieve", "temporal", "vectors", "treesearch", "engine"])
def test_retrieval_modules_import_lightly(module: str) -> None:
    code = (
        f"import tiermem.core.{module}, sys\n"
        f"print(','.join(m for m in {WATCHED!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
