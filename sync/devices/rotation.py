"""Rotating the vault key (`rotate`), optionally removing a device, and the plan of who keeps
access (`plan_rotation`), shown to the owner before anything is written.

A rotation makes epoch E+1 with a fresh key, wraps it to the devices kept (and the recovery key, and
the passphrase when it is given), chains E's key under it and appends signed entries to the device
roster (`tiermem.sync.devices.roster_pin`): the removals and the rotation itself (its epoch, its
start time, a check value of its key, the server position of the vault's last row, up to
which rows under the ending epoch are legitimate, and the digests of the ending epoch's
manifests and checkpoint parts up to it, so rows moved below the position later are still told
apart). All of it is one atomic remote batch, which fails if a row arrived after that position
meanwhile (then it is prepared again, a few times).

Who is kept, and with which key, comes from the signed roster, not from the server's device
list: a device the roster does not list never gets the new key, and removing a device also
removes every device it added (it could have added one of its own before it was stolen), unless
the owner keeps one by name. A device kept by name that is on the roster gets the new key under
the roster's (signed) key, never the one the server lists. One that is not on the roster (a
device restored with the passphrase) has only the server's word for its key, so it is kept only
when the owner confirms that key's fingerprint (`fingerprint`, shown by `sync devices` on that
device itself); else `UnconfirmedDevice`, and nothing is written. A vault set up before the
roster existed gets its roster's first entry here, listing the devices the old key vouches for
(shown in the plan).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from tiermem.core.errors import InvalidInput, NotFound, RotationConflict
from tiermem.sync import crypto, journal, records
from tiermem.sync.crypto.roster import (
    RECOVERY,
    epoch_check,
    fingerprint,
    recovery_signing_key,
    row_digest,
    signing_public_bytes,
)
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.devices.epochs import (
    CHAIN,
    DeviceEntry,
    chain_wrap_id,
    current_key,
    device_entries,
    entry_mac_statement,
    query,
    remember,
)
from tiermem.sync.session import Session
from tiermem.sync.state import Settings, wrap_id
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, ResultSet, SqlError
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.store import INSERT_WRAP

__all__ = [
    "ROTATION_NOTE",
    "TOKEN_NOTE",
    "KeptDevice",
    "RotationPlan",
    "RotationResult",
    "UnconfirmedDevice",
    "fingerprint",
    "plan_rotation",
    "rotate",
]

ROTATION_NOTE: Final = (
    "Data written from now on is sealed under the new key, which the removed device never "
    "gets. Data it already downloaded, and the older keys it held, are NOT protected by this: "
    "treat anything it could read before as known to whoever has it."
)
TOKEN_NOTE: Final = (
    "The removed device still holds the server token, which lets it read (ciphertext), delete "
    "or roll back the vault's rows. Rotate it now: mint a new token (Turso: `turso db tokens "
    "invalidate DB` then `turso db tokens create DB`; sqld: a new JWT signed with a new key "
    "given to --auth-jwt-key-file), then on every device you keep run `tiermem sync set-token`."
)


class UnconfirmedDevice(InvalidInput):
    """A device to keep that the signed roster does not list, without its key's fingerprint
    confirmed by the owner: its key is only the server's word."""

    def __init__(self, device_id: str, shown: str) -> None:
        super().__init__(
            f"device {device_id[:12]}… is not on the signed roster, so its key comes only from "
            f"the server (fingerprint {shown}); check that `tiermem sync devices` on that device "
            f"shows the same, then keep it with --keep {device_id[:12]}:{shown}"
        )
        self.device_id = device_id
        self.fingerprint = shown


@dataclass(frozen=True)
class KeptDevice:
    """A device that keeps access: id (hex), who added it ('recovery' or a device id), whether
    the signed roster lists it (False only for a vault getting its roster now, or a device the
    owner keeps by its confirmed fingerprint), and the fingerprint of the key it gets."""

    device_id: str
    added_by: str
    on_roster: bool
    fingerprint: str = ""


@dataclass
class RotationPlan:
    """``kept``: devices that get the new key (this one first). ``also_removed``: devices the
    removed one added, removed with it. ``left_out``: devices the server lists that the roster
    (or for an old vault, the old key) does not vouch for: they never get the new key."""

    kept: list[KeptDevice] = field(default_factory=list)
    also_removed: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    boxes: dict[str, bytes] = field(default_factory=dict)
    view: roster_pin.RosterView | None = None


