"""Vault keys by epoch: the current key, older keys through the chain, the epoch guard, the device
list and rotation (the wrap checks are in `tiermem.sync.wrapcheck`).

Every agent's vault has a key per *epoch*. The current epoch's key (``VK_E``) is wrapped to each
device, to the recovery key and optionally to the passphrase (`crypto`). When a device is
removed, `rotate` makes epoch ``E+1`` with a fresh random key, wraps it to the devices that
remain (and the recovery key, and the passphrase when it is given), and writes a *chain* wrap:
``VK_E`` sealed under ``VK_{E+1}``. So a current device reaches every older key by walking the
chain down, while the removed device, which never gets ``VK_{E+1}``, cannot open anything sealed
after the rotation. What it already downloaded (and the older keys it held) stays readable to
it: rotation protects future data only.

Record ids never change across epochs: they are keyed with the *id key*, the epoch-1 key
(`id_key`).

A device learns about a newer epoch from the server (`refresh_epoch`, also done by `epoch_key`
when a record names a newer epoch). It adopts it only when its own device wrap opens the new key
*and* the chain leads from the new key back to the key it already holds: a server that invents
an epoch of its own (wrapping a key it knows to this device's public key) cannot make that
chain, because it never had the old key.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tiermem.core.errors import (
    DeviceRevoked,
    InvalidInput,
    NotFound,
    RotationConflict,
)
from tiermem.sync import crypto, records
from tiermem.sync.hrana import Args, ResultSet, SqlError, Value
from tiermem.sync.retry import RetryPolicy
from tiermem.sync.session import Session
from tiermem.sync.state import INSERT_WRAP, Settings, agent_tag, wrap_id

__all__ = [
    "CHAIN",
    "EPOCH_GUARD_SQL",
    "ID_EPOCH",
    "ROTATION_NOTE",
    "SELECT_DEVICES",
    "DeviceEntry",
    "DeviceRevoked",
    "RotationConflict",
    "RotationResult",
    "chain_wrap_id",
    "current_key",
    "device_entries",
    "entry_mac_statement",
    "epoch_guard",
    "epoch_key",
    "execute",
    "id_key",
    "is_epoch_guard_failure",
    "query",
    "refresh_epoch",
    "remember",
    "rotate",
    "unlock_chain",
]

CHAIN: Final = "chain"
ID_EPOCH: Final = 1


# Epoch keys already unwrapped by an engine (they never change for a given vault and epoch).
_CACHE: weakref.WeakKeyDictionary[Session, dict[int, bytes]] = weakref.WeakKeyDictionary()


def _cache(engine: Session) -> dict[int, bytes]:
    return _CACHE.setdefault(engine, {})


def remember(engine: Session, keys: Mapping[int, bytes]) -> None:
    """Keep unwrapped epoch keys for this engine (after a rotation or a join)."""
    _cache(engine).update(keys)


def chain_wrap_id(agent_id: str, epoch: int) -> bytes:
    """The id of the wrap holding epoch `epoch`'s key under epoch ``epoch + 1``'s key."""
    return wrap_id(agent_id, epoch, CHAIN)


def execute(
    engine: Session, sql: str, args: Args = (), policy: RetryPolicy | None = None
) -> ResultSet:
    """One remote statement through the engine's client, with its retries."""
    return engine.remote(engine.require_ready()).execute(sql, args, policy)


def query(
    engine: Session, sql: str, args: Args = (), policy: RetryPolicy | None = None
) -> tuple[tuple[Value, ...], ...]:
    """The rows of one remote statement (`execute`)."""
    return execute(engine, sql, args, policy).rows


def current_key(engine: Session, s: Settings | None = None) -> tuple[int, bytes]:
    """(epoch, key) as this device knows them locally (no network)."""
    s = s or engine.require_ready()
    cache = _cache(engine)
    if s.epoch not in cache:
        context = crypto.WrapContext(
            engine.agent_id, s.epoch, wrap_id(engine.agent_id, s.epoch, "device", s.device_id)
        )
        cache[s.epoch] = crypto.unwrap_for_device(s.device_wrap, engine.device_key(s), context)
    return s.epoch, cache[s.epoch]


