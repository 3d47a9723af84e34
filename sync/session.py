"""`Session`: what every sync operation of one agent works with: the open `Memory`, this
device's settings and secrets (token, device key, vault key) and the vault's `Remote`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Self

import httpx
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tiermem.core import logs
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.devices.secret_store import (
    DEVICE_KEY,
    ENV_TOKEN,
    TOKEN,
    SecretStore,
    env_secret,
    open_store,
)
from tiermem.sync.state import (
    MissingSecret,
    NotInitialised,
    Settings,
    device_wrap_id,
    read_settings,
)
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT
from tiermem.sync.vault.remote import Remote, insecure_http_allowed

__all__ = ["Session"]


class Session:
    """Sync state of one agent of an open `Memory`. Not thread-safe; one per thread or process."""

    def __init__(
        self,
        mem: Memory,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.mem = mem
        self.db = mem.db
        self.agent_id = mem.agent_id
        self._timeout = timeout
        self._transport = transport
        self._token_given: str | None = None
        self._given = False
        self._vault_key: bytes | None = None
        self._remote: Remote | None = None

    # -- settings and secrets ---------------------------------------------------------------

    def settings(self) -> Settings | None:
        return read_settings(self.db, self.agent_id)

    def require_ready(self) -> Settings:
        s = self.settings()
        if s is None:
            raise NotInitialised(
                f"sync is not set up for agent {self.agent_id!r} in this home; "
                "run `tiermem sync init --url URL`"
            )
        if s.status != "ready":
            raise NotInitialised(
                "`tiermem sync init` did not finish; run it again to complete it "
                "(the recovery key shown before stays valid)"
            )
        return s

    def settings_or_fail(self) -> Settings:
        s = self.settings()
        if s is None:
            raise NotInitialised(f"sync is not set up for agent {self.agent_id!r}")
        return s

    def secret_store(self, s: Settings) -> SecretStore:
        return open_store(self.mem.home.root, s.secret_ref, s.secret_store)

    def token(self, s: Settings) -> str | None:
        """The token given to `use_token`, else $TIERMEM_SYNC_TOKEN, else the stored one."""
        if self._given:
            return self._token_given
        from_env = env_secret(ENV_TOKEN)
        token = (from_env or None) if from_env is not None else self.secret_store(s).get(TOKEN)
        logs.add_secret(token)  # whatever a log line quotes, the token is masked
        return token

    def use_token(self, token: str | None) -> None:
        """Use this token for this engine's calls (it is not stored)."""
        self._token_given, self._given = token, True
        self._drop_remote()

    def device_key(self, s: Settings) -> X25519PrivateKey:
        """This device's private X25519 key, from the secret store."""
        raw = self.secret_store(s).get(DEVICE_KEY)
        if raw is None:
            raise MissingSecret(
                f"this device's sync key is missing from the {s.secret_store} store"
            )
        try:
            return crypto.load_device_private_key(bytes.fromhex(raw))
        except ValueError:
            raise crypto.MalformedKey("the stored device key is damaged") from None

    def vault_key(self, s: Settings) -> bytes:
        if self._vault_key is None:
            raw = self.secret_store(s).get(DEVICE_KEY)
            if raw is None:
                raise MissingSecret(
                    f"this device's sync key is missing from the {s.secret_store} store; "
                    "restore into a new home with `tiermem restore` to set this device up again"
                )
            try:
                device_key = crypto.load_device_private_key(bytes.fromhex(raw))
            except ValueError:
                raise crypto.MalformedKey("the stored device key is damaged") from None
            context = crypto.WrapContext(self.agent_id, s.epoch, device_wrap_id(s))
            self._vault_key = crypto.unwrap_for_device(s.device_wrap, device_key, context)
        return self._vault_key

    def hold_vault_key(self, key: bytes | None) -> None:
        """Keep `key` as the current vault key (None: read it from the settings again)."""
        self._vault_key = key

    # -- the remote -------------------------------------------------------------------------

    def remote(self, s: Settings) -> Remote:
        """The vault's server for these settings (failures recorded in this home's journal)."""
        if self._remote is None or self._remote.url != s.url:
            self._drop_remote()
            self._remote = self.remote_at(s.url, lambda: self.token(s))
        return self._remote

    def remote_at(self, url: str, token: str | Callable[[], str | None] | None) -> Remote:
        """A new client of the server at `url` (the caller closes it): what `remote` keeps,
        and `sync init`'s look at the server before any settings exist."""
        return Remote(
            url,
            token,
            timeout=self._timeout,
            transport=self._transport,
            journal_of=self.mem,
            insecure_http=insecure_http_allowed(self.mem),
        )

    def _drop_remote(self) -> None:
        if self._remote is not None:
            self._remote.close()
        self._remote = None

    def close(self) -> None:
        self._drop_remote()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
