"""Files replaced whole: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import os
from pathlib import Path


def replace_private(path: Path, text: str, *, durable: bool = False) -> None:
    """Replace `path` with `text` through a 0600 temporary file beside it (fsynced first when
    `durable`); the temporary file never outlives a failure."""
    import tempfile  # only a write replaces a file: reads start faster without it

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def replace_text(path: Path, text: str) -> None:
    """Replace `path` with `text` through `.NAME.tmp` beside it; the file keeps the mode the
    umask gives any file its owner writes (for files the owner reads and edits by hand)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
