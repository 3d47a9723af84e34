"""The home's log file: created private, rotated, set up once, and never holding a secret."""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sentinels import SENTINEL_PASSPHRASE, SENTINEL_RECOVERY_KEY, SENTINEL_TOKEN
from tiermem.core import logs
from tiermem.core.consolidate import consolidate
from tiermem.core.engine import Memory
from tiermem.sync import crypto

JWT = "eyJhbGciOiJFZERTQSJ9.eyJhIjoicnciLCJpYXQiOjE3MDB9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


@pytest.fixture(autouse=True)
def _detached() -> Iterator[None]:
    """Each test starts and ends with no file handler on the `tiermem` logger."""
    logger = logging.getLogger(logs.LOGGER)
    level = logger.level
    yield
    for handler in list(logger.handlers):
        if isinstance(handler, logs.PrivateRotatingFileHandler):
            logger.removeHandler(handler)
            handler.close()
    logger.setLevel(level)


def file_handlers() -> list[logs.PrivateRotatingFileHandler]:
    handlers = logging.getLogger(logs.LOGGER).handlers
    return [h for h in handlers if isinstance(h, logs.PrivateRotatingFileHandler)]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_log_is_private_and_set_up_once(tmp_path: Path) -> None:
    path = logs.setup_logging(tmp_path / "home")
    assert path == logs.log_path(tmp_path / "home") == tmp_path / "home" / "logs" / "tiermem.log"
    assert logs.setup_logging(tmp_path / "home") == path
    assert len(file_handlers()) == 1
    logging.getLogger("tiermem.core.test").info("hello from the test")
    assert (
        "INFO tiermem.core.test" in path.read_text() and "hello from the test" in path.read_text()
    )
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
    other = logs.setup_logging(tmp_path / "other")
    assert len(file_handlers()) == 1 and file_handlers()[0].baseFilename == str(other)


def test_rotated_files_stay_private(tmp_path: Path) -> None:
    path = logs.setup_logging(tmp_path)
    file_handlers()[0].maxBytes = 300
    for n in range(40):
        logging.getLogger("tiermem.test").warning("line %d of the rotation test", n)
    rotated = sorted(path.parent.iterdir())
    assert [p.name for p in rotated] == [
        "tiermem.log",
        "tiermem.log.1",
        "tiermem.log.2",
        "tiermem.log.3",
    ]
    assert all(mode(p) == 0o600 for p in rotated)


def test_records_below_info_stay_out_unless_debugging(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TIERMEM_DEBUG", raising=False)
    path = logs.setup_logging(tmp_path / "quiet")
    logging.getLogger("tiermem.test").debug("a debug line")
    logging.getLogger("tiermem.test").info("an info line")
    text = path.read_text()
    assert "an info line" in text and "a debug line" not in text
    monkeypatch.setenv("TIERMEM_DEBUG", "1")
    path = logs.setup_logging(tmp_path / "debug")
    logging.getLogger("tiermem.test").debug("a debug line")
    assert "a debug line" in path.read_text()


def test_secrets_are_masked_in_messages_and_tracebacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", SENTINEL_TOKEN)
    monkeypatch.setenv("TIERMEM_PASSPHRASE", SENTINEL_PASSPHRASE)
    path = logs.setup_logging(tmp_path)
    recovery = crypto.format_recovery_key(SENTINEL_RECOVERY_KEY)
    registered = "a-keyring-token-only-this-test-knows"
    logs.add_secret(registered)
    log = logging.getLogger("tiermem.test")
    log.warning("token %s and passphrase %s", SENTINEL_TOKEN, SENTINEL_PASSPHRASE)
    log.warning("Authorization: Bearer abc.def-ghi and %s", JWT)
    log.warning("recovery %s hex %s", recovery, SENTINEL_RECOVERY_KEY.hex())
    log.warning("from the keyring: %s", registered)
    try:
        raise ValueError(f"refused {SENTINEL_TOKEN}")
    except ValueError:
        log.exception("a failure")
    text = path.read_text()
    for secret in (SENTINEL_TOKEN, SENTINEL_PASSPHRASE, "abc.def-ghi", JWT, recovery, registered):
        assert secret not in text
    assert SENTINEL_RECOVERY_KEY.hex() not in text
    assert text.count(logs.MASK) >= 8 and "ValueError: refused [redacted]" in text


def test_consolidation_is_logged(tmp_path: Path, driver: str) -> None:
    path = logs.setup_logging(tmp_path / "home")
    with Memory(tmp_path / "home", "default", driver=driver) as mem:
        mem.store("the staging database runs on port 5433", "technical/db", 0.5)
        consolidate(mem, "daily")
    assert "consolidation daily of agent default: 0 promoted" in path.read_text()
