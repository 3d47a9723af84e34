"""Vault keys by epoch: the current key, older keys through the chain, the epoch floor, the
epoch guard and the device list (rotation is `tiermem.sync.devices.rotation`, the wrap checks
`tiermem.sync.restore.wrapcheck`, the signed device roster `tiermem.sync.devices.roster_pin`).

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

Every device keeps the highest epoch it has authenticated (its *floor*: from its own wraps, the
signed rotation entries of the roster, or the device that paired it) and never seals new data
under an older epoch (`sealing_key`), whatever the server shows.

**Records under an ended epoch** (`record_key`). A removed device still holds the old key and
(until the token is rotated) the token, so it can seal records under the old epoch and push them
after the rotation. Which of those were written before the rotation cannot be told from the
record: its version is the writer's own clock (a removed device sets it back at will), and the
server's order (``seq``, the pull cursor) is whatever the server says (a hostile server, or the
removed device with its token, renumbers or inserts rows anywhere). So a record is judged by
what this device knew when it received it: once this device has authenticated epoch E+1 (its
own wrap opens it and the chain leads back to the key it held, checked against the signed
rotation entry), a record under an epoch ≤ E that it receives from then on is refused (set
aside as rejected, as tampered rows are), whatever its version or place, unless the signed
rotation that ended its epoch names it: the rotating device lists in that entry (its *tail*)
the digest (`crypto.roster.row_digest`: id, version and exact envelope) of every row under the
ended epoch that the server held after its own pull cursor, i.e. what it had not read yet and
that was written before the rotation. The tail is signed with the recovery key, so neither
the server nor the removed device can add to it, and a row rewritten under a listed id and
version has another digest. A pull learns of a newer epoch before it reads anything
(`refresh_epoch` first), so a removed device's records are refused by every device that has
seen the rotation, and by the rotating device at once.

Why not the other candidates: the writer's version is the writer's clock; the server's order
is the server's word; a per-device bound (the last manifest number under the old epoch) still
lets the removed device forge a push with a number the reader has not seen yet, since it holds
the old key and can write under any device's id.

What this costs: a row written under the old epoch before the rotation that the rotating
device had already pulled (so not in its tail) but this device had not is refused here (it
stays on the devices that pulled it; `sync status` lists it). What stays open: a device the
server hides the rotation from keeps accepting old-epoch records until it learns of it (no one
can tell a device about an epoch the server withholds; once it has learnt of it, `sealing_key`
refuses to write under the old key). A restore has no such moment: it refuses the rows under an
ended epoch that lie past the server position the signed rotation names (`restore.verify`).
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tiermem.core.errors import (
    DeviceRevoked,
    EpochRollback,
    RotationConflict,
    SupersededEpoch,
)
from tiermem.sync import crypto, records
from tiermem.sync.crypto.roster import epoch_check
from tiermem.sync.devices import roster_pin
from tiermem.sync.session import Session
from tiermem.sync.state import Settings, device_wrap_id, wrap_id
from tiermem.sync.vault.hrana import Args, ResultSet, SqlError, Value
from tiermem.sync.vault.retry import RetryPolicy

__all__ = [
    "CHAIN",
    "EPOCH_GUARD_SQL",
    "ID_EPOCH",
    "SELECT_DEVICES",
    "DeviceEntry",
    "DeviceRevoked",
    "RotationConflict",
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
    "record_key",
    "refresh_epoch",
    "remember",
    "sealing_key",
    "unlock_chain",
]

CHAIN: Final = "chain"
ID_EPOCH: Final = 1


# Epoch keys already unwrapped by an engine (they never change for a given vault and epoch).
_CACHE: weakref.WeakKeyDictionary[Session, dict[int, bytes]] = weakref.WeakKeyDictionary()


# The newest epoch each engine has loaded a key of (its current one).
_CURRENT: weakref.WeakKeyDictionary[Session, int] = weakref.WeakKeyDictionary()


def _cache(engine: Session) -> dict[int, bytes]:
    return _CACHE.setdefault(engine, {})


def remember(engine: Session, keys: Mapping[int, bytes]) -> None:
    """Keep unwrapped epoch keys for this engine (after a rotation or a join)."""
    _cache(engine).update(keys)
    if keys:
        _CURRENT[engine] = max(_CURRENT.get(engine, 0), *keys)


def chain_wrap_id(tag: bytes, epoch: int) -> bytes:
    """The id of the wrap holding epoch `epoch`'s key under epoch ``epoch + 1``'s key."""
    return wrap_id(tag, epoch, CHAIN)


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
        context = crypto.WrapContext(engine.agent_id, s.epoch, device_wrap_id(s))
        cache[s.epoch] = crypto.unwrap_for_device(s.device_wrap, engine.device_key(s), context)
    _CURRENT[engine] = max(_CURRENT.get(engine, 0), s.epoch)
    return s.epoch, cache[s.epoch]


def unlock_chain(
    agent_id: str,
    tag: bytes,
    top_epoch: int,
    top_key: bytes,
    chains: Mapping[int, bytes],
    down_to: int,
) -> dict[int, bytes]:
    """Walk the chain from `top_epoch`'s key down to `down_to`: ``{epoch: key}``.

    `tag` is the vault's (`Settings.tag`); `chains` maps an epoch to its chain wrap (that
    epoch's key under the next one's). Pure, so a restore holding only the recovery key's epoch
    can use it too. A missing or failing link is `crypto.TamperedData`."""
    keys = {top_epoch: top_key}
    key = top_key
    for epoch in range(top_epoch - 1, down_to - 1, -1):
        blob = chains.get(epoch)
        if blob is None:
            raise crypto.TamperedData(
                f"the key chain of this vault has no link for epoch {epoch}: older data "
                "cannot be opened"
            )
        context = crypto.WrapContext(agent_id, epoch, chain_wrap_id(tag, epoch))
        try:
            key = crypto.unwrap_chain(blob, key, context)
        except crypto.WrongKey:
            raise crypto.TamperedData(
                f"the key chain of this vault is damaged at epoch {epoch}"
            ) from None
        keys[epoch] = key
    return keys


def _chains(engine: Session, tag: bytes, low: int, high: int) -> dict[int, bytes]:
    rows = query(
        engine,
        "SELECT epoch, blob FROM key_wraps WHERE agent_tag = ? AND kind = 'chain' "
        "AND epoch >= ? AND epoch < ?",
        (tag, low, high),
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
    chains = _chains(engine, s.tag, epoch, top)
    cache.update(unlock_chain(engine.agent_id, s.tag, top, key, chains, epoch))
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


def _wraps_from(
    engine: Session, s: Settings, policy: RetryPolicy | None = None
) -> dict[int, _EpochWraps]:
    """This device's view of the key wraps of epochs ≥ its own (one remote read)."""
    rows = query(
        engine,
        "SELECT epoch, kind, wrap_id, blob FROM key_wraps WHERE agent_tag = ? AND epoch >= ? "
        "AND kind IN ('recovery', 'passphrase', 'chain', 'device')",
        (s.tag, s.epoch),
        policy,
    )
    out: dict[int, _EpochWraps] = {}
    for e, kind, wid, blob in rows:
        epoch = int(str(e))
        current = out.get(epoch, _EpochWraps())
        if kind == "device":
            if wid != wrap_id(s.tag, epoch, "device", s.device_id):
                continue
            current = dataclasses.replace(current, own_device=records.server_blob(blob))
        elif kind in ("recovery", "passphrase", "chain"):
            current = dataclasses.replace(current, **{str(kind): records.server_blob(blob)})
        out[epoch] = current
    return out


