"""Setting sync up on the first device: `init` creates the vault (keys, wraps, the remote
tables, this device), `resume_init` finishes an interrupted one, `abandon_init` forgets it.

Nothing is sent before the local settings are saved, so an interrupted init is finished by
`resume_init` with the same keys."""

from __future__ import annotations

import dataclasses
import os
import uuid
from dataclasses import dataclass
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tiermem.core import logs, snapshot
from tiermem.core.errors import InvalidInput
from tiermem.sync import crypto
from tiermem.sync.crypto.authorship import seal_member_name
from tiermem.sync.crypto.roster import (
    RECOVERY,
    generate_signing_key,
    recovery_signing_key,
    signing_public_bytes,
    verify_roster,
)
from tiermem.sync.devices.membership import own_entry_statements
from tiermem.sync.devices.roster_pin import Draft, save_anchor
from tiermem.sync.devices.secret_store import TOKEN
from tiermem.sync.session import Session
from tiermem.sync.state import (
    EPOCH,
    AlreadyInitialised,
    NotInitialised,
    Settings,
    agent_tag,
    device_rows,
    insert_settings,
    save_secrets,
    wrap_id,
)
from tiermem.sync.vault.hrana import Args, SqlError
from tiermem.sync.vault.remote import Remote
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.schema import SCHEMA
from tiermem.sync.vault.store import INSERT_WRAP
from tiermem.sync.vault.transport import to_base_url

__all__ = [
    "MIN_PASSPHRASE_CHARS",
    "InitResult",
    "abandon_init",
    "check_passphrase",
    "init",
    "other_vaults",
    "pending_init",
    "resume_init",
    "set_token",
]

MIN_PASSPHRASE_CHARS = 12


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


def check_passphrase(passphrase: str) -> None:
    if len(passphrase.strip()) < MIN_PASSPHRASE_CHARS:
        raise InvalidInput(
            f"the passphrase must have at least {MIN_PASSPHRASE_CHARS} characters (the server "
            "keeps its wrap and could try guesses offline: use four or more random words)"
        )


