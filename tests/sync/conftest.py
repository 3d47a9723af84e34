"""Fixtures for the sync tests: one real sqld per session, a fault proxy per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tests.sync.faultproxy import FaultProxy
from tests.sync.sqld import INSTALL_COMMAND, SqldServer, sqld_binary
from tiermem.sync.vault.hrana import HranaClient


@pytest.fixture(scope="session")
def sqld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqldServer]:
    """A running sqld with Ed25519 JWT auth; `.url`, `.token`, `.mint(claims)`.

    A missing binary fails the test (naming the install command); set TIERMEM_SKIP_SQLD=1 to
    skip these tests explicitly instead.
    """
    binary = sqld_binary()
    if not binary.is_file():
        message = f"sqld binary not found at {binary}; install it with:\n    {INSTALL_COMMAND}"
        if os.environ.get("TIERMEM_SKIP_SQLD") == "1":
            pytest.skip(f"TIERMEM_SKIP_SQLD=1: {message}")
        pytest.fail(message + "\n(or set TIERMEM_SKIP_SQLD=1 to skip the sqld tests)")
    server = SqldServer(tmp_path_factory.mktemp("sqld"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(sqld: SqldServer) -> Iterator[HranaClient]:
    """A Turso client authenticated against the session's sqld."""
    with HranaClient(sqld.url, sqld.token, timeout=10.0) as c:
        yield c


@pytest.fixture
def fault_proxy(sqld: SqldServer) -> Iterator[FaultProxy]:
    """A pass-through proxy in front of sqld; program it with `.script(...)` or `weights`."""
    proxy = FaultProxy(sqld.url, seed=1234)
    try:
        yield proxy
    finally:
        proxy.stop()
    assert proxy.errors == [], proxy.errors


@pytest.fixture
def table_name() -> str:
    """A table name no other test uses (the sqld database is shared by the session)."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def agent_id() -> str:
    """An agent id no other test uses (vaults on the shared sqld are per agent)."""
    return f"agent-{uuid.uuid4().hex[:12]}"