@dataclass(frozen=True)
class RotationResult:
    """``kept``: devices that got the new key. ``skipped``: device entries left out because
    neither the roster nor the old key vouches for them. ``also_removed``: devices the removed
    one had added. ``passphrase``: 'kept', 'dropped' (it was set but not given) or 'none'."""

    old_epoch: int
    new_epoch: int
    removed: str | None
    kept: list[str]
    skipped: list[str]
    passphrase: str
    note: str
    also_removed: list[str] = field(default_factory=list)
    token_note: str = ""


def plan_rotation(
    engine: Session,
    remove: bytes | None = None,
    keep: tuple[bytes, ...] = (),
    confirmed: Mapping[bytes, str] | None = None,
) -> RotationPlan:
    """Who keeps access if the key is rotated now (removing `remove`); `keep` names devices the
    removed one added that stay, or devices off the roster whose key fingerprint the owner
    confirmed (`confirmed`: device id → fingerprint). Remote reads only; nothing is written."""
    epochs.refresh_epoch(engine)
    s = engine.require_ready()
    entries = device_entries(engine)
    _check_target(s, remove, entries)
    view = roster_pin.verified(engine, fresh=True)
    plan = RotationPlan(view=view)
    own_public = crypto.device_public_bytes(engine.device_key(s))
    own = KeptDevice(s.device_id.hex(), _added_by(view, s.device_id), True, fingerprint(own_public))
    plan.kept.append(own)
    plan.boxes[s.device_id.hex()] = own_public
    if view is None:
        epoch, key = current_key(engine, s)
        vouched = {
            e.device_id: e.public_key
            for e in entries
            if not e.revoked and e.verified_at(engine.agent_id, epoch, key)
        }
    else:
        vouched = {d.device_id: d.box_public for d in view.active()}
        if remove is not None:
            cascade = [d for d in view.endorsed_by(remove) if d.device_id not in keep]
            plan.also_removed = [d.device_id.hex() for d in cascade]
            for d in cascade:
                vouched.pop(d.device_id, None)
    # Devices the owner names that the roster does not list get signed on now, with the key
    # whose fingerprint the owner confirmed (a listed device keeps its signed key).
    for device_id in keep:
        if device_id not in vouched and device_id not in (remove, s.device_id):
            vouched[device_id] = _confirmed_key(view, entries, device_id, confirmed or {})
    for device_id, box in vouched.items():
        if device_id in (remove, s.device_id):
            continue
        listed = view is not None and device_id in view.devices
        kept = KeptDevice(device_id.hex(), _added_by(view, device_id), listed, fingerprint(box))
        plan.kept.append(kept)
        plan.boxes[device_id.hex()] = box
    plan.left_out = [
        e.device_id.hex()
        for e in entries
        if not e.revoked
        and e.device_id not in vouched
        and e.device_id not in (remove, s.device_id)
        and e.device_id.hex() not in plan.also_removed
    ]
    return plan


def _confirmed_key(
    view: roster_pin.RosterView | None,
    entries: list[DeviceEntry],
    device_id: bytes,
    confirmed: Mapping[bytes, str],
) -> bytes:
    """The server-listed key of a device the roster does not list, when the owner confirmed
    its fingerprint (`UnconfirmedDevice` when not given, `InvalidInput` when it differs)."""
    listed = None if view is None else view.devices.get(device_id)
    if listed is not None and listed.removed:
        raise InvalidInput(
            f"device {device_id.hex()[:12]}… was removed from the signed roster; it cannot be "
            "kept (pair it again in a new home)"
        )
    found = [e for e in entries if e.device_id == device_id and not e.revoked]
    if not found:
        raise NotFound(f"no device {device_id.hex()} in this vault (or it is already removed)")
    shown = fingerprint(found[0].public_key)
    given = confirmed.get(device_id)
    if given is None:
        raise UnconfirmedDevice(device_id.hex(), shown)
    if _plain(given) != _plain(shown):
        raise InvalidInput(
            f"the key the server lists for device {device_id.hex()[:12]}… has fingerprint "
            f"{shown}, not the {given} given: refusing to keep it (the server may have swapped "
            "the key; compare with `tiermem sync devices` on that device)"
        )
    return found[0].public_key


def _plain(text: str) -> str:
    return "".join(c for c in text.lower() if c in "0123456789abcdef")


def _added_by(view: roster_pin.RosterView | None, device_id: bytes) -> str:
    found = None if view is None else view.devices.get(device_id)
    return "" if found is None else found.added_by


