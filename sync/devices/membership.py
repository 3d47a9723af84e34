"""The devices of a vault: list them, join a new one with the recovery key, remove a lost one.

Each device has its own X25519 key, kept in the secret store (`tiermem.sync.devices.secret_store`),
and a row in the server's ``devices`` table: its public key, a name sealed under the vault's id key
(the server never reads it; the default is the host name), when it was added and last seen, and a
MAC under the current epoch's key (`crypto.device_entry_mac`). What decides who belongs is the
signed device roster (`tiermem.sync.devices.roster_pin`): a joining device is signed onto it by the
recovery key or by the device that approved its pairing, and a rotation wraps the new key only to
devices on it, so a public key the server slipped into the table never receives it.

Joining (`add_device_with_recovery`, or pairing in `tiermem.sync.devices.pairing_exchange`) gives
the new home its own device key and device wrap; its data then arrives by pulling. Removing
(`remove_device`) revokes the entry and rotates the vault key (`rotation.rotate`): new data is out
of the removed device's reach; what it already downloaded is not.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tiermem.core import rows
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.sync import crypto, hlc, records
from tiermem.sync.crypto.roster import (
    RosterDevice,
    fingerprint,
    generate_signing_key,
    signing_public_bytes,
)
from tiermem.sync.devices import epochs, find_vault, roster_pin, rotation
from tiermem.sync.devices.enroll import Enrollment, pin, recovery_enrollment
from tiermem.sync.session import Session
from tiermem.sync.state import (
    AlreadyInitialised,
    HomeNotEmpty,
    NothingToRestore,
    Settings,
    insert_settings,
    read_settings,
    save_secrets,
    wrap_id,
)
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT, Args
from tiermem.sync.vault.remote import Remote
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.store import INSERT_WRAP
from tiermem.sync.vault.transport import to_base_url

__all__ = [
    "NAME_TABLE",
    "DeviceInfo",
    "JoinResult",
    "add_device_with_recovery",
    "check_empty_home",
    "clean_name",
    "default_name",
    "epoch_wraps",
    "join",
    "list_devices",
    "open_name",
    "own_entry_statements",
    "remove_device",
    "rename_device",
    "resolve_device",
    "seal_name",
]

NAME_TABLE: Final = "device-name"  # the `table` bound in a sealed device name
MAX_NAME: Final = 64


@dataclass(frozen=True)
class DeviceInfo:
    """``verified``: the entry is vouched for under the current key. ``added_by``: who signed
    it onto the roster ('' when the roster does not list it: a rotation leaves it out).
    ``fingerprint``: of this device's own key for this device, of the roster's (signed) key for
    a device on it, else of the key the server lists (``key_from`` says which: 'this device',
    'roster' or 'server'), so the owner compares a device's own screen with another's.
    ``key_differs``: the server lists another key than the roster's."""

    device_id: str
    name: str
    added: float | None
    last_seen: float | None
    revoked: bool
    revoked_at: float | None
    current: bool
    verified: bool
    added_by: str = ""  # on the signed roster: 'recovery' or the adding device's id
    fingerprint: str = ""
    key_from: str = ""
    key_differs: bool = False


@dataclass(frozen=True)
class JoinResult:
    agent_id: str
    url: str
    device_id: str
    name: str
    epoch: int
    via: str
    secret_store: str
    token_stored: bool


def default_name(device_id: bytes | None = None) -> str:
    """The host name, with the start of the device id: two desktops named after the same
    host stay distinguishable in `sync devices`."""
    host = (socket.gethostname() or "device")[: MAX_NAME - 6]
    return clean_name(host if device_id is None else f"{host} #{device_id.hex()[:4]}")


def clean_name(name: str) -> str:
    text = " ".join(name.split())
    if not text:
        raise InvalidInput("a device name must not be empty")
    if len(text) > MAX_NAME:
        raise InvalidInput(f"a device name has at most {MAX_NAME} characters")
    return text


# --------------------------------------------------------------------------- names, entries


def _name_context(agent_id: str, device_id: bytes) -> crypto.RecordContext:
    return crypto.RecordContext(agent_id, NAME_TABLE, device_id, "name", device_id)


def seal_name(id_key: bytes, agent_id: str, device_id: bytes, name: str) -> bytes:
    return crypto.seal_record(
        id_key, epochs.ID_EPOCH, _name_context(agent_id, device_id), name.encode()
    )


def open_name(id_key: bytes, agent_id: str, device_id: bytes, sealed: bytes | None) -> str:
    if sealed is None:
        return ""
    try:
        return crypto.open_record(id_key, _name_context(agent_id, device_id), sealed).decode()
    except (crypto.CryptoError, UnicodeDecodeError):
        return "?"