def refresh_epoch(engine: Session, policy: RetryPolicy | None = None) -> int:
    """Adopt the newest epoch on the server, if newer than this device's (one remote read,
    retried by `policy`: the caller's, so a pull's own schedule and sleep apply).

    Raises `DeviceRevoked` when the newest epoch has no wrap for this device, and
    `crypto.TamperedData` when its key does not chain back to the key this device holds."""
    s = engine.require_ready()
    wraps = _wraps_from(engine, s, policy)
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
        engine.agent_id, newest, wrap_id(s.tag, newest, "device", s.device_id)
    )
    new_key = crypto.unwrap_for_device(top.own_device, engine.device_key(s), context)
    chains = {e: w.chain for e, w in wraps.items() if w.chain is not None}
    keys = unlock_chain(engine.agent_id, s.tag, newest, new_key, chains, s.epoch)
    _, held = current_key(engine, s)
    if keys[s.epoch] != held:
        raise crypto.TamperedData(
            f"the server offers a key epoch {newest} that does not lead back to this device's "
            "key: refusing it (the server may be trying to slip in a key of its own)"
        )
    _check_against_roster(engine, newest, new_key)
    with engine.db.transaction():
        engine.db.execute(
            "UPDATE sync_state SET epoch = ?, device_wrap = ?, recovery_wrap = ?, "
            "passphrase_wrap = ?, epoch_floor = max(epoch_floor, ?) WHERE agent_id = ? "
            "AND epoch = ?",
            (
                newest,
                top.own_device,
                top.recovery,
                top.passphrase,
                newest,
                engine.agent_id,
                s.epoch,
            ),
        )
    engine.hold_vault_key(None)
    remember(engine, keys)
    return newest