def _check_target(s: Settings, remove: bytes | None, entries: list[DeviceEntry]) -> None:
    if remove is None:
        return
    if remove == s.device_id:
        raise InvalidInput(
            "this is the device you are using; remove it from another device (or just "
            "delete this home)"
        )
    if not any(e.device_id == remove and not e.revoked for e in entries):
        raise NotFound(f"no device {remove.hex()} in this vault (or it is already removed)")


def rotate(
    engine: Session,
    recovery_key: bytes,
    *,
    passphrase: str | None = None,
    remove: bytes | None = None,
    keep: tuple[bytes, ...] = (),
    confirmed: Mapping[bytes, str] | None = None,
    now: float | None = None,
    policy: RetryPolicy | None = None,
) -> RotationResult:
    """Start epoch E+1 with a fresh vault key (one atomic remote batch), optionally removing
    the device `remove` and the devices it added (but those in `keep`; `confirmed`: the
    fingerprints the owner confirmed for kept devices off the roster, see `plan_rotation`).

    The recovery key is required: its wrap is symmetric (only its holder can wrap a new key to
    it), it signs the roster's removal and rotation entries, and asking for it means a stolen
    device alone cannot lock the owner's other devices out. It is checked against the current
    recovery wrap before anything is written. With the passphrase the new key gets a passphrase
    wrap too; without it, the passphrase stops working from this epoch on (say so)."""
    policy = policy or RetryPolicy()
    plan = plan_rotation(engine, remove, keep, confirmed)
    s = engine.require_ready()
    agent = engine.agent_id
    old_epoch, old_key = current_key(engine, s)
    params = _check_secrets(agent, s, old_epoch, old_key, recovery_key, passphrase)
    keep_passphrase = params is not None
    new = _NewEpoch(engine, old_epoch, old_key, recovery_key)
    new.add_passphrase(passphrase if keep_passphrase else None, params)
    kept = [(bytes.fromhex(k.device_id), plan.boxes[k.device_id]) for k in plan.kept]
    new.add_devices(s.device_id, kept)
    at = engine.mem.now() if now is None else now
    gone = [] if remove is None else [remove, *map(bytes.fromhex, plan.also_removed)]
    for device_id in gone:
        new.statements.append(
            (
                "UPDATE devices SET revoked_at = ?, revoked_epoch = ?, mac = NULL, "
                "mac_epoch = NULL WHERE device_id = ? AND agent_tag = ?",
                (at, new.epoch, device_id, s.tag),
            )
        )
    _commit_at_position(engine, s, new, policy, plan, recovery_key, gone, at)
    with engine.db.transaction():
        engine.db.execute(
            "UPDATE sync_state SET epoch = ?, device_wrap = ?, recovery_wrap = ?, "
            "passphrase_wrap = ?, epoch_floor = max(epoch_floor, ?) WHERE agent_id = ?",
            (new.epoch, new.own_wrap, new.recovery, new.passphrase, new.epoch, agent),
        )
    engine.hold_vault_key(None)
    remember(engine, {new.epoch: new.key, old_epoch: old_key})
    roster_pin.forget(engine)
    roster_pin.verified(engine, fresh=True)  # pin the roster just written
    pw_state = "kept" if keep_passphrase else "dropped"
    if s.passphrase_wrap is None:
        pw_state = "none"
    return RotationResult(
        old_epoch=old_epoch,
        new_epoch=new.epoch,
        removed=None if remove is None else remove.hex(),
        kept=[k.device_id for k in plan.kept],
        skipped=plan.left_out,
        passphrase=pw_state,
        note=ROTATION_NOTE if remove is not None else "",
        also_removed=plan.also_removed,
        token_note=TOKEN_NOTE if remove is not None else "",
    )


POSITION_TRIES: Final = 3
"""Rotations prepared at most while other devices keep pushing under the ending epoch."""


class _VaultMoved(Exception):
    """A row arrived after the position the rotation read: nothing of it was written."""


def _commit_at_position(
    engine: Session,
    s: Settings,
    new: _NewEpoch,
    policy: RetryPolicy,
    plan: RotationPlan,
    recovery_key: bytes,
    gone: list[bytes],
    at: float,
) -> None:
    """Send the rotation with roster entries signed at the vault's current position, again
    (a new position and tail) when a device pushed in between."""
    base = list(new.statements)
    for _ in range(POSITION_TRIES):
        upto = _position(engine, s)
        draft = _roster_entries(engine, s, plan, recovery_key, gone, new, (at, upto))
        new.statements = [*base, *draft.statements, store.rotation_guard(s.tag, upto)]
        try:
            _send_rotation(engine, s, new, policy)
            return
        except _VaultMoved:
            continue
    raise RotationConflict(
        "other devices kept pushing while this rotation was prepared; nothing was changed "
        "here; run the command again"
    )


