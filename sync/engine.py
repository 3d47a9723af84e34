"""End-to-end encrypted sync of an agent's critical state (hot + tree) with Turso.

``SyncEngine(mem)`` sets sync up (`init`), drains the durable outbox (`push`) and reports
(`status`); `tiermem.sync.restore` brings the state back on a new device. What the server
stores is described in `tiermem.sync.state`.

**Push** is one HTTP request: a batch ``BEGIN IMMEDIATE; INSERT … ON CONFLICT DO NOTHING;
COMMIT`` of the canonical critical-state dump (`core.snapshot`), sealed with AES-256-GCM and
padded to the 8 KiB snapshot bucket. Before sending, the sealed record is saved locally as the
push *in flight*; until the server confirms it, every later attempt (after a timeout, a crash,
a kill) sends those same bytes again, so a retry after a lost response changes nothing and the
server never holds the same state twice. When the state changed meanwhile, a new version
supersedes the one in flight. A confirmed push acknowledges the outbox rows it covered in the
same local transaction that clears the push in flight.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.sync import crypto, hlc
from tiermem.sync.hrana import (
    DEFAULT_TIMEOUT,
    Args,
    HranaClient,
    HranaError,
    ResultSet,
    SqlError,
    to_base_url,
)
from tiermem.sync.retry import RetryPolicy, call_with_retry
from tiermem.sync.secrets import DEVICE_KEY, ENV_TOKEN, TOKEN, SecretStore, env_secret, open_store
from tiermem.sync.state import (
    CRITICAL_TABLE,
    EPOCH,
    INSERT_RECORD,
    INSERT_WRAP,
    REMOTE_SCHEMA,
    AlreadyInitialised,
    Inflight,
    MissingSecret,
    NotInitialised,
    Settings,
    agent_tag,
    device_rows,
    device_wrap_id,
    insert_settings,
    read_settings,
    save_secrets,
    state_digest,
    wrap_id,
)

__all__ = ["MIN_PASSPHRASE_CHARS", "InitResult", "PushResult", "SyncEngine", "SyncStatus"]

MIN_PASSPHRASE_CHARS = 12

# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class InitResult:
    url: str
    agent_id: str
    device_id: str
    epoch: int
    passphrase: bool
    secret_store: str
    token_stored: bool
    resumed: bool


@dataclass(frozen=True)
class PushResult:
    """``pushed``: a version was sent and confirmed. ``changes``: outbox rows acknowledged.
    ``requests``: HTTP requests made (1 unless retried). ``resent``: the version was the one
    already in flight (sent again byte for byte)."""

    pushed: bool
    changes: int
    requests: int
    attempts: int
    version: str | None
    bytes: int
    resent: bool
    seconds: float
    note: str


@dataclass(frozen=True)
class SyncStatus:
    initialised: bool
    status: str | None
    url: str | None
    agent_id: str
    device_id: str | None
    epoch: int | None
    pending: int
    oldest_pending_at: float | None
    inflight_version: str | None
    last_push_at: float | None
    last_push_version: str | None
    pushes: int
    last_error: str | None
    last_error_at: float | None
    retry_at: float | None
    passphrase: bool
    secret_store: str | None
    token_source: str | None


# -------------------------------------------------------------------------------- the engine


class SyncEngine:
    """Sync for one agent of an open `Memory`. Not thread-safe; one per thread or process."""

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
        self._client: HranaClient | None = None
        self._client_url = ""

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

    def _store(self, s: Settings) -> SecretStore:
        return open_store(self.mem.home.root, s.secret_ref, s.secret_store)

    def _token(self, s: Settings) -> str | None:
        if self._given:
            return self._token_given
        from_env = env_secret(ENV_TOKEN)
        if from_env is not None:
            return from_env or None
        return self._store(s).get(TOKEN)

    def use_token(self, token: str | None) -> None:
        """Use this token for this engine's calls (it is not stored)."""
        self._token_given, self._given = token, True
        self._drop_client()

    def vault_key(self, s: Settings) -> bytes:
        if self._vault_key is None:
            raw = self._store(s).get(DEVICE_KEY)
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

    # -- the remote client ------------------------------------------------------------------

    def _client_for(self, s: Settings) -> HranaClient:
        if self._client is None or self._client_url != s.url:
            self._drop_client()
            self._client = HranaClient(
                s.url, self._token(s), timeout=self._timeout, transport=self._transport
            )
            self._client_url = s.url
        return self._client

    def _drop_client(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None

    def close(self) -> None:
        self._drop_client()

    def __enter__(self) -> SyncEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(
        self, s: Settings, call: Callable[[HranaClient], list[ResultSet]], policy: RetryPolicy
    ) -> tuple[list[ResultSet], int, int]:
        """Run `call` with retries; returns (results, requests, attempts). Failures are recorded
        for `status` and raised as they are."""
        client = self._client_for(s)
        before = client.requests_sent
        attempts = 0

        def attempt() -> list[ResultSet]:
            nonlocal attempts
            attempts += 1
            return call(client)

        def on_retry(n: int, wait: float, exc: HranaError) -> None:
            self._record_error(str(exc), self.mem.now() + wait)

        try:
            results = call_with_retry(attempt, policy, on_retry)
        except HranaError as exc:
            self._record_error(str(exc), None)
            if exc.exit_code == 21:
                self._drop_client()  # a new token may be in place by the next attempt
            raise
        return results, client.requests_sent - before, attempts

    def _record_error(self, message: str, retry_at: float | None) -> None:
        with self.db.transaction():
            self.db.execute(
                "UPDATE sync_state SET last_error = ?, last_error_at = ?, retry_at = ? "
                "WHERE agent_id = ?",
                (message, self.mem.now(), retry_at, self.agent_id),
            )

    # -- init -------------------------------------------------------------------------------

    def init(
        self,
        url: str,
        token: str | None,
        recovery_key: bytes,
        *,
        passphrase: str | None = None,
        store_token: bool = True,
        kdf: crypto.KdfParameters = crypto.DEFAULT_KDF_PARAMS,
        policy: RetryPolicy | None = None,
    ) -> InitResult:
        """Create the vault: keys, wraps, remote tables, this device; then mark sync ready.

        The caller has shown the recovery key and had it confirmed. Nothing is sent before the
        local settings are saved, so an interrupted init is finished by `resume_init`. The
        current critical state is queued, so the first push sends it."""
        existing = self.settings()
        if existing is not None:
            if existing.status == "ready":
                raise AlreadyInitialised(
                    f"sync is already set up for agent {self.agent_id!r} with {existing.url}; "
                    "see `tiermem sync status`"
                )
            return self.resume_init(url, token, store_token=store_token, policy=policy)
        base = to_base_url(url)
        if passphrase is not None:
            _check_passphrase(passphrase)
        vault_key = crypto.generate_vault_key()
        device_key = crypto.generate_device_key()
        device_id = os.urandom(16)
        ref = uuid.uuid4().hex
        now = self.mem.now()
        recovery = crypto.wrap_with_recovery_key(
            vault_key,
            recovery_key,
            crypto.WrapContext(self.agent_id, EPOCH, wrap_id(self.agent_id, EPOCH, "recovery")),
        )
        wrapped_pw = None
        if passphrase is not None:
            wrapped_pw = crypto.wrap_with_passphrase(
                vault_key,
                passphrase,
                crypto.WrapContext(
                    self.agent_id, EPOCH, wrap_id(self.agent_id, EPOCH, "passphrase")
                ),
                params=kdf,
            )
        device_wrap = crypto.wrap_for_device(
            vault_key,
            device_key.public_key(),
            crypto.WrapContext(
                self.agent_id, EPOCH, wrap_id(self.agent_id, EPOCH, "device", device_id)
            ),
        )
        store, token_stored = save_secrets(
            self.mem.home.root, ref, device_key, token if store_token else None
        )
        settings = Settings(
            agent_id=self.agent_id,
            status="pending",
            url=base,
            device_id=device_id,
            epoch=EPOCH,
            secret_ref=ref,
            secret_store=store.kind,
            device_wrap=device_wrap,
            recovery_wrap=recovery,
            passphrase_wrap=wrapped_pw,
            created_at=now,
        )
        try:
            with self.db.transaction():
                insert_settings(self.db, settings)
                snapshot.enqueue(self.db, self.agent_id, "sync-init", now)
        except BaseException:
            store.delete_all()
            raise
        self._vault_key = vault_key
        self.use_token(token)
        result = self._register(settings, policy or RetryPolicy())
        return dataclasses.replace(result, token_stored=token_stored)

    def pending_init(self) -> bool:
        s = self.settings()
        return s is not None and s.status == "pending"

    def resume_init(
        self,
        url: str | None,
        token: str | None,
        *,
        store_token: bool = True,
        policy: RetryPolicy | None = None,
    ) -> InitResult:
        """Finish an interrupted `init` (same keys; optionally a new URL or token)."""
        s = self.settings()
        if s is None or s.status != "pending":
            raise NotInitialised("there is no unfinished `sync init` to resume")
        if url is not None and to_base_url(url) != s.url:
            with self.db.transaction():
                self.db.execute(
                    "UPDATE sync_state SET url = ? WHERE agent_id = ?",
                    (to_base_url(url), self.agent_id),
                )
            s = self._settings_or_fail()
        if token is not None:
            if store_token:
                self._store(s).set(TOKEN, token)
            self.use_token(token)
        result = self._register(s, policy or RetryPolicy(), resumed=True)
        return dataclasses.replace(result, token_stored=store_token and bool(token))

    def _settings_or_fail(self) -> Settings:
        s = self.settings()
        if s is None:
            raise NotInitialised(f"sync is not set up for agent {self.agent_id!r}")
        return s

    def _register(self, s: Settings, policy: RetryPolicy, resumed: bool = False) -> InitResult:
        tag = agent_tag(self.agent_id)
        device_key = self._device_key(s)
        statements: list[tuple[str, Args]] = [(sql, ()) for sql in REMOTE_SCHEMA]
        recovery_at = len(statements)
        statements.append(
            (
                INSERT_WRAP,
                (
                    wrap_id(self.agent_id, s.epoch, "recovery"),
                    tag,
                    s.epoch,
                    "recovery",
                    s.recovery_wrap,
                ),
            )
        )
        if s.passphrase_wrap is not None:
            pw_id = wrap_id(self.agent_id, s.epoch, "passphrase")
            statements.append(
                (
                    INSERT_WRAP + " ON CONFLICT DO NOTHING",
                    (pw_id, tag, s.epoch, "passphrase", s.passphrase_wrap),
                )
            )
        statements += device_rows(s, tag, crypto.device_public_bytes(device_key))
        try:
            self._send(s, lambda c: c.batch(statements), policy)
        except SqlError as exc:
            if exc.code != "SQLITE_CONSTRAINT" or exc.statement != recovery_at:
                raise
            # The recovery wrap exists: ours (an earlier attempt committed and its answer was
            # lost) or another vault's. Only our exact bytes mean "done".
            rs, _, _ = self._send(
                s,
                lambda c: [
                    c.execute(
                        "SELECT blob FROM key_wraps WHERE wrap_id = ?",
                        (wrap_id(self.agent_id, s.epoch, "recovery"),),
                    )
                ],
                policy,
            )
            if rs[0].rows != ((s.recovery_wrap,),):
                self._forget_pending(s)
                raise AlreadyInitialised(
                    f"the server already holds a vault for agent {self.agent_id!r}; bring it "
                    "here with `tiermem restore` (in an empty home), or use another agent id"
                ) from None
            # Ours: the rest of that batch committed with it (it is atomic).
        with self.db.transaction():
            self.db.execute(
                "UPDATE sync_state SET status = 'ready', registered = 1, last_error = NULL, "
                "last_error_at = NULL, retry_at = NULL WHERE agent_id = ?",
                (self.agent_id,),
            )
        return InitResult(
            url=s.url,
            agent_id=self.agent_id,
            device_id=s.device_id.hex(),
            epoch=s.epoch,
            passphrase=s.passphrase_wrap is not None,
            secret_store=s.secret_store,
            token_stored=False,
            resumed=resumed,
        )

    def abandon_init(self) -> None:
        """Forget an unfinished `init` (its keys and settings), e.g. when its recovery key could
        not be handed to anyone. A finished setup is never touched."""
        s = self.settings()
        if s is not None and s.status == "pending":
            self._forget_pending(s)

    def _forget_pending(self, s: Settings) -> None:
        """Undo a pending init that can never finish."""
        self._store(s).delete_all()
        with self.db.transaction():
            self.db.execute("DELETE FROM sync_state WHERE agent_id = ?", (self.agent_id,))
        self._vault_key = None

    def _device_key(self, s: Settings) -> X25519PrivateKey:
        raw = self._store(s).get(DEVICE_KEY)
        if raw is None:
            raise MissingSecret(
                f"this device's sync key is missing from the {s.secret_store} store"
            )
        return crypto.load_device_private_key(bytes.fromhex(raw))

    # -- push -------------------------------------------------------------------------------

    def has_work(self) -> bool:
        """Something to push: outbox rows, or a push in flight."""
        row = self.db.query_one(
            "SELECT EXISTS (SELECT 1 FROM outbox WHERE agent_id = ?) OR EXISTS ("
            "SELECT 1 FROM sync_state WHERE agent_id = ? AND inflight_version IS NOT NULL)",
            (self.agent_id, self.agent_id),
        )
        return bool(row and row[0])

    def push(self, policy: RetryPolicy | None = None) -> PushResult:
        """Push the current critical state if the outbox holds changes (one HTTP request)."""
        started = time.perf_counter()
        policy = policy or RetryPolicy()
        s = self.require_ready()
        rows = snapshot.pending(self.db, self.agent_id)
        if not rows and s.inflight is None:
            return PushResult(False, 0, 0, 0, None, 0, False, 0.0, "nothing to push")
        up_to = rows[-1][0] if rows else 0
        body = snapshot.canonical(snapshot.dump(self.mem))
        digest = state_digest(body)
        if s.inflight is not None and s.inflight.digest == digest:
            item = s.inflight
            up_to = max(up_to, item.seq)
            resent = True
        elif s.inflight is None and digest == s.last_digest:
            with self.db.transaction():
                snapshot.acknowledge(self.db, self.agent_id, up_to)
            return PushResult(
                False,
                len(rows),
                0,
                0,
                s.last_push_version,
                0,
                False,
                time.perf_counter() - started,
                "already up to date",
            )
        else:
            item = self._seal(s, body, digest, up_to)
            resent = False
        tag = agent_tag(self.agent_id)
        statements: list[tuple[str, Args]] = []
        if not s.registered:
            statements += device_rows(s, tag, crypto.device_public_bytes(self._device_key(s)))
        rid = crypto.record_id(self.vault_key(s), CRITICAL_TABLE, self.agent_id)
        statements.append((INSERT_RECORD, (rid, item.version, s.epoch, s.device_id, item.envelope)))
        _, requests, attempts = self._send(s, lambda c: c.batch(statements), policy)
        with self.db.transaction():
            covered = int(
                self.db.scalar(
                    "SELECT count(*) FROM outbox WHERE agent_id = ? AND seq <= ?",
                    (self.agent_id, up_to),
                )
            )
            snapshot.acknowledge(self.db, self.agent_id, up_to)
            self.db.execute(
                "UPDATE sync_state SET registered = 1, last_digest = ?, last_push_at = ?, "
                "last_push_version = ?, pushes = pushes + 1, last_error = NULL, "
                "last_error_at = NULL, retry_at = NULL WHERE agent_id = ?",
                (item.digest, self.mem.now(), item.version, self.agent_id),
            )
            self.db.execute(
                "UPDATE sync_state SET inflight_version = NULL, inflight_envelope = NULL, "
                "inflight_seq = NULL, inflight_digest = NULL "
                "WHERE agent_id = ? AND inflight_version = ?",
                (self.agent_id, item.version),
            )
        return PushResult(
            True,
            covered,
            requests,
            attempts,
            item.version,
            len(item.envelope),
            resent,
            time.perf_counter() - started,
            "pushed",
        )

    def _seal(self, s: Settings, body: bytes, digest: str, up_to: int) -> Inflight:
        """A new version of the critical state, saved as the push in flight before sending."""
        vault_key = self.vault_key(s)
        rid = crypto.record_id(vault_key, CRITICAL_TABLE, self.agent_id)
        with self.db.transaction():
            current = self._settings_or_fail()
            last = hlc.parse(current.hlc) if current.hlc else None
            version = str(hlc.tick(last, int(self.mem.now() * 1000), s.device_id.hex()))
            context = crypto.RecordContext(self.agent_id, CRITICAL_TABLE, rid, version, s.device_id)
            envelope = crypto.seal_record(
                vault_key, s.epoch, context, body, min_bucket=crypto.SNAPSHOT_BUCKET
            )
            self.db.execute(
                "UPDATE sync_state SET hlc = ?, inflight_version = ?, inflight_envelope = ?, "
                "inflight_seq = ?, inflight_digest = ? WHERE agent_id = ?",
                (version, version, envelope, up_to, digest, self.agent_id),
            )
        return Inflight(version, envelope, up_to, digest)

    # -- status -----------------------------------------------------------------------------

    def status(self) -> SyncStatus:
        s = self.settings()
        pending = snapshot.pending(self.db, self.agent_id)
        token_source = None
        if s is not None:
            if env_secret(ENV_TOKEN) is not None:
                token_source = "env"
            else:
                token_source = s.secret_store if self._store(s).get(TOKEN) else "none"
        return SyncStatus(
            initialised=s is not None and s.status == "ready",
            status=None if s is None else s.status,
            url=None if s is None else s.url,
            agent_id=self.agent_id,
            device_id=None if s is None else s.device_id.hex(),
            epoch=None if s is None else s.epoch,
            pending=len(pending),
            oldest_pending_at=pending[0][3] if pending else None,
            inflight_version=None if s is None or s.inflight is None else s.inflight.version,
            last_push_at=None if s is None else s.last_push_at,
            last_push_version=None if s is None else s.last_push_version,
            pushes=0 if s is None else s.pushes,
            last_error=None if s is None else s.last_error,
            last_error_at=None if s is None else s.last_error_at,
            retry_at=None if s is None else s.retry_at,
            passphrase=s is not None and s.passphrase_wrap is not None,
            secret_store=None if s is None else s.secret_store,
            token_source=token_source,
        )


def _check_passphrase(passphrase: str) -> None:
    if len(passphrase.strip()) < MIN_PASSPHRASE_CHARS:
        raise InvalidInput(
            f"the passphrase must have at least {MIN_PASSPHRASE_CHARS} characters (the server "
            "keeps its wrap and could try guesses offline: use four or more random words)"
        )
