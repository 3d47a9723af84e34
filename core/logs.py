"""The log file of a memory home: `<home>/logs/tiermem.log`, rotated at 1 MB with 3 old copies,
0600 in a 0700 folder. The daemon, sync and consolidation log there through the `tiermem` logger
(`logging.getLogger(__name__)` in each module) once a front end calls `setup_logging(home)`.

Never a secret: every record passes `RedactSecrets`, which masks the values of the secret
`TIERMEM_*` variables, values registered with `add_secret`, bearer tokens, JWTs, recovery keys
and 32-byte hex keys, in the message, the traceback and the stack.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from io import TextIOWrapper
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Final

from tiermem.core.environment import environment
from tiermem.core.errors import StorageError

LOGGER: Final = "tiermem"
LOG_DIR: Final = "logs"
LOG_FILE: Final = "tiermem.log"
MAX_BYTES: Final = 1024 * 1024
BACKUPS: Final = 3
MASK: Final = "[redacted]"
FORMAT: Final = "%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"
MIN_SECRET: Final = 8
"""Registered values shorter than this are not masked (they would mask ordinary words)."""

_SHAPES: Final = (
    re.compile(r"(?i)\bbearer\s+[^\s'\"]+"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}"),
    re.compile(r"\b(?:[0-9A-Za-z]{4}-){13}[0-9A-Za-z]{4}\b"),
    re.compile(r"\b[0-9A-Fa-f]{64}\b"),
)
_lock = threading.Lock()
_registered: set[str] = set()


def log_path(home: Path) -> Path:
    """Where the home's log is (what `tiermem logs` shows)."""
    return home / LOG_DIR / LOG_FILE


def add_secret(value: str | None) -> None:
    """Mask `value` in every later log record (a token read from the keyring, for example)."""
    if value and len(value) >= MIN_SECRET:
        with _lock:
            _registered.add(value)


def redact(text: str) -> str:
    """`text` with every known secret and every secret-shaped string masked."""
    with _lock:
        known = set(_registered)
    known.update(s for s in environment().secrets() if len(s) >= MIN_SECRET)
    for secret in sorted(known, key=len, reverse=True):
        text = text.replace(secret, MASK)
    for shape in _SHAPES:
        text = shape.sub(MASK, text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites each record's message, traceback and stack with secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # arguments that do not fit the format
            message = f"{record.msg} {record.args}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class PrivateRotatingFileHandler(RotatingFileHandler):
    """A rotating file handler whose files are created (and kept) 0600."""

    def _open(self) -> TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def setup_logging(home: Path, level: int | None = None) -> Path:
    """Send the `tiermem` logger's records at `level` and above (default: INFO, DEBUG under
    `TIERMEM_DEBUG`) to the home's log file.

    Idempotent: a second call for the same home changes nothing; a call for another home moves
    the file handler there. Returns the log file's path."""
    if level is None:
        level = logging.DEBUG if environment().debug else logging.INFO
    path = log_path(home)
    logger = logging.getLogger(LOGGER)
    for handler in list(logger.handlers):
        if isinstance(handler, PrivateRotatingFileHandler):
            if handler.baseFilename == os.path.abspath(path):
                return path
            logger.removeHandler(handler)
            handler.close()
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        handler = PrivateRotatingFileHandler(
            path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"
        )
    except OSError as exc:
        raise StorageError(f"cannot open the log file {path} ({exc.strerror})") from None
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(RedactSecrets())
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    return path