def unlock_chain(
    agent_id: str, top_epoch: int, top_key: bytes, chains: Mapping[int, bytes], down_to: int
) -> dict[int, bytes]:
    """Walk the chain from `top_epoch`'s key down to `down_to`: ``{epoch: key}``.

    `chains` maps an epoch to its chain wrap (that epoch's key under the next one's). Pure, so a
    restore holding only the recovery key's epoch can use it too. A missing or failing link is
    `crypto.TamperedData`."""
    keys = {top_epoch: top_key}
    key = top_key
    for epoch in range(top_epoch - 1, down_to - 1, -1):
        blob = chains.get(epoch)
        if blob is None:
            raise crypto.TamperedData(
                f"the key chain of this vault has no link for epoch {epoch}: older data "
                "cannot be opened"
            )
        context = crypto.WrapContext(agent_id, epoch, chain_wrap_id(agent_id, epoch))
        try:
            key = crypto.unwrap_chain(blob, key, context)
        except crypto.WrongKey:
            raise crypto.TamperedData(
                f"the key chain of this vault is damaged at epoch {epoch}"
            ) from None
        keys[epoch] = key
    return keys


def _chains(engine: Session, low: int, high: int) -> dict[int, bytes]:
    rows = query(
        engine,
        "SELECT epoch, blob FROM key_wraps WHERE agent_tag = ? AND kind = 'chain' "
        "AND epoch >= ? AND epoch < ?",
        (agent_tag(engine.agent_id), low, high),
    )
    return {int(str(e)): records.server_blob(b) for e, b in rows}


def epoch_key(engine: Session, epoch: int) -> bytes:
    """The vault key of `epoch`: the current one from this device's wrap, an older one through
    the chain (one remote read, then cached), a newer one after adopting it (`refresh_epoch`)."""
    cache = _cache(engine)
    if epoch in cache:
        return cache[epoch]
    s = engine.require_ready()
    if epoch > s.epoch:
        refresh_epoch(engine)
        s = engine.require_ready()
        if epoch > s.epoch:
            raise crypto.TamperedData(
                f"a record names key epoch {epoch}, but this vault's newest epoch is {s.epoch}"
            )
    if epoch < ID_EPOCH:
        raise crypto.TamperedData(f"a record names key epoch {epoch}, which never exists")
    top, key = current_key(engine, s)
    if epoch == top:
        return key
    cache.update(unlock_chain(engine.agent_id, top, key, _chains(engine, epoch, top), epoch))
    return cache[epoch]


def id_key(engine: Session) -> bytes:
    """The key of record ids: the epoch-1 vault key, so ids stay the same after rotations."""
    return epoch_key(engine, ID_EPOCH)


@dataclass(frozen=True)
class _EpochWraps:
    recovery: bytes | None = None
    passphrase: bytes | None = None
    chain: bytes | None = None
    own_device: bytes | None = None


def _wraps_from(engine: Session, s: Settings) -> dict[int, _EpochWraps]:
    """This device's view of the key wraps of epochs ≥ its own (one remote read)."""
    rows = query(
        engine,
        "SELECT epoch, kind, wrap_id, blob FROM key_wraps WHERE agent_tag = ? AND epoch >= ? "
        "AND kind IN ('recovery', 'passphrase', 'chain', 'device')",
        (agent_tag(engine.agent_id), s.epoch),
    )
    out: dict[int, _EpochWraps] = {}
    for e, kind, wid, blob in rows:
        epoch = int(str(e))
        current = out.get(epoch, _EpochWraps())
        if kind == "device":
            if wid != wrap_id(engine.agent_id, epoch, "device", s.device_id):
                continue
            current = dataclasses.replace(current, own_device=records.server_blob(blob))
        elif kind in ("recovery", "passphrase", "chain"):
            current = dataclasses.replace(current, **{str(kind): records.server_blob(blob)})
        out[epoch] = current
    return out


