"""End-to-end encrypted sync of an agent's whole memory with Turso, both ways.

``SyncEngine(mem)`` sets sync up (`init`), pushes local changes (`push`), applies what other
devices pushed (`pull`; `sync` = pull then push), and reports (`status`, `history`);
`tiermem.sync.restore` brings everything back on a new device. What the server stores is
described in `tiermem.sync.state`, what each record holds in `tiermem.sync.records`.

**What changed** is tracked locally: the critical state (hot + tree) through the durable
outbox (`core.snapshot`), warm/cold/frozen rows through triggers on ``memories`` that mark a
row's id dirty (table ``sync_dirty``; churn on one row coalesces, a deleted row becomes a
tombstone).

**Push** seals, per request, the current critical state if the outbox holds changes and the
latest state of the next changed rows, up to `batch_bytes` (2 MiB) of envelopes, plus one
`manifest` record numbering the request (1, 2, 3, … per device), all with one HLC version.
The batch is saved locally as *in flight* before it is sent as one HTTP request (``BEGIN
IMMEDIATE; INSERT … ON CONFLICT DO NOTHING; COMMIT``); until the server confirms it, every later
attempt (after a timeout, a crash, a kill) sends those same bytes again, together with what
changed meanwhile, so a retry after a lost response changes nothing and manifests never have a
gap. A small push is one request; a 50 MB archive is one request per 2 MiB, read from the
database page by page (never all in memory). A confirmed batch acknowledges the outbox rows and
dirty marks it covered in one local transaction.

**Key epochs.** Statement 0 of every push request is `keys.epoch_guard`: the whole request
fails, and nothing commits, when the server holds a newer key epoch than the records are sealed
under (another device removed a device and rotated the key). Then the batches in flight that an
earlier attempt committed are confirmed, the others dropped (their rows pending again, the
manifest counter rewound), the new epoch adopted (`keys.refresh_epoch`; a removed device gets
`keys.DeviceRevoked`, exit 54) and everything sealed again and sent, once per push. So a device
that missed a rotation never commits data the removed device could read.

**Pull** reads the server's rows after a local cursor in pages, skips this device's own, and
applies each page in one local transaction with the cursor: memory rows converge by id (the
highest version wins; a row changed here and not yet sealed wins, since its push will carry a
later version than anything pulled), critical states go to `merge_critical` (helper 6C's
per-item merge when `tiermem.sync.merge` exists), manifests record the other devices' counters.
Applied rows are not marked dirty (no ping-pong); the table's triggers keep full-text search
current. A row that fails authentication is never applied: it is counted, logged and skipped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import httpx
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tiermem.core import snapshot
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, TiermemError
from tiermem.sync import crypto, hlc
from tiermem.sync import records as records_fmt
from tiermem.sync.hrana import (
    DEFAULT_TIMEOUT,
    Args,
    HranaClient,
    HranaError,
    ResultSet,
    SqlError,
    to_base_url,
)
from tiermem.sync.records import MANIFEST_TABLE, MEMORY_TABLE, PRUNE_TABLE, SELECT_PAGE
from tiermem.sync.retry import RetryPolicy, call_with_retry
from tiermem.sync.secrets import DEVICE_KEY, ENV_TOKEN, TOKEN, SecretStore, env_secret, open_store
from tiermem.sync.state import (
    CRITICAL_TABLE,
    EPOCH,
    INSERT_RECORD,
    INSERT_WRAP,
    REMOTE_SCHEMA,
    AlreadyInitialised,
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

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "HISTORY_KEEP",
    "MIN_PASSPHRASE_CHARS",
    "InitResult",
    "PullResult",
    "PushResult",
    "SyncEngine",
    "SyncEvent",
    "SyncStatus",
    "apply_memory",
    "mark_applied",
]

MIN_PASSPHRASE_CHARS = 12
DEFAULT_BATCH_BYTES: Final = 2 * 1024 * 1024
"""Sealed bytes per push request: below it a push is one request, above it one per cap."""
HISTORY_KEEP: Final = 1000
_DIRTY_PAGE: Final = 500
_MEMORY_COLUMNS: Final = (
    "m.id, m.text, m.category, m.importance, m.created_at, m.access_count, m.last_access, "
    "m.tier, m.tier_changed_at, m.urls, m.commands, m.paths, m.source, m.size_bytes, m.tokens, "
    "m.pinned"
)

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
    memories: int = 0
    records: int = 0


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
    pending_memories: int = 0
    inflight_batches: int = 0
    last_pull_at: float | None = None
    pulls: int = 0
    pull_cursor: int = 0
    manifest_n: int = 0


@dataclass(frozen=True)
class PullResult:
    """``applied``: remote records that changed local state (``memories`` + ``critical``);
    ``skipped``: older than what is here (or changed here and not pushed yet);
    ``rejected``: rows that failed authentication or decoding (never applied; `sync check`).
    ``conflicts``: conflict records the critical-state merge kept."""

    applied: int
    memories: int
    critical: int
    conflicts: int
    skipped: int
    rejected: int
    pages: int
    requests: int
    bytes: int
    seconds: float
    note: str


@dataclass(frozen=True)
class SyncEvent:
    """One line of `history`: kind is 'push', 'pull' or 'error'."""

    at: float
    kind: str
    version: str | None
    records: int
    bytes: int
    note: str


_Row = tuple[str, str, bytes, str, int, int, bytes]  # table, key, rid, version, epoch, pos, env


@dataclass(frozen=True)
class _Batch:
    """One sealed push request (saved in `sync_batches` / `sync_outgoing` until confirmed)."""

    n: int
    version: str
    dirty_up_to: int
    outbox_up_to: int
    digest: str | None  # of the critical state it carries, if any
    rows: list[_Row]


@dataclass(frozen=True)
class _Progress:
    pull_cursor: int
    manifest_n: int
    critical_version: str
    last_pull_at: float | None
    last_pull_records: int
    pulls: int


@dataclass
class _PullTotals:
    applied: int = 0
    memories: int = 0
    critical: int = 0
    conflicts: int = 0
    skipped: int = 0
    rejected: int = 0
    pages: int = 0
    requests: int = 0
    bytes: int = 0
    newest: str | None = None


# -------------------------------------------------------------------------------- the engine


class SyncEngine:
    """Sync for one agent of an open `Memory`. Not thread-safe; one per thread or process."""

    def __init__(
        self,
        mem: Memory,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        if batch_bytes < 1:
            raise ValueError("batch_bytes must be positive")
        self.mem = mem
        self.batch_bytes = batch_bytes
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
            self._log("error", None, 0, 0, str(exc))
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
        from tiermem.sync.devices import own_entry_statements  # 6B (it imports this module)

        statements += own_entry_statements(self, s)  # name, MAC vouching for the entry
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

    # -- keys -------------------------------------------------------------------------------

    def id_key(self, s: Settings | None = None) -> bytes:
        """The key record ids are derived with (stable across epochs): `keys.id_key` (6B)."""
        keys = _optional("tiermem.sync.keys")
        if keys is not None and hasattr(keys, "id_key"):
            return bytes(keys.id_key(self))
        return self.vault_key(s or self.require_ready())

    def epoch_key(self, epoch: int, s: Settings | None = None) -> bytes:
        """The vault key of `epoch` (to open records sealed under it): `keys.epoch_key` (6B)."""
        keys = _optional("tiermem.sync.keys")
        if keys is not None and hasattr(keys, "epoch_key"):
            return bytes(keys.epoch_key(self, epoch))
        s = s or self.require_ready()
        if epoch != s.epoch:
            raise crypto.WrongKey(f"this device holds no key for epoch {epoch}")
        return self.vault_key(s)

    # -- push -------------------------------------------------------------------------------

    def has_work(self) -> bool:
        """Something to push: outbox rows, changed memories, or a push in flight."""
        row = self.db.query_one(
            "SELECT EXISTS (SELECT 1 FROM outbox WHERE agent_id = ?) OR EXISTS ("
            "SELECT 1 FROM sync_dirty WHERE agent_id = ?) OR EXISTS ("
            "SELECT 1 FROM sync_batches WHERE agent_id = ?) OR EXISTS ("
            "SELECT 1 FROM sync_state WHERE agent_id = ? AND inflight_version IS NOT NULL)",
            (self.agent_id, self.agent_id, self.agent_id, self.agent_id),
        )
        return bool(row and row[0])

    def push(self, policy: RetryPolicy | None = None) -> PushResult:
        """Push what changed: the critical state if the outbox holds changes, and the latest
        state of every changed memory row (tombstones for deleted ones).

        One request (an atomic batch with its manifest) while the sealed records stay under
        `batch_bytes`, then one more per `batch_bytes`. Sealed batches are saved before they
        are sent and resent byte for byte until confirmed, so a retry changes nothing."""
        started = time.perf_counter()
        policy = policy or RetryPolicy()
        s = self.require_ready()
        self._ensure_progress()
        requests = attempts = records = sent_bytes = changes = memories = 0
        resent = resealed = False
        version: str | None = None
        note = "nothing to push"
        while True:
            batches = self._inflight_batches()
            resent = resent or bool(batches)
            size = sum(len(r[6]) for b in batches for r in b.rows)
            if size < self.batch_bytes:
                fresh = self._seal_batch(s, self.batch_bytes - size)
                if fresh is not None:
                    batches.append(fresh)
            if not batches:
                break
            s = self._settings_or_fail()
            # Statement 0: the epoch guard (6B). It fails the whole atomic batch when the server
            # holds a newer key epoch than the oldest one these records are sealed under, so a
            # device that missed a rotation never commits data the removed device could read.
            oldest_epoch = min(r[4] for b in batches for r in b.rows)
            statements: list[tuple[str, Args]] = [_epoch_guard(self.agent_id, oldest_epoch)]
            if not s.registered:
                statements += device_rows(
                    s, agent_tag(self.agent_id), crypto.device_public_bytes(self._device_key(s))
                )
                from tiermem.sync.devices import own_entry_statements  # 6B

                statements += own_entry_statements(self, s)  # name, MAC vouching for the entry
            tag = agent_tag(self.agent_id)
            for b in batches:
                for _, _, rid, v, epoch, _, envelope in b.rows:
                    statements.append((INSERT_RECORD, (tag, rid, v, epoch, s.device_id, envelope)))
            client = self._client_for(s)
            before = client.requests_sent
            try:
                _, req, att = self._send(
                    s, functools.partial(_guarded_batch, statements=statements), policy
                )
            except _StaleEpoch:
                # Nothing of this request committed. Batches an earlier attempt committed (its
                # answer lost) are confirmed; the rest are dropped, to be sealed again under
                # the newest epoch, which is adopted first (once per push).
                committed, covered = self._settle_stale(s, batches, policy)
                changes += covered
                for b in committed:
                    records += len(b.rows)
                    sent_bytes += sum(len(r[6]) for r in b.rows)
                    memories += sum(1 for r in b.rows if r[0] == MEMORY_TABLE)
                    version = max(version or b.version, b.version)
                    note = "pushed"
                if resealed:
                    raise self._rotated_again() from None
                resealed = True
                self._adopt_epoch()
                requests += client.requests_sent - before
                attempts += 1
                s = self._settings_or_fail()
                continue
            requests, attempts = requests + req, attempts + att
            changes += self._acknowledge(batches)
            for b in batches:
                records += len(b.rows)
                sent_bytes += sum(len(r[6]) for r in b.rows)
                memories += sum(1 for r in b.rows if r[0] == MEMORY_TABLE)
                version = max(version or b.version, b.version)
            note = "pushed"
        quiet = self._acknowledge_unchanged()
        changes += quiet
        if requests == 0:
            s = self._settings_or_fail()
            if quiet:
                note = "already up to date"
            return PushResult(
                False,
                changes,
                0,
                0,
                s.last_push_version if changes else None,
                0,
                False,
                time.perf_counter() - started,
                note,
            )
        if resealed:
            note += f" (key epoch {self._settings_or_fail().epoch} adopted: sealed again)"
        self._log("push", version, records, sent_bytes, f"{memories} memory records")
        return PushResult(
            version is not None,
            changes,
            requests,
            attempts,
            version,
            sent_bytes,
            resent,
            time.perf_counter() - started,
            note,
            memories=memories,
            records=records,
        )

    def _ensure_progress(self) -> None:
        if self.db.query_one("SELECT 1 FROM sync_progress WHERE agent_id = ?", (self.agent_id,)):
            return
        with self.db.transaction():
            self.db.execute(
                "INSERT OR IGNORE INTO sync_progress (agent_id) VALUES (?)", (self.agent_id,)
            )

    def _progress(self) -> _Progress:
        self._ensure_progress()
        row = self.db.query_one(
            "SELECT pull_cursor, manifest_n, critical_version, last_pull_at, last_pull_records, "
            "pulls FROM sync_progress WHERE agent_id = ?",
            (self.agent_id,),
        )
        assert row is not None
        return _Progress(
            int(row[0]),
            int(row[1]),
            str(row[2]),
            None if row[3] is None else float(row[3]),
            int(row[4]),
            int(row[5]),
        )

    def _inflight_batches(self) -> list[_Batch]:
        metas = self.db.query(
            "SELECT n, version, dirty_up_to, outbox_up_to, digest FROM sync_batches "
            "WHERE agent_id = ? ORDER BY n",
            (self.agent_id,),
        )
        out = []
        for n, version, dirty_up_to, outbox_up_to, digest in metas:
            rows = self.db.query(
                "SELECT tbl, key, record_id, version, epoch, pos, envelope FROM sync_outgoing "
                "WHERE agent_id = ? AND n = ? ORDER BY pos",
                (self.agent_id, n),
            )
            out.append(
                _Batch(
                    int(n),
                    str(version),
                    int(dirty_up_to),
                    int(outbox_up_to),
                    None if digest is None else str(digest),
                    [
                        (
                            str(r[0]),
                            str(r[1]),
                            bytes(r[2]),
                            str(r[3]),
                            int(r[4]),
                            int(r[5]),
                            bytes(r[6]),
                        )
                        for r in rows
                    ],
                )
            )
        return out

    def _critical_candidate(self, s: Settings, outbox_after: int) -> tuple[int, bytes, str] | None:
        """(outbox up_to, body, digest) when the outbox holds changes after `outbox_after`."""
        up_to = self.db.scalar(
            "SELECT MAX(seq) FROM outbox WHERE agent_id = ? AND seq > ?",
            (self.agent_id, outbox_after),
        )
        if up_to is None:
            return None
        body = records_fmt.encode_critical(self._critical_document(s))
        return int(up_to), body, state_digest(body)

    def _seal_marks(self) -> tuple[int, int, str, int, int]:
        """What a sealed batch builds on: (dirty and outbox marks of the batches in flight,
        the last HLC issued, the manifest counter, the epoch)."""
        row = self.db.query_one(
            "SELECT (SELECT COALESCE(MAX(dirty_up_to), 0) FROM sync_batches WHERE agent_id = ?), "
            "(SELECT COALESCE(MAX(outbox_up_to), 0) FROM sync_batches WHERE agent_id = ?), "
            "(SELECT hlc FROM sync_state WHERE agent_id = ?), "
            "(SELECT manifest_n FROM sync_progress WHERE agent_id = ?), "
            "(SELECT epoch FROM sync_state WHERE agent_id = ?)",
            (self.agent_id,) * 5,
        )
        assert row is not None
        return int(row[0]), int(row[1]), str(row[2] or ""), int(row[3] or 0), int(row[4])

    def _seal_batch(self, s: Settings, budget: int) -> _Batch | None:
        """Seal the next push request (critical state + changed memory rows + its manifest)
        and save it as in flight; None when there is nothing new to send. Changes covered by
        batches still in flight are not sealed again.

        The reading and sealing happen outside any write transaction (a long one would stall
        every other writer of the home); the short transaction that saves the batch first
        checks that nothing it built on moved meanwhile (another push, a pull), else it seals
        again."""
        while True:
            marks = self._seal_marks()
            batch = self._seal_rows(s, budget, marks)
            if batch is None:
                return None
            with self.db.transaction():
                if self._seal_marks() != marks:
                    continue
                self._save_batch(batch)
            return batch

    def _seal_rows(
        self, s: Settings, budget: int, marks: tuple[int, int, str, int, int]
    ) -> _Batch | None:
        dirty_after, outbox_after, last_hlc, manifest_n, epoch = marks
        current = self._settings_or_fail()
        last_sealed_digest = self.db.scalar(
            "SELECT digest FROM sync_batches WHERE agent_id = ? AND digest IS NOT NULL "
            "ORDER BY n DESC LIMIT 1",
            (self.agent_id,),
        )
        critical = self._critical_candidate(current, outbox_after)
        if critical is not None and critical[2] == (last_sealed_digest or current.last_digest):
            critical = None  # the same state is on the server or on its way
        last = hlc.parse(last_hlc) if last_hlc else None
        version = str(hlc.tick(last, int(self.mem.now() * 1000), s.device_id.hex()))
        key = self.epoch_key(epoch, current)
        id_key = self.id_key(current)
        rows: list[_Row] = []
        used = 0
        digest: str | None = None
        outbox_up_to = outbox_after
        if critical is not None:
            outbox_up_to, body, digest = critical
            rid = records_fmt.record_id(id_key, CRITICAL_TABLE, self.agent_id)
            env = records_fmt.seal(
                key, epoch, self.agent_id, CRITICAL_TABLE, rid, version, s.device_id, body
            )
            rows.append((CRITICAL_TABLE, self.agent_id, rid, version, epoch, 0, env))
            used += len(env)
        dirty_up_to = dirty_after
        full = False
        while not full:
            page = self.db.query(
                f"SELECT d.seq, d.id, {_MEMORY_COLUMNS} FROM sync_dirty d "
                "LEFT JOIN memories m ON m.agent_id = d.agent_id AND m.id = d.id "
                "WHERE d.agent_id = ? AND d.seq > ? ORDER BY d.seq LIMIT ?",
                (self.agent_id, dirty_up_to, _DIRTY_PAGE),
            )
            if not page:
                break
            for r in page:
                item = _memory_item(r)
                rid = records_fmt.record_id(id_key, MEMORY_TABLE, item.id)
                env = records_fmt.seal(
                    key,
                    epoch,
                    self.agent_id,
                    MEMORY_TABLE,
                    rid,
                    version,
                    s.device_id,
                    records_fmt.encode_memory(item),
                )
                if rows and used + len(env) > budget:
                    full = True
                    break
                rows.append((MEMORY_TABLE, item.id, rid, version, epoch, len(rows), env))
                used += len(env)
                dirty_up_to = int(r[0])
            if len(page) < _DIRTY_PAGE:
                break
        if not rows:
            return None
        n = manifest_n + 1
        device_hex = s.device_id.hex()
        manifest = records_fmt.Manifest(
            device_hex,
            n,
            tuple(
                records_fmt.ManifestEntry(t, rid.hex(), v, records_fmt.envelope_digest(env))
                for t, _, rid, v, _, _, env in rows
            ),
        )
        mrid = records_fmt.record_id(id_key, MANIFEST_TABLE, device_hex)
        menv = records_fmt.seal(
            key,
            epoch,
            self.agent_id,
            MANIFEST_TABLE,
            mrid,
            version,
            s.device_id,
            records_fmt.encode_manifest(manifest),
        )
        rows.append((MANIFEST_TABLE, device_hex, mrid, version, epoch, len(rows), menv))
        return _Batch(
            n,
            version,
            dirty_up_to,
            outbox_up_to,
            digest,
            [(t, k, rid, v, e, pos, env) for pos, (t, k, rid, v, e, _, env) in enumerate(rows)],
        )

    def _save_batch(self, b: _Batch) -> None:
        """Save a sealed batch as in flight (inside the caller's transaction)."""
        self.db.executemany(
            "INSERT INTO sync_outgoing (agent_id, n, pos, tbl, key, record_id, version, "
            "epoch, envelope) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (self.agent_id, b.n, pos, t, k, rid, v, e, env)
                for t, k, rid, v, e, pos, env in b.rows
            ],
        )
        self.db.execute(
            "INSERT INTO sync_batches (agent_id, n, version, dirty_up_to, outbox_up_to, "
            "digest) VALUES (?, ?, ?, ?, ?, ?)",
            (self.agent_id, b.n, b.version, b.dirty_up_to, b.outbox_up_to, b.digest),
        )
        self.db.execute(
            "UPDATE sync_progress SET manifest_n = ? WHERE agent_id = ?", (b.n, self.agent_id)
        )
        self.db.execute(
            "UPDATE sync_state SET hlc = ? WHERE agent_id = ?", (b.version, self.agent_id)
        )
        if b.digest is not None:
            self.db.execute(
                "UPDATE sync_state SET inflight_version = ?, inflight_envelope = ?, "
                "inflight_seq = ?, inflight_digest = ? WHERE agent_id = ?",
                (b.version, b.rows[0][6], b.outbox_up_to, b.digest, self.agent_id),
            )

    def _acknowledge(self, batches: list[_Batch]) -> int:
        """The server confirmed `batches`: drop them, their dirty marks and outbox rows, and
        remember the versions pushed. Returns the outbox rows acknowledged."""
        dirty_up_to = max(b.dirty_up_to for b in batches)
        outbox_up_to = max(b.outbox_up_to for b in batches)
        last = batches[-1]
        critical = [b for b in batches if b.digest is not None]
        with self.db.transaction():
            covered = int(
                self.db.scalar(
                    "SELECT count(*) FROM outbox WHERE agent_id = ? AND seq <= ?",
                    (self.agent_id, outbox_up_to),
                )
            )
            snapshot.acknowledge(self.db, self.agent_id, outbox_up_to)
            self.db.execute(
                "DELETE FROM sync_dirty WHERE agent_id = ? AND seq <= ?",
                (self.agent_id, dirty_up_to),
            )
            for b in batches:
                self.db.executemany(
                    "INSERT INTO sync_versions (agent_id, id, version) VALUES (?, ?, ?) "
                    "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version "
                    "WHERE excluded.version > sync_versions.version",
                    [(self.agent_id, r[1], r[3]) for r in b.rows if r[0] == MEMORY_TABLE],
                )
                self.db.execute(
                    "DELETE FROM sync_outgoing WHERE agent_id = ? AND n = ?", (self.agent_id, b.n)
                )
                self.db.execute(
                    "DELETE FROM sync_batches WHERE agent_id = ? AND n = ?", (self.agent_id, b.n)
                )
            if critical:
                newest = critical[-1]
                self.db.execute(
                    "UPDATE sync_state SET last_digest = ? WHERE agent_id = ?",
                    (newest.digest, self.agent_id),
                )
                self.db.execute(
                    "UPDATE sync_progress SET critical_version = ? "
                    "WHERE agent_id = ? AND critical_version < ?",
                    (newest.version, self.agent_id, newest.version),
                )
            self.db.execute(
                "UPDATE sync_state SET registered = 1, last_push_at = ?, last_push_version = ?, "
                "pushes = pushes + 1, last_error = NULL, last_error_at = NULL, retry_at = NULL "
                "WHERE agent_id = ?",
                (self.mem.now(), last.version, self.agent_id),
            )
            for b in critical:
                self.db.execute(
                    "UPDATE sync_state SET inflight_version = NULL, inflight_envelope = NULL, "
                    "inflight_seq = NULL, inflight_digest = NULL "
                    "WHERE agent_id = ? AND inflight_version = ?",
                    (self.agent_id, b.version),
                )
        return covered

    def _settle_stale(
        self, s: Settings, batches: list[_Batch], policy: RetryPolicy
    ) -> tuple[list[_Batch], int]:
        """After a failed epoch guard: confirm the in-flight batches the server already holds
        and drop the others, which are sealed under a key the vault no longer writes with.
        Returns (the batches confirmed, outbox rows they acknowledged).

        One read tells which batches an earlier attempt committed (its answer lost): the
        server holds their exact manifest envelope. Requests carry every batch in flight, so
        those form a prefix. Dropping the rest rewinds the manifest counter to the last
        committed batch, so the batch sealed next takes the number again (no gap), and makes
        their rows pending again: a batch's only hold on them is its saved marks (the dirty
        marks and outbox rows stay until a confirmation), so nothing is lost."""
        manifest_rid = batches[0].rows[-1][2]
        assert all(b.rows[-1][0] == MANIFEST_TABLE for b in batches)
        results, _, _ = self._send(
            s,
            lambda c: [
                c.execute(
                    "SELECT version, envelope FROM records WHERE agent_tag = ? "
                    "AND record_id = ? AND version >= ?",
                    (agent_tag(self.agent_id), manifest_rid, min(b.version for b in batches)),
                )
            ],
            policy,
        )
        held = {(str(v), bytes(e)) for v, e in results[0].rows if isinstance(e, bytes)}
        committed: list[_Batch] = []
        for b in sorted(batches, key=lambda b: b.n):
            if (b.version, b.rows[-1][6]) not in held:
                break
            committed.append(b)
        covered = self._acknowledge(committed) if committed else 0
        confirmed = {b.n for b in committed}
        stale = [b.n for b in batches if b.n not in confirmed]
        if stale:
            with self.db.transaction():
                first = min(stale)
                # Every batch from the first stale one on: any saved meanwhile builds on it.
                self.db.execute(
                    "DELETE FROM sync_outgoing WHERE agent_id = ? AND n >= ?",
                    (self.agent_id, first),
                )
                self.db.execute(
                    "DELETE FROM sync_batches WHERE agent_id = ? AND n >= ?",
                    (self.agent_id, first),
                )
                self.db.execute(
                    "UPDATE sync_progress SET manifest_n = ? WHERE agent_id = ?",
                    (first - 1, self.agent_id),
                )
                self.db.execute(
                    "UPDATE sync_state SET inflight_version = NULL, inflight_envelope = NULL, "
                    "inflight_seq = NULL, inflight_digest = NULL WHERE agent_id = ?",
                    (self.agent_id,),
                )
        return committed, covered

    def _adopt_epoch(self) -> None:
        """Adopt the server's newest key epoch (`keys.refresh_epoch`); a device removed from
        the vault gets `keys.DeviceRevoked` (recorded for `status` and `history`)."""
        from tiermem.sync import keys  # 6B (it imports this module)

        try:
            keys.refresh_epoch(self)
        except keys.DeviceRevoked as exc:
            self._record_error(str(exc), None)
            self._log("error", None, 0, 0, str(exc))
            raise

    def _rotated_again(self) -> TiermemError:
        from tiermem.sync import keys

        return keys.RotationConflict(
            f"the vault key of agent {self.agent_id!r} was rotated again while this push was "
            "sealing its records under the new key; nothing under the old key was sent; run "
            "the push again"
        )

    def _acknowledge_unchanged(self) -> int:
        """Outbox rows whose state equals the one pushed last (nothing to send for them)."""
        s = self._settings_or_fail()
        if s.inflight is not None:
            return 0
        critical = self._critical_candidate(s, 0)
        if critical is None or critical[2] != s.last_digest:
            return 0
        with self.db.transaction():
            covered = int(
                self.db.scalar(
                    "SELECT count(*) FROM outbox WHERE agent_id = ? AND seq <= ?",
                    (self.agent_id, critical[0]),
                )
            )
            snapshot.acknowledge(self.db, self.agent_id, critical[0])
        return covered

    def _critical_document(self, s: Settings) -> dict[str, Any]:
        """What a `critical` record holds: 6C's document with per-item clocks when
        `tiermem.sync.merge` exists, else the plain critical-state dump."""
        merge = _optional("tiermem.sync.merge")
        if merge is not None and hasattr(merge, "critical_document"):
            doc = merge.critical_document(self.mem, s.device_id.hex())
            assert isinstance(doc, dict)
            return doc
        return snapshot.dump(self.mem)

    # -- pull -------------------------------------------------------------------------------

    def pull(self, policy: RetryPolicy | None = None, *, page_size: int = 500) -> PullResult:
        """Fetch what other devices pushed since the last pull and apply it.

        Pages of the server's records in commit order (`records.SELECT_PAGE`); this device's
        own rows are skipped. Memory records converge by id (the highest version wins; a row
        changed here and not yet pushed wins, since its push will carry a later version);
        critical records go to `merge_critical`. Each page is applied in one local transaction
        with the cursor, so an interrupted pull resumes where it stopped. Applying does not
        mark rows for pushing (no ping-pong) and keeps full-text search current."""
        started = time.perf_counter()
        policy = policy or RetryPolicy()
        s = self.require_ready()
        tag = agent_tag(self.agent_id)
        totals = _PullTotals()
        limit = page_size
        while True:
            cursor = self._progress().pull_cursor

            def select(client: HranaClient, cursor: int = cursor) -> list[ResultSet]:
                nonlocal limit
                result, limit = records_fmt.fit_page(
                    lambda n: client.execute(SELECT_PAGE, (tag, cursor, n)), limit
                )
                return [result]

            results, req, _ = self._send(s, select, policy)
            totals.requests += req
            page = [records_fmt.remote_row(r) for r in results[0].rows]
            if not page:
                break
            totals.pages += 1
            self._apply_page(s, page, totals)
            if len(page) < limit:
                break
        seconds = time.perf_counter() - started
        with self.db.transaction():
            self.db.execute(
                "UPDATE sync_progress SET last_pull_at = ?, last_pull_records = ?, "
                "pulls = pulls + 1 WHERE agent_id = ?",
                (self.mem.now(), totals.applied, self.agent_id),
            )
            self.db.execute(
                "UPDATE sync_state SET last_error = NULL, last_error_at = NULL, retry_at = NULL "
                "WHERE agent_id = ?",
                (self.agent_id,),
            )
        note = f"{totals.applied} applied, {totals.skipped} skipped"
        if totals.rejected:
            note += f", {totals.rejected} REJECTED (failed authentication; run `sync check`)"
        if totals.applied or totals.rejected or totals.conflicts:
            self._log(
                "error" if totals.rejected else "pull",
                totals.newest,
                totals.applied,
                totals.bytes,
                note,
            )
        return PullResult(
            applied=totals.applied,
            memories=totals.memories,
            critical=totals.critical,
            conflicts=totals.conflicts,
            skipped=totals.skipped,
            rejected=totals.rejected,
            pages=totals.pages,
            requests=totals.requests,
            bytes=totals.bytes,
            seconds=seconds,
            note=note,
        )

    def _apply_page(self, s: Settings, page: list[records_fmt.RemoteRow], t: _PullTotals) -> None:
        """Authenticate and decode a page (no transaction held: that is the slow part), then
        apply it and move the cursor in one short local transaction."""
        id_key = self.id_key(s)
        critical_rid = records_fmt.record_id(id_key, CRITICAL_TABLE, self.agent_id)
        prune_rid = records_fmt.record_id(id_key, PRUNE_TABLE, records_fmt.PRUNE_KEY)
        newest_critical: tuple[str, dict[str, Any]] | None = None
        memories: list[tuple[records_fmt.MemoryRow | records_fmt.Tombstone, str]] = []
        manifests: list[tuple[str, int, str]] = []
        newest = ""
        for row in page:
            if row.device_id == s.device_id or row.record_id == prune_rid:
                with contextlib.suppress(ValueError):
                    newest = max(newest, str(hlc.parse(row.version)))
                continue  # own rows; the prune horizon is for restores and checks
            t.bytes += len(row.envelope)
            try:
                hlc.parse(row.version)
                key = self.epoch_key(crypto.parse_envelope(row.envelope).epoch, s)
                device_hex = row.device_id.hex()
                if row.record_id == critical_rid:
                    doc = records_fmt.decode_critical(
                        records_fmt.open_row(key, self.agent_id, CRITICAL_TABLE, row),
                        self.agent_id,
                    )
                    if newest_critical is None or row.version > newest_critical[0]:
                        newest_critical = (row.version, doc)
                elif row.record_id == records_fmt.record_id(id_key, MANIFEST_TABLE, device_hex):
                    m = records_fmt.decode_manifest(
                        records_fmt.open_row(key, self.agent_id, MANIFEST_TABLE, row),
                        device_hex,
                    )
                    manifests.append((device_hex, m.n, row.version))
                else:
                    item = records_fmt.decode_memory(
                        records_fmt.open_row(key, self.agent_id, MEMORY_TABLE, row)
                    )
                    if records_fmt.record_id(id_key, MEMORY_TABLE, item.id) != row.record_id:
                        raise crypto.TamperedData("a memory record is filed under another id")
                    memories.append((item, row.version))
            except (crypto.CryptoError, ValueError):
                t.rejected += 1
                continue
            newest = max(newest, row.version)
        with self.db.transaction():
            inflight_up_to = int(
                self.db.scalar(
                    "SELECT COALESCE(MAX(dirty_up_to), 0) FROM sync_batches WHERE agent_id = ?",
                    (self.agent_id,),
                )
            )
            for item, version in memories:
                if self._apply_memory(item, version, inflight_up_to):
                    t.applied += 1
                    t.memories += 1
                else:
                    t.skipped += 1
            self.db.executemany(
                "INSERT INTO sync_peers (agent_id, device_id, last_n, last_version) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (agent_id, device_id) DO UPDATE SET "
                "last_n = max(last_n, excluded.last_n), "
                "last_version = max(last_version, excluded.last_version)",
                [(self.agent_id, d, n, v) for d, n, v in manifests],
            )
            if newest_critical is not None:
                version, doc = newest_critical
                changed, conflicts = self.merge_critical(s, doc, version)
                t.applied += int(changed)
                t.critical += int(changed)
                t.skipped += int(not changed)
                t.conflicts += conflicts
            current = self._settings_or_fail()
            if newest and (not current.hlc or newest > current.hlc):
                seen = hlc.parse(newest)
                self.db.execute(
                    "UPDATE sync_state SET hlc = ? WHERE agent_id = ?",
                    (str(hlc.Hlc(seen.wall_ms, seen.counter, s.device_id.hex())), self.agent_id),
                )
            self.db.execute(
                "UPDATE sync_progress SET pull_cursor = ? WHERE agent_id = ?",
                (page[-1].seq, self.agent_id),
            )
            t.newest = max(t.newest or "", newest) or None

    def _apply_memory(
        self, item: records_fmt.MemoryRow | records_fmt.Tombstone, version: str, inflight: int
    ) -> bool:
        """Apply one remote memory version if it is newer than what this device holds (the
        caller's transaction). Returns whether it was applied."""
        dirty = self.db.scalar(
            "SELECT seq FROM sync_dirty WHERE agent_id = ? AND id = ?", (self.agent_id, item.id)
        )
        if dirty is not None and int(dirty) > inflight:
            return False  # changed here, not sealed yet: its push will be the newer version
        known = self.db.scalar(
            "SELECT max(COALESCE((SELECT version FROM sync_versions WHERE agent_id = ? AND id = ?"
            "), ''), COALESCE((SELECT max(version) FROM sync_outgoing WHERE agent_id = ? "
            "AND tbl = ? AND key = ?), ''))",
            (self.agent_id, item.id, self.agent_id, MEMORY_TABLE, item.id),
        )
        if known and version <= str(known):
            return False
        apply_memory(self.mem, item)
        self.db.execute(
            "DELETE FROM sync_dirty WHERE agent_id = ? AND id = ?", (self.agent_id, item.id)
        )
        self.db.execute(
            "INSERT INTO sync_versions (agent_id, id, version) VALUES (?, ?, ?) "
            "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version",
            (self.agent_id, item.id, version),
        )
        return True

    def merge_critical(self, s: Settings, doc: dict[str, Any], version: str) -> tuple[bool, int]:
        """Bring a remote critical state in (inside the caller's transaction). With helper
        6C's `tiermem.sync.merge.merge_remote`: a per-item merge. Without it: the remote state
        replaces the local one only if it is newer than the last one known here and nothing
        local waits to be pushed (the local push then wins). Returns (changed, conflicts)."""
        progress = self._progress()
        known = max(progress.critical_version, s.last_push_version or "")
        merge = _optional("tiermem.sync.merge")
        if merge is not None and hasattr(merge, "merge_remote"):
            outcome = merge.merge_remote(self.mem, doc, s.device_id.hex())
            changed, conflicts = bool(outcome.changed), int(outcome.conflicts)
        else:
            if version <= known:
                return False, 0
            busy = snapshot.pending(self.db, self.agent_id) or self.db.scalar(
                "SELECT count(*) FROM sync_batches WHERE agent_id = ? AND digest IS NOT NULL",
                (self.agent_id,),
            )
            if busy:
                return False, 0
            snapshot.load(self.mem, doc)
            changed, conflicts = True, 0
        if not snapshot.pending(self.db, self.agent_id):
            body = records_fmt.encode_critical(self._critical_document(s))
            self.db.execute(
                "UPDATE sync_state SET last_digest = ? WHERE agent_id = ?",
                (state_digest(body), self.agent_id),
            )
        self.db.execute(
            "UPDATE sync_progress SET critical_version = ? "
            "WHERE agent_id = ? AND critical_version < ?",
            (version, self.agent_id, version),
        )
        return changed, conflicts

    def sync(self, policy: RetryPolicy | None = None) -> tuple[PullResult, PushResult]:
        """Pull, then push (so what is pushed was merged with what others pushed)."""
        pulled = self.pull(policy)
        return pulled, self.push(policy)

    # -- history ----------------------------------------------------------------------------

    def _log(self, kind: str, version: str | None, records: int, size: int, note: str) -> None:
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO sync_log (agent_id, at, kind, version, records, bytes, note) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (self.agent_id, self.mem.now(), kind, version, records, size, note),
            )
            self.db.execute(
                "DELETE FROM sync_log WHERE agent_id = ? AND seq <= ("
                "SELECT max(seq) FROM sync_log WHERE agent_id = ?) - ?",
                (self.agent_id, self.agent_id, HISTORY_KEEP),
            )

    def history(self, limit: int = 50) -> list[SyncEvent]:
        """The newest pushes, pulls and errors first (the last `HISTORY_KEEP` are kept)."""
        rows = self.db.query(
            "SELECT at, kind, version, records, bytes, note FROM sync_log WHERE agent_id = ? "
            "ORDER BY seq DESC LIMIT ?",
            (self.agent_id, limit),
        )
        return [
            SyncEvent(
                float(r[0]),
                str(r[1]),
                None if r[2] is None else str(r[2]),
                int(r[3]),
                int(r[4]),
                str(r[5]),
            )
            for r in rows
        ]

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
        progress = self._progress()
        pending_memories = int(
            self.db.scalar(
                "SELECT (SELECT count(*) FROM sync_dirty WHERE agent_id = ?) + (SELECT count(*) "
                "FROM sync_outgoing WHERE agent_id = ? AND tbl = ?)",
                (self.agent_id, self.agent_id, MEMORY_TABLE),
            )
        )
        inflight_batches = int(
            self.db.scalar("SELECT count(*) FROM sync_batches WHERE agent_id = ?", (self.agent_id,))
        )
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
            pending_memories=pending_memories,
            inflight_batches=inflight_batches,
            last_pull_at=progress.last_pull_at,
            pulls=progress.pulls,
            pull_cursor=progress.pull_cursor,
            manifest_n=progress.manifest_n,
        )