def _added(value: str) -> float | None:
    try:
        return hlc.parse(value).wall_ms / 1000
    except ValueError:
        return None


def _stamp(now: float, device_id: bytes) -> str:
    return str(hlc.Hlc(max(int(now * 1000), 0), 0, device_id.hex()))


def own_entry_statements(
    engine: Session, s: Settings, *, name: str | None = None
) -> list[tuple[str, Args]]:
    """Upsert this device's entry: public key, name (sealed; the host name unless one is given
    or set), last seen, and the MAC under the current key. No remote read at epoch 1 (so `sync
    init` can append these to its registration batch); cheap to append to any batch."""
    tag = s.tag
    public = crypto.device_public_bytes(engine.device_key(s))
    epoch, key = epochs.current_key(engine, s)
    id_key = key if epoch == epochs.ID_EPOCH else epochs.id_key(engine)
    added = _stamp(s.created_at, s.device_id)
    sealed = seal_name(
        id_key, engine.agent_id, s.device_id, clean_name(name or default_name(s.device_id))
    )
    where = " WHERE device_id = ? AND agent_tag = ?"
    return [
        (
            "INSERT INTO devices (device_id, agent_tag, public_key, added) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (s.device_id, tag, public, added),
        ),
        # `sync init` registers with added = '0' (no clock reading yet).
        ("UPDATE devices SET added = ?" + where + " AND added = '0'", (added, s.device_id, tag)),
        ("UPDATE devices SET last_seen = ?" + where, (engine.mem.now(), s.device_id, tag)),
        (
            "UPDATE devices SET name = ?" + where + ("" if name else " AND name IS NULL"),
            (sealed, s.device_id, tag),
        ),
        epochs.entry_mac_statement(engine, s.device_id, public, epoch, key),
    ]


def _touch(engine: Session, s: Settings, name: str | None = None) -> None:
    """Refresh this device's own entry (one request)."""
    statements = own_entry_statements(engine, s, name=name)
    engine.remote(s).send(lambda c: c.batch(statements), RetryPolicy())


def rename_device(engine: Session, name: str) -> None:
    """Name this device in the vault's device list (sealed; the server never reads it)."""
    s = engine.require_ready()
    _touch(engine, s, clean_name(name))


def list_devices(engine: Session, *, touch: bool = True) -> list[DeviceInfo]:
    """The vault's devices, oldest first. Adopts a newer epoch first; with `touch`, refreshes
    this device's own entry (last seen, MAC). A removed device still lists (as removed)."""
    s = engine.require_ready()
    revoked_here = False
    try:
        epochs.refresh_epoch(engine)
    except epochs.DeviceRevoked:
        revoked_here = True
    s = engine.require_ready()
    if touch and not revoked_here:
        _touch(engine, s)
    view = roster_pin.verified(engine, fresh=True)
    on_roster = {} if view is None else view.devices
    epoch, key = epochs.current_key(engine, s)
    id_key = epochs.id_key(engine)
    own_public = crypto.device_public_bytes(engine.device_key(s))
    out = []
    for e in epochs.device_entries(engine):
        current = e.device_id == s.device_id
        listed = on_roster.get(e.device_id)
        public, key_from = e.public_key, "server"
        if listed is not None and not listed.removed:
            public, key_from = listed.box_public, "roster"
        if current:
            public, key_from = own_public, "this device"
        out.append(
            DeviceInfo(
                device_id=e.device_id.hex(),
                name=open_name(id_key, engine.agent_id, e.device_id, e.name),
                added=_added(e.added),
                last_seen=e.last_seen,
                revoked=e.revoked,
                revoked_at=e.revoked_at,
                current=current,
                verified=not e.revoked and e.verified_at(engine.agent_id, epoch, key),
                added_by=_added_by(listed),
                fingerprint=fingerprint(public),
                key_from=key_from,
                key_differs=public != e.public_key,
            )
        )
    return out


def _added_by(listed: RosterDevice | None) -> str:
    if listed is None or listed.removed:
        return ""
    return listed.added_by


def resolve_device(engine: Session, given: str, *, active: bool = False) -> bytes:
    """A device id from its hex form or a unique prefix of it (at least 4 digits); with
    `active`, a removed device is `NotFound`."""
    text = given.strip().lower().rstrip("…")
    if len(text) < 4 or any(c not in "0123456789abcdef" for c in text):
        raise InvalidInput("give a device id (hex, at least 4 digits; see `tiermem sync devices`)")
    matches = [e for e in epochs.device_entries(engine) if e.device_id.hex().startswith(text)]
    if not matches:
        raise NotFound(f"no device {text} in this vault (see `tiermem sync devices`)")
    if len(matches) > 1:
        raise InvalidInput(f"{text} matches {len(matches)} devices; give more digits")
    if active and matches[0].revoked:
        raise NotFound(f"device {matches[0].device_id.hex()} is already removed")
    return matches[0].device_id