def refresh_epoch(engine: Session) -> int:
    """Adopt the newest epoch on the server, if newer than this device's (one remote read).

    Raises `DeviceRevoked` when the newest epoch has no wrap for this device, and
    `crypto.TamperedData` when its key does not chain back to the key this device holds."""
    s = engine.require_ready()
    wraps = _wraps_from(engine, s)
    newest = max((e for e, w in wraps.items() if w.recovery is not None), default=s.epoch)
    if newest <= s.epoch:
        return s.epoch
    top = wraps[newest]
    if top.own_device is None:
        raise DeviceRevoked(
            f"this device was removed from the vault of agent {engine.agent_id!r} (the key was "
            f"rotated to epoch {newest} without it, or the server withholds its key wrap): it "
            "cannot read or write new data; pair it again (`tiermem sync add-device`) in a new "
            "home"
        )
    context = crypto.WrapContext(
        engine.agent_id, newest, wrap_id(engine.agent_id, newest, "device", s.device_id)
    )
    new_key = crypto.unwrap_for_device(top.own_device, engine.device_key(s), context)
    chains = {e: w.chain for e, w in wraps.items() if w.chain is not None}
    keys = unlock_chain(engine.agent_id, newest, new_key, chains, s.epoch)
    _, held = current_key(engine, s)
    if keys[s.epoch] != held:
        raise crypto.TamperedData(
            f"the server offers a key epoch {newest} that does not lead back to this device's "
            "key: refusing it (the server may be trying to slip in a key of its own)"
        )
    with engine.db.transaction():
        engine.db.execute(
            "UPDATE sync_state SET epoch = ?, device_wrap = ?, recovery_wrap = ?, "
            "passphrase_wrap = ? WHERE agent_id = ? AND epoch = ?",
            (newest, top.own_device, top.recovery, top.passphrase, engine.agent_id, s.epoch),
        )
    engine.hold_vault_key(None)
    remember(engine, keys)
    return newest


# ------------------------------------------------------------------------------ epoch guard

# Integer overflow is the one error plain SQL can raise on demand: abs(INT64_MIN).
EPOCH_GUARD_SQL: Final = (
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM key_wraps WHERE agent_tag = ? AND kind = 'recovery' "
    "AND epoch > ?) THEN abs(-9223372036854775807 - 1) ELSE 0 END"
)


def epoch_guard(agent_id: str, epoch: int) -> tuple[str, Args]:
    """A statement for the start of a push batch: it fails the whole (atomic) batch when the
    server holds an epoch newer than `epoch`, so a device that missed a rotation never commits
    records sealed under the old key (which the removed device holds), at no extra request.
    On that failure (`is_epoch_guard_failure`): `refresh_epoch`, seal again, resend."""
    return EPOCH_GUARD_SQL, (agent_tag(agent_id), epoch)


def is_epoch_guard_failure(exc: SqlError, index: int) -> bool:
    """Whether a batch failed at its epoch guard (statement `index`)."""
    return exc.statement == index and "overflow" in str(exc).lower()


# ------------------------------------------------------------------------------ device list


@dataclass(frozen=True)
class DeviceEntry:
    """One row of the server's ``devices`` table, as stored (nothing decrypted)."""

    device_id: bytes
    public_key: bytes
    added: str
    name: bytes | None
    last_seen: float | None
    revoked_at: float | None
    revoked_epoch: int | None
    mac: bytes | None
    mac_epoch: int | None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def verified_at(self, agent_id: str, epoch: int, key: bytes) -> bool:
        """Authenticated under the key of `epoch` (so added or kept by a holder of that key)."""
        if self.mac is None or self.mac_epoch != epoch:
            return False
        return crypto.verify_device_entry(
            self.mac, key, agent_id, epoch, self.device_id, self.public_key
        )


SELECT_DEVICES: Final = (
    "SELECT device_id, public_key, added, name, last_seen, revoked_at, revoked_epoch, mac, "
    "mac_epoch FROM devices WHERE agent_tag = ? ORDER BY added, device_id"
)


def _opt_float(value: Value) -> float | None:
    return None if value is None else float(str(value))


def _opt_int(value: Value) -> int | None:
    return None if value is None else int(str(value))


def _opt_blob(value: Value) -> bytes | None:
    return None if value is None else records.server_blob(value)


def device_entries(engine: Session) -> list[DeviceEntry]:
    """The server's device list for this agent (one remote read)."""
    rows = query(engine, SELECT_DEVICES, (agent_tag(engine.agent_id),))
    return [
        DeviceEntry(
            device_id=records.server_blob(r[0]),
            public_key=records.server_blob(r[1]),
            added=str(r[2]),
            name=_opt_blob(r[3]),
            last_seen=_opt_float(r[4]),
            revoked_at=_opt_float(r[5]),
            revoked_epoch=_opt_int(r[6]),
            mac=_opt_blob(r[7]),
            mac_epoch=_opt_int(r[8]),
        )
        for r in rows
    ]


def entry_mac_statement(
    engine: Session, device_id: bytes, public_key: bytes, epoch: int, key: bytes
) -> tuple[str, Args]:
    """Vouch for a device entry under the key of `epoch`."""
    mac = crypto.device_entry_mac(key, engine.agent_id, epoch, device_id, public_key)
    return (
        "UPDATE devices SET mac = ?, mac_epoch = ? WHERE device_id = ? AND agent_tag = ? "
        "AND public_key = ? AND revoked_at IS NULL",
        (mac, epoch, device_id, agent_tag(engine.agent_id), public_key),
    )


