"""Secret storage: the OS keyring when usable, else a private file; environment overrides."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import keyring.errors
import pytest

from tests.sync.helpers import init_engine
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, StorageError
from tiermem.sync.devices import secret_store
from tiermem.sync.devices.secret_store import DEVICE_KEY, TOKEN, FileStore, KeyringStore, open_store
from tiermem.sync.engine import SyncEngine

SENTINEL = "tok-sentinel-7f3a9c"


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A real keyring backend that keeps its passwords in a dict."""

    priority = 5

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.passwords.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError(username)


class LockedKeyring(MemoryKeyring):
    """A keyring that is there but refuses to store (a locked or broken Secret Service)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        raise keyring.errors.PasswordSetError(f"locked while storing {password}")


@pytest.fixture
def memory_keyring() -> Iterator[MemoryKeyring]:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend
    finally:
        keyring.set_keyring(previous)


def test_file_store_round_trip_is_private(tmp_path: Path) -> None:
    store = FileStore(tmp_path, "ref1")
    assert store.get(TOKEN) is None
    store.set(TOKEN, SENTINEL)
    store.set(DEVICE_KEY, "ab" * 32)
    assert store.get(TOKEN) == SENTINEL and store.get(DEVICE_KEY) == "ab" * 32
    assert store.path.stat().st_mode & 0o777 == 0o600
    assert store.folder.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in store.folder.iterdir()] == ["ref1.json"]  # no temp file left
    store.delete_all()
    assert store.get(TOKEN) is None


def test_file_store_refuses_a_readable_or_damaged_file(tmp_path: Path) -> None:
    store = FileStore(tmp_path, "ref1")
    store.set(TOKEN, SENTINEL)
    os.chmod(store.path, 0o644)
    with pytest.raises(StorageError, match="chmod 600") as info:
        store.get(TOKEN)
    assert SENTINEL not in str(info.value)
    os.chmod(store.path, 0o600)
    store.path.write_text("[1, 2")
    with pytest.raises(StorageError, match="damaged"):
        store.get(TOKEN)
    with pytest.raises(ValueError):
        FileStore(tmp_path, "../escape")
    with pytest.raises(ValueError):
        store.get("password")


def test_keyring_store_round_trip(memory_keyring: MemoryKeyring) -> None:
    store = KeyringStore("ref2")
    store.set(TOKEN, SENTINEL)
    assert store.get(TOKEN) == SENTINEL
    assert memory_keyring.passwords == {("tiermem", "ref2/token"): SENTINEL}
    store.delete_all()
    assert memory_keyring.passwords == {}


def test_store_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory_keyring: MemoryKeyring
) -> None:
    monkeypatch.delenv("TIERMEM_SECRET_STORE")
    assert secret_store.keyring_usable()
    assert open_store(tmp_path, "r").kind == "keyring"
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")
    assert open_store(tmp_path, "r").kind == "file"
    assert open_store(tmp_path, "r", "keyring").kind == "keyring"  # as recorded wins
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "vault")
    with pytest.raises(InvalidInput):
        open_store(tmp_path, "r")
    monkeypatch.delenv("TIERMEM_SECRET_STORE")
    from keyring.backends import fail

    keyring.set_keyring(fail.Keyring())  # type: ignore[no-untyped-call]
    assert not secret_store.keyring_usable()
    assert open_store(tmp_path, "r").kind == "file"


def test_init_keeps_secrets_in_the_keyring_when_there_is_one(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
    memory_keyring: MemoryKeyring,
) -> None:
    monkeypatch.delenv("TIERMEM_SECRET_STORE")
    with Memory(tmp_path / "home", agent_id) as mem:
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        assert engine.status().secret_store == "keyring"
        assert sqld.token in memory_keyring.passwords.values()
        assert not (mem.home.root / "secrets").exists()
        engine.close()
        with SyncEngine(mem) as again:  # a new process reads them back
            assert again.push().pushed


def test_a_locked_keyring_falls_back_to_the_file(
    tmp_path: Path, agent_id: str, sqld: SqldServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    previous = keyring.get_keyring()
    keyring.set_keyring(LockedKeyring())
    monkeypatch.delenv("TIERMEM_SECRET_STORE")
    try:
        with Memory(tmp_path / "home", agent_id) as mem:
            engine, _ = init_engine(mem, sqld.url, sqld.token)
            assert engine.status().secret_store == "file"
            engine.close()
    finally:
        keyring.set_keyring(previous)


def test_a_locked_keyring_error_names_no_secret() -> None:
    previous = keyring.get_keyring()
    keyring.set_keyring(LockedKeyring())
    try:
        with pytest.raises(StorageError) as info:
            KeyringStore("r").set(TOKEN, SENTINEL)
    finally:
        keyring.set_keyring(previous)
    assert SENTINEL not in str(info.value)
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_env_secret_distinguishes_unset_from_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    assert secret_store.env_secret("TIERMEM_SYNC_TOKEN") is None
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", "")
    assert secret_store.env_secret("TIERMEM_SYNC_TOKEN") == ""