def _check_against_roster(engine: Session, epoch: int, key: bytes) -> None:
    """A newer epoch's key must be the one its signed rotation entry names (when the vault has
    a roster that records it)."""
    view = roster_pin.verified(engine, fresh=True)
    expected = None if view is None else view.checks.get(epoch)
    if expected is not None and expected != epoch_check(key):
        raise crypto.TamperedData(
            f"the key of epoch {epoch} is not the one its signed rotation names: refusing it"
        )


# ------------------------------------------------------------------------------ epoch floor


def sealing_key(engine: Session, epoch: int) -> tuple[int, bytes]:
    """(epoch, key) to seal new records under: `epoch` (this device's current one), unless this
    device has authenticated a newer epoch (its floor); then that epoch is adopted first, and if
    the server withholds it, `EpochRollback`: the old key is never used for new data."""
    floor = roster_pin.read_anchor(engine.db, engine.agent_id).floor
    if epoch < floor:
        refresh_epoch(engine)
        epoch = engine.require_ready().epoch
        if epoch < floor:
            raise EpochRollback(
                f"this device knows key epoch {floor} of agent {engine.agent_id!r}, but the "
                f"server offers only epoch {epoch}: it withholds the newer key (a removed device "
                "holds the older one), so nothing is sealed or sent; run `tiermem sync check`"
            )
    return epoch, epoch_key(engine, epoch)


def record_key(engine: Session, epoch: int, row: str, *, current: int = 0) -> bytes:
    """The key to open a record of `epoch` that this device receives now (`row`: its
    `row_digest`); `SupersededEpoch` when this device already holds a newer epoch and the signed
    rotation that ended `epoch` does not name the row in its tail (see the module docstring).
    `current`: this device's epoch as the caller last read it (read here when 0)."""
    key = epoch_key(engine, epoch)
    current = max(current, _CURRENT.get(engine, 0)) or engine.require_ready().epoch
    if epoch < current:
        view = roster_pin.verified(engine)
        if view is not None and row in view.tails.get(epoch + 1, frozenset()):
            return key
        raise SupersededEpoch(
            f"a record sealed under key epoch {epoch} arrived after this device learnt that "
            f"epoch {current} replaced it: only a removed device or the server makes those"
        )
    return key


# ------------------------------------------------------------------------------ epoch guard

# Integer overflow is the one error plain SQL can raise on demand: abs(INT64_MIN).
EPOCH_GUARD_SQL: Final = (
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM key_wraps WHERE agent_tag = ? AND kind = 'recovery' "
    "AND epoch > ?) THEN abs(-9223372036854775807 - 1) ELSE 0 END"
)


def epoch_guard(tag: bytes, epoch: int) -> tuple[str, Args]:
    """A statement for the start of a push batch: it fails the whole (atomic) batch when the
    server holds an epoch newer than `epoch`, so a device that missed a rotation never commits
    records sealed under the old key (which the removed device holds), at no extra request.
    On that failure (`is_epoch_guard_failure`): `refresh_epoch`, seal again, resend."""
    return EPOCH_GUARD_SQL, (tag, epoch)


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
    rows = query(engine, SELECT_DEVICES, (engine.require_ready().tag,))
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
        (mac, epoch, device_id, engine.settings_or_fail().tag, public_key),
    )