# --------------------------------------------------------------------------------- rotation


@dataclass(frozen=True)
class RotationResult:
    """``kept``: devices that got the new key. ``skipped``: device entries left out because
    they are not authenticated under the old key (the server may have added them). ``passphrase``:
    'kept', 'dropped' (it was set but not given) or 'none'."""

    old_epoch: int
    new_epoch: int
    removed: str | None
    kept: list[str]
    skipped: list[str]
    passphrase: str
    note: str


ROTATION_NOTE: Final = (
    "Data written from now on is sealed under the new key, which the removed device never "
    "gets. Data it already downloaded, and the older keys it held, are NOT protected by this: "
    "treat anything it could read before as known to whoever has it."
)


def rotate(
    engine: Session,
    recovery_key: bytes,
    *,
    passphrase: str | None = None,
    remove: bytes | None = None,
    now: float | None = None,
    policy: RetryPolicy | None = None,
) -> RotationResult:
    """Start epoch E+1 with a fresh vault key (one atomic remote batch), optionally revoking
    the device `remove`.

    The recovery key is required: its wrap is symmetric (only its holder can wrap a new key to
    it), and asking for it means a stolen device alone cannot lock the owner's other devices
    out. It is checked against the current recovery wrap before anything is written. With the
    passphrase the new key gets a passphrase wrap too; without it, the passphrase stops working
    from this epoch on (say so). Older epochs stay readable through the chain wrap."""
    policy = policy or RetryPolicy()
    refresh_epoch(engine)
    s = engine.require_ready()
    agent = engine.agent_id
    old_epoch, old_key = current_key(engine, s)
    params = _check_secrets(agent, s, old_epoch, old_key, recovery_key, passphrase)
    keep_passphrase = params is not None
    kept, skipped = _devices_to_keep(engine, s, remove, old_epoch, old_key)
    new = _NewEpoch(engine, old_epoch, old_key, recovery_key)
    new.add_passphrase(passphrase if keep_passphrase else None, params)
    new.add_devices(s.device_id, kept)
    if remove is not None:
        new.statements.append(
            (
                "UPDATE devices SET revoked_at = ?, revoked_epoch = ?, mac = NULL, "
                "mac_epoch = NULL WHERE device_id = ? AND agent_tag = ?",
                (engine.mem.now() if now is None else now, new.epoch, remove, agent_tag(agent)),
            )
        )
    _send_rotation(engine, s, new, policy)
    with engine.db.transaction():
        engine.db.execute(
            "UPDATE sync_state SET epoch = ?, device_wrap = ?, recovery_wrap = ?, "
            "passphrase_wrap = ? WHERE agent_id = ?",
            (new.epoch, new.own_wrap, new.recovery, new.passphrase, agent),
        )
    engine.hold_vault_key(None)
    remember(engine, {new.epoch: new.key, old_epoch: old_key})
    pw_state = "kept" if keep_passphrase else "dropped"
    if s.passphrase_wrap is None:
        pw_state = "none"
    return RotationResult(
        old_epoch=old_epoch,
        new_epoch=new.epoch,
        removed=None if remove is None else remove.hex(),
        kept=[d.hex() for d, _ in kept],
        skipped=skipped,
        passphrase=pw_state,
        note=ROTATION_NOTE if remove is not None else "",
    )


def _check_secrets(
    agent: str,
    s: Settings,
    old_epoch: int,
    old_key: bytes,
    recovery_key: bytes,
    passphrase: str | None,
) -> crypto.KdfParameters | None:
    """Check the recovery key (and the passphrase, when one is set and given) against the
    current wraps; returns the passphrase's KDF parameters when it is kept, else None."""
    recovery_context = crypto.WrapContext(agent, old_epoch, wrap_id(agent, old_epoch, "recovery"))
    if crypto.unwrap_with_recovery_key(s.recovery_wrap, recovery_key, recovery_context) != old_key:
        raise crypto.WrongKey("the recovery key does not unlock this vault")
    if s.passphrase_wrap is None or passphrase is None:
        return None
    pw_context = crypto.WrapContext(agent, old_epoch, wrap_id(agent, old_epoch, "passphrase"))
    crypto.unwrap_with_passphrase(s.passphrase_wrap, passphrase, pw_context)
    parsed = crypto.parse_wrap(s.passphrase_wrap)
    assert isinstance(parsed, crypto.PassphraseWrap)
    return parsed.params