def _position(engine: Session, s: Settings) -> int:
    """The server position (seq) of the vault's newest row, 0 when it has none."""
    rows = engine.remote(s).execute(*store.last_seq(s.tag)).rows
    return records.server_int(rows[0][0]) if rows else 0


def _roster_entries(
    engine: Session,
    s: Settings,
    plan: RotationPlan,
    recovery_key: bytes,
    gone: list[bytes],
    new: _NewEpoch,
    when: tuple[float, int],
) -> roster_pin.Draft:
    """The roster entries of this rotation, signed with the recovery key: the removals and the
    rotation (`when`: its wall time and server position); for a vault without a roster, first
    its genesis and the devices kept."""
    at, upto = when
    owner = recovery_signing_key(recovery_key)
    draft = roster_pin.Draft(engine.agent_id, s.tag, plan.view)
    if plan.view is None:
        draft.genesis(recovery_key, new.epoch - 1)
        own_sign = signing_public_bytes(roster_pin.signing_key(engine, s))
        for k in plan.kept:
            device_id = bytes.fromhex(k.device_id)
            sign = own_sign if device_id == s.device_id else None
            draft.add(device_id, plan.boxes[k.device_id], sign, owner, RECOVERY)
    else:
        for k in plan.kept:
            if not k.on_roster:  # named with --keep: the owner vouches for it now
                device_id = bytes.fromhex(k.device_id)
                draft.add(device_id, plan.boxes[k.device_id], None, owner, RECOVERY)
    for device_id in gone:
        draft.append({"op": "remove", "device": device_id.hex()}, owner, RECOVERY)
    fields: dict[str, object] = {"op": "rotate", "epoch": new.epoch, "at": int(at * 1000)}
    fields["check"] = epoch_check(new.key)
    fields["upto"] = upto
    fields["tail"] = _unpulled_tail(engine, s, new.epoch - 1, upto)
    listed = _old_listings(engine, s, new.epoch - 1, upto)
    if listed is not None:
        fields["listed"] = listed
    draft.append(fields, owner, RECOVERY)
    return draft


LISTED_MAX: Final = 4000
"""Manifests and checkpoint parts a rotation signs at most (about 35 bytes each in the roster
entry); past it the ended epoch is bounded by the position only, which `sync check` notes (a
`sync prune` first compacts the manifests into a checkpoint of a few parts)."""


def _old_listings(engine: Session, s: Settings, old_epoch: int, upto: int) -> list[str] | None:
    """The `row_digest` of every manifest and checkpoint part sealed under `old_epoch` up to
    the position `upto` (None: more than `LISTED_MAX`)."""
    id_key = epochs.id_key(engine)
    devices = engine.remote(s).execute(*store.device_ids(s.tag)).rows
    rids = [
        records.record_id(id_key, records.MANIFEST_TABLE, records.server_blob(d[0]).hex())
        for d in devices
    ]
    prune_rid = records.record_id(id_key, records.PRUNE_TABLE, records.PRUNE_KEY)
    chunks = [rids[i : i + 50] for i in range(0, len(rids), 50)] + [[prune_rid]]
    found: list[str] = []
    for chunk in chunks:
        after, limit = 0, 200
        while after < upto and len(found) <= LISTED_MAX:

            def fetch(n: int, a: int = after, c: list[bytes] = chunk) -> ResultSet:
                return engine.remote(s).execute(*store.manifests_after(s.tag, c, a, n))

            result, limit = records.fit_page(fetch, limit)
            page = [records.remote_row(r) for r in result.rows]
            found += [
                row_digest(r.record_id, r.version, r.envelope)
                for r in page
                if r.epoch == old_epoch and r.seq <= upto
            ]
            if len(page) < limit:
                break
            after = page[-1].seq
    return None if len(found) > LISTED_MAX else sorted(found)


TAIL_MAX: Final = 2000
"""Rows a rotation's tail names at most (a device that lets more pile up unpulled before it
rotates sees the older of them refused by devices that learnt of the rotation first)."""