# ------------------------------------------------------------------------------------ remove


def remove_device(
    engine: Session,
    device_id: str | bytes,
    recovery_key: bytes,
    *,
    passphrase: str | None = None,
    keep: tuple[bytes, ...] = (),
    confirmed: Mapping[bytes, str] | None = None,
    policy: RetryPolicy | None = None,
) -> rotation.RotationResult:
    """Revoke a (lost) device, and the devices it added (but those in `keep`; `confirmed`: see
    `rotation.plan_rotation`), and rotate the vault key to a new epoch for future data.

    Needs the recovery key (see `rotation.rotate`); with the passphrase the new epoch keeps a
    passphrase wrap, without it the passphrase stops unlocking new data (the result says so).
    Data the removed device already had is NOT protected by this (`rotation.ROTATION_NOTE`)."""
    target = device_id if isinstance(device_id, bytes) else resolve_device(engine, device_id)
    return rotation.rotate(
        engine,
        recovery_key,
        passphrase=passphrase,
        remove=target,
        keep=keep,
        confirmed=confirmed,
        policy=policy,
    )


# -------------------------------------------------------------------------------------- join


def check_empty_home(mem: Memory) -> None:
    if read_settings(mem.db, mem.agent_id) is not None:
        raise AlreadyInitialised(
            f"sync is already set up for agent {mem.agent_id!r} in this home; a new device "
            "joins from a new home (--home DIR)"
        )
    if rows.holds_memory(mem.db, mem.agent_id):
        raise HomeNotEmpty(
            f"{mem.home.root} already holds memory for agent {mem.agent_id!r}; join from an "
            "empty home (--home DIR): the vault's memory arrives with the first pull"
        )


def epoch_wraps(
    remote: Remote, tag: bytes, agent_id: str, policy: RetryPolicy, epoch: int | None = None
) -> tuple[int, dict[str, bytes]]:
    """The newest (or the given) epoch of the vault filed under `tag` and its
    recovery/passphrase wraps."""
    rows = find_vault.secret_wraps(
        lambda sql, args: remote.execute(sql, args, policy), remote.url, tag
    )
    if not rows:
        raise NothingToRestore(
            f"{remote.url} holds no vault for agent {agent_id!r} (set it up with "
            "`tiermem sync init` on the first device)"
        )
    chosen, wraps = find_vault.wraps_at(rows, epoch)
    if "recovery" not in wraps:
        raise NothingToRestore(f"the vault of agent {agent_id!r} has no recovery key wrap")
    return chosen, wraps


def add_device_with_recovery(
    mem: Memory,
    url: str,
    token: str | None,
    recovery_key: bytes,
    name: str | None = None,
    *,
    store_token: bool = True,
    timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
    policy: RetryPolicy | None = None,
) -> JoinResult:
    """Join this (empty) home to the existing vault of its agent as a new device, unlocking the
    current vault key with the recovery key. Generates this device's keys (secret store), wraps
    the vault key to it, registers it and signs it onto the roster, in one remote batch."""
    policy = policy or RetryPolicy()
    check_empty_home(mem)
    with Remote(to_base_url(url), token, timeout=timeout, transport=transport) as remote:
        vault = find_vault.open_with_recovery_key(
            lambda sql, args: remote.execute(sql, args, policy),
            remote.url,
            mem.agent_id,
            recovery_key,
        )
        enroll = recovery_enrollment(
            remote, mem.agent_id, vault.tag, recovery_key, vault.epoch, vault.key, policy
        )
        return join(
            mem,
            remote,
            token,
            crypto.generate_device_key(),
            (vault.tag, vault.epoch, vault.key),
            vault.wraps,
            name=name,
            via="recovery-key",
            store_token=store_token,
            policy=policy,
            enroll=enroll,
        )


@dataclass(frozen=True)
class _NewDevice:
    device_id: bytes
    device_key: X25519PrivateKey
    signing_key: Ed25519PrivateKey


