"""tiermem.sync never imports a front end (the layering), checked in a clean interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

SYNC_MODULES = [
    "crypto",
    "daemon",
    "devices.epoch_keys",
    "devices.epochs",
    "devices.secret_store",
    "engine",
    "hlc",
    "journal",
    "kinds.critical_merge",
    "pull.receive",
    "push.background",
    "push.kick",
    "push.seal",
    "push.send",
    "restore",
    "restore.prune",
    "restore.wrapcheck",
    "session",
    "setup",
    "state",
    "vault.hrana",
    "vault.remote",
    "vault.retry",
]


@pytest.mark.parametrize("module", SYNC_MODULES)
def test_sync_imports_no_front_end(module: str) -> None:
    watched = ("textual", "tiermem.tui")  # (httpx itself imports click for its own CLI)
    code = (
        f"import tiermem.sync.{module}\nimport sys\n"
        f"print(','.join(m for m in {watched!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_crypto_does_no_io() -> None:
    code = (
        "import tiermem.sync.crypto\nimport sys\n"
        "print(','.join(m for m in ('httpx', 'keyring', 'tiermem.core.db') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
