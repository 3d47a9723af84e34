"""End-to-end encrypted sync of an agent's whole memory with Turso, both ways.

``SyncEngine(mem)`` is the front ends' one handle: it sets sync up (`init`, in
`tiermem.sync.setup`), pushes local changes (`push`, `tiermem.sync.push.send`), applies what other
devices pushed (`pull`, `tiermem.sync.pull.receive`; `sync` = pull then push), and reports
(`status`, `history`); `tiermem.sync.restore` brings everything back on a new device. What the
server stores is described in `tiermem.sync.vault.schema`, what each record holds in
`tiermem.sync.records`; every request goes through `tiermem.sync.vault.remote`.

**What changed** is tracked locally: the critical state (hot + tree) through the durable
outbox (`core.snapshot`), warm/cold/frozen rows through triggers on ``memories`` that mark a
row's id dirty (table ``sync_dirty``; churn on one row coalesces, a deleted row becomes a
tombstone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.sync import crypto, journal, setup
from tiermem.sync.devices import epochs
from tiermem.sync.devices.secret_store import ENV_TOKEN, TOKEN, env_secret
from tiermem.sync.journal import HISTORY_KEEP, SyncEvent
from tiermem.sync.pull import receive
from tiermem.sync.pull.receive import PullResult, apply_memory, mark_applied
from tiermem.sync.push import send
from tiermem.sync.push.kick import last_attempt
from tiermem.sync.push.send import DEFAULT_BATCH_BYTES, PushResult
from tiermem.sync.records import MEMORY_TABLE
from tiermem.sync.session import Session
from tiermem.sync.setup import MIN_PASSPHRASE_CHARS, InitResult
from tiermem.sync.state import Settings
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.transport import to_base_url

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
    pending_graph: int = 0
    """Episodes and entities changed since their last push."""
    inflight_batches: int = 0
    last_pull_at: float | None = None
    pulls: int = 0
    pull_cursor: int = 0
    manifest_n: int = 0
    rejected: list[dict[str, str]] = field(default_factory=list)
    clock_ahead: str | None = None
    last_attempt_at: float | None = None
    last_attempt_ok: bool | None = None
    last_attempt_message: str | None = None
    last_attempt_by: str | None = None


class SyncEngine(Session):
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
        super().__init__(mem, timeout=timeout, transport=transport)
        self.batch_bytes = batch_bytes

    # -- setup ------------------------------------------------------------------------------

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
        new_vault: bool = False,
        member: str | None = None,
    ) -> InitResult:
        """Create the vault (`setup.init`; `new_vault`: even when the server holds others;
        `member`: a shared space's first member's name on its roster)."""
        return setup.init(
            self,
            url,
            token,
            recovery_key,
            passphrase=passphrase,
            store_token=store_token,
            kdf=kdf,
            policy=policy,
            new_vault=new_vault,
            member=member,
        )

    def other_vaults(self, url: str, token: str | None, policy: RetryPolicy | None = None) -> int:
        """How many vaults the server at `url` holds besides this device's own, if it has one
        pending (`setup.other_vaults`)."""
        s = self.settings()
        if token is None and s is not None:
            token = self.token(s)  # a pending init's stored token
        with self.remote_at(to_base_url(url), token) as remote:
            return setup.other_vaults(remote, self.agent_id, policy, b"" if s is None else s.tag)

    def pending_init(self) -> bool:
        return setup.pending_init(self)

    def resume_init(
        self,
        url: str | None,
        token: str | None,
        *,
        store_token: bool = True,
        policy: RetryPolicy | None = None,
        new_vault: bool = False,
    ) -> InitResult:
        """Finish an interrupted `init` (same keys; optionally a new URL or token)."""
        return setup.resume_init(
            self, url, token, store_token=store_token, policy=policy, new_vault=new_vault
        )

    def abandon_init(self) -> None:
        """Forget an unfinished `init`; a finished setup is never touched."""
        setup.abandon_init(self)

    # -- keys -------------------------------------------------------------------------------

    def id_key(self, s: Settings | None = None) -> bytes:
        """The key record ids are derived with (stable across epochs)."""
        return epochs.id_key(self)

    def epoch_key(self, epoch: int, s: Settings | None = None) -> bytes:
        """The vault key of `epoch` (to open records sealed under it)."""
        return epochs.epoch_key(self, epoch)

    # -- push and pull ----------------------------------------------------------------------

    def has_work(self) -> bool:
        """Something to push: outbox rows, changed memories, or a push in flight."""
        return send.has_work(self)

    def push(self, policy: RetryPolicy | None = None) -> PushResult:
        """Push what changed, one request per `batch_bytes` (`send.push`)."""
        return send.push(self, self.batch_bytes, policy)

    def pull(self, policy: RetryPolicy | None = None, *, page_size: int = 500) -> PullResult:
        """Fetch what other devices pushed since the last pull and apply it (`receive.pull`)."""
        return receive.pull(self, policy, page_size=page_size)

    def merge_critical(self, s: Settings, doc: dict[str, Any], version: str) -> tuple[bool, int]:
        """Bring a remote critical state in (inside the caller's transaction)."""
        return receive.merge_critical(self, s, doc, version)

    def sync(self, policy: RetryPolicy | None = None) -> tuple[PullResult, PushResult]:
        """Pull, then push (so what is pushed was merged with what others pushed)."""
        pulled = self.pull(policy)
        return pulled, self.push(policy)

    # -- reports ----------------------------------------------------------------------------

    def history(self, limit: int = 50) -> list[SyncEvent]:
        """The newest pushes, pulls and errors first (the last `HISTORY_KEEP` are kept)."""
        return journal.history(self.mem, limit)

    def status(self) -> SyncStatus:
        s = self.settings()
        pending = snapshot.pending(self.db, self.agent_id)
        progress = journal.read_progress(self.mem)
        attempt = last_attempt(self.mem.home.root, self.agent_id)
        pending_memories = int(
            self.db.scalar(
                "SELECT count(*) FROM (SELECT id FROM sync_dirty WHERE agent_id = ? UNION "
                "SELECT key FROM sync_outgoing WHERE agent_id = ? AND tbl = ?)",
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
            token_source=self._token_source(s),
            pending_memories=pending_memories,
            pending_graph=int(
                self.db.scalar(
                    "SELECT count(*) FROM graph_dirty WHERE agent_id = ?", (self.agent_id,)
                )
            ),
            inflight_batches=inflight_batches,
            last_pull_at=progress.last_pull_at,
            pulls=progress.pulls,
            pull_cursor=progress.pull_cursor,
            manifest_n=progress.manifest_n,
            rejected=[
                {"record_id": rid, "version": v, "reason": why}
                for rid, v, why in receive.rejected_rows(self)
            ],
            clock_ahead=journal.clock_ahead(self.mem),
            last_attempt_at=None if attempt is None else attempt.at,
            last_attempt_ok=None if attempt is None else attempt.ok,
            last_attempt_message=None if attempt is None else attempt.message,
            last_attempt_by=None if attempt is None else attempt.by,
        )

    def _token_source(self, s: Settings | None) -> str | None:
        if s is None:
            return None
        if env_secret(ENV_TOKEN) is not None:
            return "env"
        return s.secret_store if self.secret_store(s).get(TOKEN) else "none"
