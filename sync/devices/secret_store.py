"""Where sync secrets live: the OS keyring when one is usable, else a 0600 file in the home.

Three secrets are kept per agent and home: the Turso auth ``token``, this device's X25519 private
key (``device-key``) and its Ed25519 roster signing key (``signing-key``). They are filed under a
random reference (``secret_ref``, kept in the local sync settings), so moving or renaming a home
does not lose them. The recovery key and the passphrase are never stored anywhere.

For scripts and CI every secret can come from the environment instead (`ENV_*`); a secret taken
from the environment is used, never copied to disk. ``TIERMEM_SECRET_STORE=keyring|file`` forces
a store (default: the keyring when one is usable, else the file).

No value ever appears in an error message or a log line: errors name the store and the secret's
kind, nothing more.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Final, Protocol

from tiermem.core.environment import (
    PASSPHRASE,
    RECOVERY_KEY,
    SECRET_STORE,
    SYNC_TOKEN,
    SYNC_URL,
    environment,
)
from tiermem.core.errors import ConfigError, InvalidInput, StorageError

__all__ = [
    "DEVICE_KEY",
    "ENV_PASSPHRASE",
    "ENV_RECOVERY_KEY",
    "ENV_STORE",
    "ENV_TOKEN",
    "ENV_URL",
    "SERVICE",
    "SIGNING_KEY",
    "TOKEN",
    "FileStore",
    "KeyringStore",
    "SecretStore",
    "env_secret",
    "keyring_usable",
    "open_store",
]

ENV_URL: Final = SYNC_URL
ENV_TOKEN: Final = SYNC_TOKEN
ENV_RECOVERY_KEY: Final = RECOVERY_KEY
ENV_PASSPHRASE: Final = PASSPHRASE
ENV_STORE: Final = SECRET_STORE

SERVICE: Final = "tiermem"
TOKEN: Final = "token"
DEVICE_KEY: Final = "device-key"
SIGNING_KEY: Final = "signing-key"
_NAMES: Final = (TOKEN, DEVICE_KEY, SIGNING_KEY)
SECRETS_DIR: Final = "secrets"


def env_secret(name: str) -> str | None:
    """The variable's value when it is set (an empty value counts: "no token"), else None."""
    return environment().get(name)


class SecretStore(Protocol):
    kind: str

    def get(self, name: str) -> str | None: ...
    def set(self, name: str, value: str) -> None: ...
    def delete_all(self) -> None: ...


def _check_name(name: str) -> None:
    if name not in _NAMES:
        raise ValueError(f"unknown secret {name!r}")


class KeyringStore:
    """The OS keyring (Secret Service, macOS Keychain, Windows Credential Locker, ...)."""

    kind = "keyring"

    def __init__(self, ref: str) -> None:
        self.ref = ref

    def _user(self, name: str) -> str:
        _check_name(name)
        return f"{self.ref}/{name}"

    def get(self, name: str) -> str | None:
        import keyring.errors  # only a keyring store loads it: a slow import the file store skips

        failure = None
        try:
            return keyring.get_password(SERVICE, self._user(name))
        except keyring.errors.KeyringError as exc:
            failure = type(exc).__name__
        raise StorageError(f"the OS keyring cannot be read ({failure}) for the sync {name}")

    def set(self, name: str, value: str) -> None:
        import keyring.errors  # only a keyring store loads it: a slow import the file store skips

        failure = None
        try:
            keyring.set_password(SERVICE, self._user(name), value)
            return
        except keyring.errors.KeyringError as exc:
            failure = type(exc).__name__
        raise StorageError(f"the OS keyring cannot store the sync {name} ({failure})")

    def delete_all(self) -> None:
        import keyring.errors  # only a keyring store loads it: a slow import the file store skips

        for name in _NAMES:
            with contextlib.suppress(keyring.errors.KeyringError):
                keyring.delete_password(SERVICE, self._user(name))


class FileStore:
    """``<home>/secrets/<ref>.json``: mode 0600 in a 0700 folder, written atomically.

    A file that others can read is refused (as ssh does), never silently used."""

    kind = "file"

    def __init__(self, home_root: Path, ref: str) -> None:
        if not ref or not ref.replace("-", "").isalnum():
            raise ValueError("a secret reference is letters, digits and dashes")
        self.folder = home_root / SECRETS_DIR
        self.path = self.folder / f"{ref}.json"

    def _read(self) -> dict[str, str]:
        try:
            mode = self.path.stat().st_mode
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise StorageError(f"cannot read {self.path} ({exc.strerror})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise StorageError(
                f"{self.path} is accessible by other users; run `chmod 600 {self.path}`"
            )
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise StorageError(f"cannot read {self.path} ({exc.strerror})") from None
        except ValueError:
            raise StorageError(f"{self.path} is damaged (not a JSON object)") from None
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise StorageError(f"{self.path} is damaged (not a JSON object of strings)")
        return data

    def get(self, name: str) -> str | None:
        _check_name(name)
        return self._read().get(name)

    def set(self, name: str, value: str) -> None:
        _check_name(name)
        data = self._read() | {name: value}
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            os.chmod(self.folder, 0o700)
            fd, tmp = tempfile.mkstemp(prefix=".secret-", dir=self.folder)  # created 0600
        except OSError as exc:
            raise StorageError(f"cannot write to {self.folder} ({exc.strerror})") from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
            _fsync_dir(self.folder)
        except OSError as exc:
            Path(tmp).unlink(missing_ok=True)
            raise StorageError(f"cannot write {self.path} ({exc.strerror})") from None

    def delete_all(self) -> None:
        self.path.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def keyring_usable() -> bool:
    """True when the keyring library found a real backend (not the 'fail' or 'null' ones)."""
    import keyring  # only choosing a store loads it: a slow import commands without sync skip

    try:
        backend = keyring.get_keyring()
        priority = float(backend.priority)
    except Exception:  # a broken backend plugin must not break sync: use the file instead
        return False
    return priority > 0


def open_store(home_root: Path, ref: str, kind: str | None = None) -> SecretStore:
    """The store named `kind` (as recorded in the sync settings), or the one to use for new
    secrets: $TIERMEM_SECRET_STORE, else the keyring when usable, else the file."""
    if kind is None:
        try:
            wanted = environment().secret_store
        except ConfigError as exc:  # a bad store choice stays a usage error (exit code 3)
            raise InvalidInput(str(exc)) from None
        kind = wanted or ("keyring" if keyring_usable() else "file")
    if kind == "keyring":
        return KeyringStore(ref)
    if kind == "file":
        return FileStore(home_root, ref)
    raise StorageError(f"unknown secret store {kind!r} in the sync settings")