def _check_passphrase(passphrase: str) -> None:
    if len(passphrase.strip()) < MIN_PASSPHRASE_CHARS:
        raise InvalidInput(
            f"the passphrase must have at least {MIN_PASSPHRASE_CHARS} characters (the server "
            "keeps its wrap and could try guesses offline: use four or more random words)"
        )


# ------------------------------------------------------------------ applying remote memories


def _optional(name: str) -> ModuleType | None:
    """A sibling helper's module when it exists (merge 6C, keys 6B), else None."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


class _StaleEpoch(Exception):
    """A push batch failed at its epoch guard: the server holds a newer key epoch. Not a
    `HranaError`, so it is neither retried nor logged as a failure: `push` handles it."""


def _epoch_guard(agent_id: str, epoch: int) -> tuple[str, Args]:
    from tiermem.sync import keys  # 6B (it imports this module)

    return keys.epoch_guard(agent_id, epoch)


def _guarded_batch(client: HranaClient, statements: list[tuple[str, Args]]) -> list[ResultSet]:
    """A push batch whose statement 0 is `keys.epoch_guard`: its failure is `_StaleEpoch`."""
    from tiermem.sync import keys

    try:
        return client.batch(statements)
    except SqlError as exc:
        if keys.is_epoch_guard_failure(exc, 0):
            raise _StaleEpoch(str(exc)) from None
        raise


def _split(value: str) -> tuple[str, ...]:
    return tuple(v for v in value.split("\n") if v)


def _memory_item(r: Sequence[Any]) -> records_fmt.MemoryRow | records_fmt.Tombstone:
    """A `sync_dirty` row joined with its memory (``d.seq, d.id, _MEMORY_COLUMNS``)."""
    if r[2] is None:
        return records_fmt.Tombstone(str(r[1]))
    return records_fmt.MemoryRow(
        id=str(r[2]),
        text=str(r[3]),
        category=str(r[4]),
        importance=float(r[5]),
        created_at=float(r[6]),
        access_count=int(r[7]),
        last_access=None if r[8] is None else float(r[8]),
        tier=str(r[9]),
        tier_changed_at=float(r[10]),
        urls=_split(r[11]),
        commands=_split(r[12]),
        paths=_split(r[13]),
        source=str(r[14]),
        size_bytes=int(r[15]),
        tokens=int(r[16]),
        pinned=bool(r[17]),
    )


def apply_memory(mem: Memory, item: records_fmt.MemoryRow | records_fmt.Tombstone) -> None:
    """Write one remote memory version into the local table (inside the caller's
    transaction): insert, update in place, or delete for a tombstone. The table's triggers
    keep full-text search current; they also mark the id dirty, which `mark_applied` undoes."""
    db, agent = mem.db, mem.agent_id
    if isinstance(item, records_fmt.Tombstone):
        db.execute("DELETE FROM memories WHERE agent_id = ? AND id = ?", (agent, item.id))
        return
    values = item.columns()
    exists = db.scalar("SELECT 1 FROM memories WHERE agent_id = ? AND id = ?", (agent, item.id))
    if exists:
        db.execute(
            "UPDATE memories SET text = ?, category = ?, importance = ?, created_at = ?, "
            "access_count = ?, last_access = ?, tier = ?, tier_changed_at = ?, urls = ?, "
            "commands = ?, paths = ?, source = ?, size_bytes = ?, tokens = ?, pinned = ? "
            "WHERE agent_id = ? AND id = ?",
            (*values, agent, item.id),
        )
        return
    store = mem.memories
    last = db.scalar(
        "SELECT MAX(seq) FROM memories WHERE seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER)",
        (str(store.seq_low), str(store.seq_high)),
    )
    seq = store.seq_low + 1 if last is None else int(last) + 1
    db.execute(
        "INSERT INTO memories (seq, agent_id, id, text, category, importance, created_at, "
        "access_count, last_access, tier, tier_changed_at, urls, commands, paths, source, "
        "size_bytes, tokens, pinned) VALUES (CAST(? AS INTEGER), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, ?)",
        (str(seq), agent, item.id, *values),
    )


def mark_applied(db: Database, agent_id: str, applied: Iterable[tuple[str, str]]) -> None:
    """Record remote memory versions as applied here (inside the caller's transaction):
    `(memory_id, version)` pairs. They are not pushed back, and older versions are ignored."""
    rows = list(applied)
    db.executemany(
        "DELETE FROM sync_dirty WHERE agent_id = ? AND id = ?", [(agent_id, m) for m, _ in rows]
    )
    db.executemany(
        "INSERT INTO sync_versions (agent_id, id, version) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version "
        "WHERE excluded.version > sync_versions.version",
        [(agent_id, m, v) for m, v in rows],
    )