def _devices_to_keep(
    engine: Session, s: Settings, remove: bytes | None, old_epoch: int, old_key: bytes
) -> tuple[list[tuple[bytes, bytes]], list[str]]:
    """(device id, public key) of the devices that get the new key, this one first, and the
    hex ids of entries left out because the old key does not vouch for them."""
    entries = device_entries(engine)
    own_public = crypto.device_public_bytes(engine.device_key(s))
    if remove is not None:
        if remove == s.device_id:
            raise InvalidInput(
                "this is the device you are using; remove it from another device (or just "
                "delete this home)"
            )
        if not any(e.device_id == remove and not e.revoked for e in entries):
            raise NotFound(f"no device {remove.hex()} in this vault (or it is already removed)")
    kept: list[tuple[bytes, bytes]] = [(s.device_id, own_public)]
    skipped: list[str] = []
    for entry in entries:
        if entry.revoked or entry.device_id in (remove, s.device_id):
            continue
        if entry.verified_at(engine.agent_id, old_epoch, old_key):
            kept.append((entry.device_id, entry.public_key))
        else:
            skipped.append(entry.device_id.hex())
    return kept, skipped


class _NewEpoch:
    """The next epoch's key and the wraps of it one rotation writes (statement 0: the recovery
    wrap, whose conflict tells a concurrent rotation)."""

    def __init__(
        self, engine: Session, old_epoch: int, old_key: bytes, recovery_key: bytes
    ) -> None:
        self.engine = engine
        self.agent = agent = engine.agent_id
        self.tag = tag = agent_tag(agent)
        self.epoch = epoch = old_epoch + 1
        self.key = key = crypto.generate_vault_key()
        self.recovery = crypto.wrap_with_recovery_key(
            key, recovery_key, crypto.WrapContext(agent, epoch, wrap_id(agent, epoch, "recovery"))
        )
        chain_id = chain_wrap_id(agent, old_epoch)
        chain = crypto.wrap_chain(
            old_key, key, epoch, crypto.WrapContext(agent, old_epoch, chain_id)
        )
        self.statements: list[tuple[str, Args]] = [
            (
                INSERT_WRAP,
                (wrap_id(agent, epoch, "recovery"), tag, epoch, "recovery", self.recovery),
            ),
            (INSERT_WRAP, (chain_id, tag, old_epoch, CHAIN, chain)),
        ]
        self.passphrase: bytes | None = None
        self.own_wrap = b""

    def add_passphrase(self, passphrase: str | None, params: crypto.KdfParameters | None) -> None:
        if passphrase is None or params is None:
            return
        pw_id = wrap_id(self.agent, self.epoch, "passphrase")
        self.passphrase = crypto.wrap_with_passphrase(
            self.key, passphrase, crypto.WrapContext(self.agent, self.epoch, pw_id), params=params
        )
        self.statements.append(
            (INSERT_WRAP, (pw_id, self.tag, self.epoch, "passphrase", self.passphrase))
        )

    def add_devices(self, own_id: bytes, kept: list[tuple[bytes, bytes]]) -> None:
        """A wrap of the new key and a fresh entry MAC for each device kept."""
        for device_id, public in kept:
            dev_id = wrap_id(self.agent, self.epoch, "device", device_id)
            blob = crypto.wrap_for_device(
                self.key,
                crypto.load_device_public_key(public),
                crypto.WrapContext(self.agent, self.epoch, dev_id),
            )
            if device_id == own_id:
                self.own_wrap = blob
            self.statements.append((INSERT_WRAP, (dev_id, self.tag, self.epoch, "device", blob)))
            self.statements.append(
                entry_mac_statement(self.engine, device_id, public, self.epoch, self.key)
            )


def _send_rotation(engine: Session, s: Settings, new: _NewEpoch, policy: RetryPolicy) -> None:
    """One atomic batch. A conflict on the new recovery wrap is ours (an earlier attempt whose
    answer was lost) when the server holds our exact bytes, else another device's rotation."""
    try:
        engine.remote(s).batch(new.statements, policy)
    except SqlError as exc:
        if exc.statement != 0:
            raise
        rows = query(
            engine,
            "SELECT blob FROM key_wraps WHERE wrap_id = ?",
            (wrap_id(new.agent, new.epoch, "recovery"),),
            policy,
        )
        if rows != ((new.recovery,),):
            raise RotationConflict(
                f"another device rotated the key of agent {new.agent!r} to epoch {new.epoch} at "
                "the same moment; nothing was changed here; run the command again"
            ) from None