def _unpulled_tail(engine: Session, s: Settings, old_epoch: int, upto: int) -> list[str]:
    """The digests of the rows under `old_epoch` the server holds after this device's pull
    cursor, up to the position `upto`: written before this rotation, so devices that learn of
    it still accept them."""
    cursor = journal.read_progress(engine.mem).pull_cursor
    found: list[str] = []
    limit = 200
    while len(found) < TAIL_MAX and cursor < upto:

        def fetch(n: int, after: int = cursor) -> ResultSet:
            return engine.remote(s).execute(*store.records_after(s.tag, after, n))

        result, limit = records.fit_page(fetch, limit)
        page = [records.remote_row(r) for r in result.rows]
        found += [
            row_digest(r.record_id, r.version, r.envelope)
            for r in page
            if r.epoch == old_epoch and r.seq <= upto
        ]
        if len(page) < limit:
            break
        cursor = page[-1].seq
    return sorted(found[:TAIL_MAX])


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
    recovery_context = crypto.WrapContext(agent, old_epoch, wrap_id(s.tag, old_epoch, "recovery"))
    if crypto.unwrap_with_recovery_key(s.recovery_wrap, recovery_key, recovery_context) != old_key:
        raise crypto.WrongKey("the recovery key does not unlock this vault")
    if s.passphrase_wrap is None or passphrase is None:
        return None
    pw_context = crypto.WrapContext(agent, old_epoch, wrap_id(s.tag, old_epoch, "passphrase"))
    crypto.unwrap_with_passphrase(s.passphrase_wrap, passphrase, pw_context)
    parsed = crypto.parse_wrap(s.passphrase_wrap)
    assert isinstance(parsed, crypto.PassphraseWrap)
    return parsed.params


class _NewEpoch:
    """The next epoch's key and the wraps of it one rotation writes (statement 0: the recovery
    wrap, whose conflict tells a concurrent rotation)."""

    def __init__(
        self, engine: Session, old_epoch: int, old_key: bytes, recovery_key: bytes
    ) -> None:
        self.engine = engine
        self.agent = agent = engine.agent_id
        self.tag = tag = engine.require_ready().tag
        self.epoch = epoch = old_epoch + 1
        self.key = key = crypto.generate_vault_key()
        self.recovery = crypto.wrap_with_recovery_key(
            key, recovery_key, crypto.WrapContext(agent, epoch, wrap_id(tag, epoch, "recovery"))
        )
        chain_id = chain_wrap_id(tag, old_epoch)
        chain = crypto.wrap_chain(
            old_key, key, epoch, crypto.WrapContext(agent, old_epoch, chain_id)
        )
        self.statements: list[tuple[str, Args]] = [
            (
                INSERT_WRAP,
                (wrap_id(tag, epoch, "recovery"), tag, epoch, "recovery", self.recovery),
            ),
            (INSERT_WRAP, (chain_id, tag, old_epoch, CHAIN, chain)),
        ]
        self.passphrase: bytes | None = None
        self.own_wrap = b""

    def add_passphrase(self, passphrase: str | None, params: crypto.KdfParameters | None) -> None:
        if passphrase is None or params is None:
            return
        pw_id = wrap_id(self.tag, self.epoch, "passphrase")
        self.passphrase = crypto.wrap_with_passphrase(
            self.key, passphrase, crypto.WrapContext(self.agent, self.epoch, pw_id), params=params
        )
        self.statements.append(
            (INSERT_WRAP, (pw_id, self.tag, self.epoch, "passphrase", self.passphrase))
        )

    def add_devices(self, own_id: bytes, kept: list[tuple[bytes, bytes]]) -> None:
        """A wrap of the new key and a fresh entry MAC for each device kept."""
        for device_id, public in kept:
            dev_id = wrap_id(self.tag, self.epoch, "device", device_id)
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
        sql = new.statements[exc.statement][0] if exc.statement is not None else ""
        if exc.statement == len(new.statements) - 1 and "overflow" in str(exc).lower():
            raise _VaultMoved from None
        if exc.statement != 0 and sql != store.APPEND_ROSTER_ENTRY:
            raise
        if sql == store.APPEND_ROSTER_ENTRY:
            raise RotationConflict(
                "the device roster changed while this rotation was prepared (a device was "
                "added?); nothing was changed here; run the command again"
            ) from None
        rows = query(
            engine,
            "SELECT blob FROM key_wraps WHERE wrap_id = ?",
            (wrap_id(new.tag, new.epoch, "recovery"),),
            policy,
        )
        if rows != ((new.recovery,),):
            raise RotationConflict(
                f"another device rotated the key of agent {new.agent!r} to epoch {new.epoch} at "
                "the same moment; nothing was changed here; run the command again"
            ) from None
