"""How a device gets on the signed device roster when it joins or is restored, and what it pins
(`tiermem.sync.devices.roster_pin`): the roster as verified and its epoch floor."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tiermem.core import spaces
from tiermem.core.engine import Memory, open_scope
from tiermem.core.errors import EpochRollback, InvalidInput
from tiermem.sync import crypto
from tiermem.sync.crypto.authorship import seal_member_name
from tiermem.sync.crypto.roster import (
    WRITER,
    epoch_check,
    recovery_signing_key,
    signing_public_bytes,
    verify_roster,
)
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.session import Session
from tiermem.sync.vault.hrana import SqlError
from tiermem.sync.vault.remote import Remote
from tiermem.sync.vault.retry import RetryPolicy

__all__ = ["Enrollment", "enroll_restored", "pin", "recovery_enrollment"]


@dataclass(frozen=True)
class Enrollment:
    """How a joining device gets on the signed roster and what it pins: the roster as verified
    (`bodies`, `view`; none for a vault without a roster), the epoch floor, and the key that
    signs its ``add`` entry (None when the approving device already wrote that entry)."""

    bodies: list[bytes]
    view: roster_pin.RosterView | None
    floor: int
    signer: Ed25519PrivateKey | None = None
    by: str = roster_pin.RECOVERY


def recovery_enrollment(
    remote: Remote,
    agent_id: str,
    tag: bytes,
    recovery_key: bytes,
    epoch: int,
    vault_key: bytes,
    policy: RetryPolicy,
) -> Enrollment:
    """The roster checked with the recovery key alone, and the floor it gives: the newest epoch
    its signed rotations name. `EpochRollback` when the server offers an older epoch (it hides
    the newer key's wraps); `TamperedData` when the offered key is not the one its rotation
    named."""
    bodies = roster_pin.read_bodies(lambda sql, args: remote.execute(sql, args, policy), tag)
    if not bodies:
        return Enrollment([], None, epoch)
    public = signing_public_bytes(recovery_signing_key(recovery_key))
    view = verify_roster(agent_id, bodies, recovery_public=public)
    if view.epoch > epoch:
        raise EpochRollback(
            f"the signed roster of agent {agent_id!r} names key epoch {view.epoch}, but the "
            f"server offers only epoch {epoch}: it withholds the newer key; nothing was set up"
        )
    expected = view.checks.get(epoch)
    if expected is not None and expected != epoch_check(vault_key):
        raise crypto.TamperedData(
            f"the key of epoch {epoch} is not the one its signed rotation names; nothing was set up"
        )
    return Enrollment(bodies, view, view.epoch, recovery_signing_key(recovery_key))


def pin(mem: Memory, enroll: Enrollment, draft: roster_pin.Draft | None) -> None:
    """Pin the roster this device verified (with its own entry) and its epoch floor."""
    if enroll.view is None:
        roster_pin.raise_floor(mem.db, mem.agent_id, enroll.floor)
        return
    bodies = enroll.bodies + ([] if draft is None else draft.bodies)
    view = verify_roster(mem.agent_id, bodies, genesis=enroll.view.genesis)
    roster_pin.save_anchor(mem.db, mem.agent_id, view, enroll.floor)


def enroll_restored(
    home: Path,
    agent_id: str,
    remote: Remote,
    recovery_key: bytes | None,
    policy: RetryPolicy,
    *,
    driver: str | None = None,
    bodies: list[bytes] | None = None,
    member: str | None = None,
) -> None:
    """After a restore: sign the restored device onto the roster with the recovery key (once)
    and pin the roster and its floor, so the device never seals under an epoch older than the
    newest signed rotation even if the server hides that epoch's wraps. Restored with the
    passphrase only, the roster is pinned as found and the device stays off it (`sync check`
    names it; `remove-device`/`rotate-key --keep ID` signs it on). `bodies`: the roster as
    read already (the restore reads it while it streams); read again if it moved since.
    `agent_id` is the vault's scope: for a shared space (`space:NAME`) the device is signed on
    as a writer named `member` (the recovery key is the space owner's)."""
    try:
        _enroll(home, agent_id, remote, recovery_key, policy, driver, bodies, member)
    except SqlError:
        if bodies is None:
            raise
        _enroll(home, agent_id, remote, recovery_key, policy, driver, None, member)


def _enroll(
    home: Path,
    agent_id: str,
    remote: Remote,
    recovery_key: bytes | None,
    policy: RetryPolicy,
    driver: str | None,
    bodies: list[bytes] | None,
    member: str | None,
) -> None:
    with open_scope(home, agent_id, driver=driver) as mem:
        session = Session(mem)
        s = session.require_ready()
        if bodies is None:
            bodies = roster_pin.read_bodies(functools.partial(remote.execute, policy=policy), s.tag)
        if not bodies:
            return
        owner = None if recovery_key is None else recovery_signing_key(recovery_key)
        public = None if owner is None else signing_public_bytes(owner)
        view = verify_roster(agent_id, bodies, recovery_public=public)
        if owner is not None and s.device_id not in view.devices:
            draft = roster_pin.Draft(agent_id, s.tag, view)
            sign = signing_public_bytes(roster_pin.signing_key(session, s))
            box = crypto.device_public_bytes(session.device_key(s))
            draft.add(
                s.device_id, box, sign, owner, roster_pin.RECOVERY, *_as_member(session, member)
            )
            remote.batch(draft.statements, policy)
            view = verify_roster(agent_id, bodies + draft.bodies, genesis=view.genesis)
        roster_pin.save_anchor(mem.db, agent_id, view)


def _as_member(session: Session, member: str | None) -> tuple[str | None, bytes | None]:
    """The role and sealed member name of a shared space's device on its roster (None, None:
    an agent's vault, whose devices are the owner's)."""
    if not spaces.is_scope(session.agent_id):
        return None, None
    if member is None:
        raise InvalidInput("a device restored into a shared space needs its member name")
    device = session.require_ready().device_id
    return WRITER, seal_member_name(epochs.id_key(session), session.agent_id, device, member)