def init(
    session: Session,
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
    """Create the vault: keys, wraps, remote tables, this device; then mark sync ready.
    `member`: a shared space's vault names this device's member so on its signed roster.

    The caller has shown the recovery key and had it confirmed. The current critical state is
    queued, so the first push sends it. `new_vault`: even when the server holds other vaults
    (`other_vaults`: a keyed vault cannot be told from another agent's, so the owner decides)."""
    existing = session.settings()
    if existing is not None:
        if existing.status == "ready":
            raise AlreadyInitialised(
                f"sync is already set up for agent {session.agent_id!r} with {existing.url}; "
                "see `tiermem sync status`"
            )
        return resume_init(
            session, url, token, store_token=store_token, policy=policy, new_vault=new_vault
        )
    base = to_base_url(url)
    if passphrase is not None:
        check_passphrase(passphrase)
    tag = crypto.keyed_agent_tag(recovery_key, session.agent_id)
    vault_key = crypto.generate_vault_key()
    device_key = crypto.generate_device_key()
    sign_key = generate_signing_key()
    device_id = os.urandom(16)
    ref = uuid.uuid4().hex
    device_wrap, recovery_wrap, passphrase_wrap = _wraps(
        session.agent_id, tag, (vault_key, recovery_key), passphrase, kdf, device_key, device_id
    )
    store, token_stored = save_secrets(
        session.mem.home.root, ref, device_key, token if store_token else None, sign_key
    )
    now = session.mem.now()
    settings = Settings(
        agent_id=session.agent_id,
        status="pending",
        url=base,
        device_id=device_id,
        epoch=EPOCH,
        secret_ref=ref,
        secret_store=store.kind,
        device_wrap=device_wrap,
        recovery_wrap=recovery_wrap,
        passphrase_wrap=passphrase_wrap,
        created_at=now,
        agent_tag=tag,
    )
    try:
        with session.db.transaction():
            insert_settings(session.db, settings)
            snapshot.enqueue(session.db, session.agent_id, "sync-init", now)
    except BaseException:
        store.delete_all()
        raise
    session.hold_vault_key(vault_key)
    session.use_token(token)
    keys = (vault_key, device_key, sign_key)
    roster = _first_roster(session.agent_id, settings, recovery_key, keys, member)
    result = _register(
        session, settings, policy or RetryPolicy(), roster=roster, new_vault=new_vault
    )
    save_anchor(session.db, session.agent_id, verify_roster(session.agent_id, roster.bodies))
    return dataclasses.replace(result, token_stored=token_stored)


def _first_roster(
    scope: str,
    settings: Settings,
    recovery_key: bytes,
    keys: tuple[bytes, X25519PrivateKey, Ed25519PrivateKey],
    member: str | None,
) -> Draft:
    """The vault's roster at its start: the genesis and this device, added by the recovery key
    (its vault key, device key and signing key in `keys`)."""
    vault_key, device_key, sign_key = keys
    roster = Draft(scope, settings.tag, None)
    roster.genesis(recovery_key, EPOCH)
    roster.add(
        settings.device_id,
        crypto.device_public_bytes(device_key),
        signing_public_bytes(sign_key),
        recovery_signing_key(recovery_key),
        RECOVERY,
        name=_sealed_member(vault_key, scope, settings.device_id, member),
    )
    return roster


def _sealed_member(id_key: bytes, scope: str, device_id: bytes, member: str | None) -> bytes | None:
    """The first member's name as its roster entry holds it (None: an agent's vault)."""
    return None if member is None else seal_member_name(id_key, scope, device_id, member)


_HAS_WRAPS: Final = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'key_wraps'"


def other_vaults(
    remote: Remote, agent_id: str, policy: RetryPolicy | None = None, own_tag: bytes = b""
) -> int:
    """How many vaults (other than `own_tag`'s) the server holds (two small reads: a fresh
    server has no table, and asking it for one would be logged as a failure).
    `AlreadyInitialised` when one is an old vault of this very agent (its tag is the unkeyed
    hash of the agent id, so that much can be told)."""
    policy = policy or RetryPolicy()
    if not remote.execute(_HAS_WRAPS, (), policy).rows:
        return 0
    rows = remote.execute(
        "SELECT count(DISTINCT agent_tag), coalesce(max(agent_tag = ?), 0) FROM key_wraps "
        "WHERE kind = 'recovery' AND agent_tag != ?",
        (agent_tag(agent_id), own_tag),
        policy,
    ).rows
    count, old = (int(str(v)) for v in rows[0])
    if old:
        raise AlreadyInitialised(_held_message(agent_id))
    return count


def other_vaults_message(count: int) -> str:
    """Why `sync init` stops at a server that already holds vaults."""
    return (
        f"the server already holds {count} other vault(s); if one of them is this agent's, join "
        "it with `tiermem sync add-device` (approved on a device that has it, or with its "
        "recovery key) instead; to set up a separate vault anyway, use `sync init --new-vault`"
    )


def _held_message(agent_id: str) -> str:
    return (
        f"the server already holds a vault for agent {agent_id!r}; bring it here with "
        "`tiermem restore` (in an empty home), or use another agent id"
    )


def _wraps(
    agent_id: str,
    tag: bytes,
    keys: tuple[bytes, bytes],
    passphrase: str | None,
    kdf: crypto.KdfParameters,
    device_key: X25519PrivateKey,
    device_id: bytes,
) -> tuple[bytes, bytes, bytes | None]:
    """The first epoch's wraps of the vault key (`epochs`: vault key, recovery key): recovery,
    passphrase (optional), device."""
    vault_key, recovery_key = keys

    def context(kind: str, device: bytes = b"") -> crypto.WrapContext:
        return crypto.WrapContext(agent_id, EPOCH, wrap_id(tag, EPOCH, kind, device))

    recovery = crypto.wrap_with_recovery_key(vault_key, recovery_key, context("recovery"))
    wrapped_pw = None
    if passphrase is not None:
        wrapped_pw = crypto.wrap_with_passphrase(
            vault_key, passphrase, context("passphrase"), params=kdf
        )
    device_wrap = crypto.wrap_for_device(
        vault_key, device_key.public_key(), context("device", device_id)
    )
    return device_wrap, recovery, wrapped_pw


def pending_init(session: Session) -> bool:
    s = session.settings()
    return s is not None and s.status == "pending"


def resume_init(
    session: Session,
    url: str | None,
    token: str | None,
    *,
    store_token: bool = True,
    policy: RetryPolicy | None = None,
    new_vault: bool = False,
) -> InitResult:
    """Finish an interrupted `init` (same keys; optionally a new URL or token; `new_vault` as
    for `init`)."""
    s = session.settings()
    if s is None or s.status != "pending":
        raise NotInitialised("there is no unfinished `sync init` to resume")
    if url is not None and to_base_url(url) != s.url:
        with session.db.transaction():
            session.db.execute(
                "UPDATE sync_state SET url = ? WHERE agent_id = ?",
                (to_base_url(url), session.agent_id),
            )
        s = session.settings_or_fail()
    if token is not None:
        if store_token:
            session.secret_store(s).set(TOKEN, token)
        session.use_token(token)
    result = _register(session, s, policy or RetryPolicy(), resumed=True, new_vault=new_vault)
    return dataclasses.replace(result, token_stored=store_token and bool(token))


def _register_statements(
    session: Session, s: Settings, roster: Draft | None
) -> list[tuple[str, Args]]:
    """The remote tables, the wraps and this device's entry; the recovery wrap comes right
    after the tables (`_register` tells "already there" by that statement's index)."""
    tag = s.tag
    statements: list[tuple[str, Args]] = [(sql, ()) for sql in SCHEMA]
    recovery_id = wrap_id(tag, s.epoch, "recovery")
    statements.append((INSERT_WRAP, (recovery_id, tag, s.epoch, "recovery", s.recovery_wrap)))
    if s.passphrase_wrap is not None:
        pw_id = wrap_id(tag, s.epoch, "passphrase")
        statements.append(
            (
                INSERT_WRAP + " ON CONFLICT DO NOTHING",
                (pw_id, tag, s.epoch, "passphrase", s.passphrase_wrap),
            )
        )
    statements += device_rows(s, crypto.device_public_bytes(session.device_key(s)))
    statements += own_entry_statements(session, s)  # name, MAC vouching for the entry
    if roster is not None:  # (a resumed init has no recovery key: its vault gets one later)
        statements += roster.statements
    return statements


def _register(
    session: Session,
    s: Settings,
    policy: RetryPolicy,
    resumed: bool = False,
    roster: Draft | None = None,
    new_vault: bool = False,
) -> InitResult:
    remote = session.remote(s)
    try:
        others = other_vaults(remote, session.agent_id, policy, s.tag)
    except AlreadyInitialised:
        _forget_pending(session, s)
        raise
    if others and not new_vault:  # kept pending: `init --new-vault` finishes it
        raise AlreadyInitialised(other_vaults_message(others))
    recovery_at = len(SCHEMA)
    try:
        remote.batch(_register_statements(session, s, roster), policy)
    except SqlError as exc:
        if exc.code != "SQLITE_CONSTRAINT" or exc.statement != recovery_at:
            raise
        # The recovery wrap exists: ours (an earlier attempt committed and its answer was
        # lost) or another vault's. Only our exact bytes mean "done".
        rs = remote.execute(
            "SELECT blob FROM key_wraps WHERE wrap_id = ?",
            (wrap_id(s.tag, s.epoch, "recovery"),),
            policy,
        )
        if rs.rows != ((s.recovery_wrap,),):
            _forget_pending(session, s)
            raise AlreadyInitialised(_held_message(session.agent_id)) from None
        # Ours: the rest of that batch committed with it (it is atomic).
    with session.db.transaction():
        session.db.execute(
            "UPDATE sync_state SET status = 'ready', registered = 1, last_error = NULL, "
            "last_error_at = NULL, retry_at = NULL WHERE agent_id = ?",
            (session.agent_id,),
        )
    return InitResult(
        url=s.url,
        agent_id=session.agent_id,
        device_id=s.device_id.hex(),
        epoch=s.epoch,
        passphrase=s.passphrase_wrap is not None,
        secret_store=s.secret_store,
        token_stored=False,
        resumed=resumed,
    )


def abandon_init(session: Session) -> None:
    """Forget an unfinished `init` (its keys and settings), e.g. when its recovery key could
    not be handed to anyone. A finished setup is never touched."""
    s = session.settings()
    if s is not None and s.status == "pending":
        _forget_pending(session, s)


def _forget_pending(session: Session, s: Settings) -> None:
    """Undo a pending init that can never finish."""
    session.secret_store(s).delete_all()
    with session.db.transaction():
        session.db.execute("DELETE FROM sync_state WHERE agent_id = ?", (session.agent_id,))
    session.hold_vault_key(None)


def set_token(
    session: Session, token: str, *, check: bool = True, policy: RetryPolicy | None = None
) -> str:
    """Store a new server token for this device in its secret store (after a device was removed
    and the old token revoked, or when one expires); with `check`, only once the server accepted
    it (one request). Returns the store's kind. The token is never logged or echoed."""
    s = session.require_ready()
    token = token.strip()
    if not token:
        raise InvalidInput("the token is empty")
    logs.add_secret(token)
    if check:
        session.use_token(token)
        session.remote(s).execute("SELECT 1", (), policy or RetryPolicy(max_attempts=2))
    store = session.secret_store(s)
    store.set(TOKEN, token)
    return store.kind