def join(
    mem: Memory,
    remote: Remote,
    token: str | None,
    device_key: X25519PrivateKey,
    vault: tuple[bytes, int, bytes],
    wraps: dict[str, bytes],
    *,
    name: str | None,
    via: str,
    store_token: bool,
    policy: RetryPolicy,
    enroll: Enrollment,
    device_id: bytes | None = None,
    signing_key: Ed25519PrivateKey | None = None,
) -> JoinResult:
    """Set this home up as a new device of a vault (`vault`: its tag, an epoch and that epoch's
    key, which this device already holds)."""
    check_empty_home(mem)
    agent = mem.agent_id
    tag, epoch, vault_key = vault
    new = _NewDevice(device_id or os.urandom(16), device_key, signing_key or generate_signing_key())
    name = clean_name(name) if name is not None else default_name(new.device_id)
    device_wrap = crypto.wrap_for_device(
        vault_key,
        device_key.public_key(),
        crypto.WrapContext(agent, epoch, wrap_id(tag, epoch, "device", new.device_id)),
    )
    ref = uuid.uuid4().hex
    store, token_stored = save_secrets(
        mem.home.root, ref, device_key, token if store_token else None, new.signing_key
    )
    settings = Settings(
        agent_id=agent,
        status="pending",
        url=remote.url,
        device_id=new.device_id,
        epoch=epoch,
        secret_ref=ref,
        secret_store=store.kind,
        device_wrap=device_wrap,
        recovery_wrap=wraps["recovery"],
        passphrase_wrap=wraps.get("passphrase"),
        created_at=mem.now(),
        agent_tag=tag,
    )
    try:
        with mem.db.transaction():
            insert_settings(mem.db, settings)
        statements = _join_statements(mem, remote, settings, vault_key, new, name, policy)
        draft = _roster_add(settings, enroll, new)
        remote.batch(statements + ([] if draft is None else draft.statements), policy)
        with mem.db.transaction():
            mem.db.execute(
                "UPDATE sync_state SET status = 'ready', registered = 1 WHERE agent_id = ?",
                (agent,),
            )
    except BaseException:
        store.delete_all()
        with mem.db.transaction():
            mem.db.execute("DELETE FROM sync_state WHERE agent_id = ?", (agent,))
        raise
    pin(mem, enroll, draft)
    return JoinResult(
        agent_id=agent,
        url=remote.url,
        device_id=new.device_id.hex(),
        name=name,
        epoch=epoch,
        via=via,
        secret_store=store.kind,
        token_stored=token_stored,
    )


def _roster_add(s: Settings, enroll: Enrollment, new: _NewDevice) -> roster_pin.Draft | None:
    """The new device's signed ``add`` entry, when this side signs it."""
    if enroll.view is None or enroll.signer is None:
        return None
    draft = roster_pin.Draft(s.agent_id, s.tag, enroll.view)
    draft.add(
        new.device_id,
        crypto.device_public_bytes(new.device_key),
        signing_public_bytes(new.signing_key),
        enroll.signer,
        enroll.by,
    )
    return draft


def _join_statements(
    mem: Memory,
    remote: Remote,
    s: Settings,
    vault_key: bytes,
    new: _NewDevice,
    name: str,
    policy: RetryPolicy,
) -> list[tuple[str, Args]]:
    """The new device's wrap and its entry in the device list (sealed name, MAC)."""
    agent, epoch, device_id = mem.agent_id, s.epoch, s.device_id
    public = crypto.device_public_bytes(new.device_key)
    tag = s.tag
    id_key = vault_key
    if epoch != epochs.ID_EPOCH:
        chains = _chain_blobs(remote, tag, epoch, policy)
        id_key = epochs.unlock_chain(agent, tag, epoch, vault_key, chains, epochs.ID_EPOCH)[
            epochs.ID_EPOCH
        ]
    mac = crypto.device_entry_mac(vault_key, agent, epoch, device_id, public)
    return [
        (
            INSERT_WRAP + " ON CONFLICT DO NOTHING",
            (wrap_id(tag, epoch, "device", device_id), tag, epoch, "device", s.device_wrap),
        ),
        (
            "INSERT INTO devices (device_id, agent_tag, public_key, added, name, last_seen, "
            "mac, mac_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                device_id,
                tag,
                public,
                _stamp(mem.now(), device_id),
                seal_name(id_key, agent, device_id, name),
                mem.now(),
                mac,
                epoch,
            ),
        ),
    ]


def _chain_blobs(remote: Remote, tag: bytes, below: int, policy: RetryPolicy) -> dict[int, bytes]:
    rows = remote.execute(
        "SELECT epoch, blob FROM key_wraps WHERE agent_tag = ? AND kind = 'chain' AND epoch < ?",
        (tag, below),
        policy,
    ).rows
    return {records.server_int(e): records.server_blob(b) for e, b in rows}
