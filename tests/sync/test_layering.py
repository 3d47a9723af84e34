"""tiermem.sync never imports a front end (the layering), checked in a clean interpreter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

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


SYNC = Path(__file__).resolve().parents[2] / "sync"
SERVER_SQL = re.compile(
    r"\b(?:FROM|INTO|UPDATE|TABLE(?: IF NOT EXISTS)?)\s+(records|roster|key_wraps|devices|pairings)\b"
)


def server_sql(package: str) -> list[str]:
    """Each line of `sync/<package>` that names a server table in SQL: file, line, table."""
    found = []
    for path in sorted((SYNC / package).rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            found += [f"{path.relative_to(SYNC)}:{n} {m}" for m in SERVER_SQL.findall(line)]
    return found


@pytest.mark.parametrize("package", ["push", "pull", "restore", "kinds", "crypto"])
def test_push_pull_restore_write_no_server_sql(package: str) -> None:
    """They say what they want of the vault through `sync/vault/store.py`."""
    assert server_sql(package) == []


def test_records_and_roster_are_written_only_by_the_vault_interface() -> None:
    outside = [
        line
        for line in server_sql(".")
        if not line.startswith("vault/") and line.split()[-1] in ("records", "roster")
    ]
    assert outside == []


def test_the_server_schema_is_written_once() -> None:
    creates = [
        f"{path.relative_to(SYNC)}"
        for path in sorted(SYNC.rglob("*.py"))
        if "CREATE TABLE" in path.read_text()
    ]
    assert creates == ["vault/schema.py"]
