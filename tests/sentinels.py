"""Secrets the test suite hands to tiermem, and the scanner that proves none of them leaks.

One place for the suite's sync secrets: `SENTINEL_TOKEN`, `SENTINEL_PASSPHRASE` and
`SENTINEL_RECOVERY_KEY` are what tests use when any value will do. Every other secret a test
hands to the product is registered as it is handed over (tests/conftest.py wraps the places
where secrets enter: `crypto.generate_recovery_key`, the passphrase wraps, `HranaClient`'s
token), so the scanner knows every token, passphrase and recovery key of the run.

A secret may appear in exactly one documented place: the recovery key that `sync init` shows
once (on the terminal, or in the `recovery_key` field of `sync init --json`). Anything else —
stdout, stderr, logs, exception messages, `--json` output, snapshot SVGs, committed fixtures —
is a leak.
"""

from __future__ import annotations

import re
import threading

import pytest

from tiermem.sync import crypto

SENTINEL_TOKEN = "tiermem-sentinel-token-7Qx2Vd9Lm4"
SENTINEL_PASSPHRASE = "sentinel passphrase walrus-quince-4417"
SENTINEL_RECOVERY_KEY = bytes.fromhex(
    "5e1f7a0c3d9b2e48a6c1f0d7b3e95a2c4f8e1d6a0b7c3e9f2a5d8c1b4e7f0a3d"
)

LEAKS = pytest.StashKey[list[str]]()
"""Where the autouse checker (tests/conftest.py) collects the leaks it found in a test."""

MIN_LENGTH = 12
"""Shorter values ("wrong", "garbage") are test noise, not secrets; they are not scanned."""

_lock = threading.Lock()
_known: dict[str, str] = {}
_REVEALS = (
    # `sync init --json` without a terminal: the one field that carries the new key.
    re.compile(r'"recovery_key":\s*"[0-9A-Z-]{60,80}"'),
    # `sync init` on a terminal: shown once, then typed back.
    re.compile(r"RECOVERY KEY \(shown once[^\n]*\n\s*\n\s*[0-9A-Z-]{60,80}"),
)


def register(value: str | bytes | None, kind: str) -> None:
    """Remember a secret handed to tiermem (too short or too repetitive values are ignored)."""
    if value is None:
        return
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    if len(text) < MIN_LENGTH or len(set(text)) < 6:
        return
    with _lock:
        _known.setdefault(text, kind)


def register_recovery_key(key: bytes) -> None:
    text = crypto.format_recovery_key(key)
    register(text, "recovery key")
    register(text.replace("-", ""), "recovery key")
    register(key.hex(), "recovery key (hex)")


def known() -> dict[str, str]:
    with _lock:
        return dict(_known)


def leaks(text: str) -> list[str]:
    """The kinds of the secrets found in `text`, outside the documented reveal of a new key."""
    if not text:
        return []
    for reveal in _REVEALS:
        text = reveal.sub("[revealed recovery key]", text)
    return sorted({kind for secret, kind in known().items() if secret in text})


register(SENTINEL_TOKEN, "token")
register(SENTINEL_PASSPHRASE, "passphrase")
register_recovery_key(SENTINEL_RECOVERY_KEY)
