"""A shared space's vault: the per-agent sync machinery run for the space's scope `space:NAME`
(its own vault key, recovery key, signed roster and devices), so a space is shared across
people and devices with the same guarantees as an agent across its devices.

- `share`: the space's vault is set up (`SyncEngine.init` on the space's scope);
- members join by pairing (`sync.devices.pairing_*`, with a role signed onto the roster) and
  `adopt` the space here with the role the roster gives this device;
- `sync_included`: an agent's push and pull also push and pull every shared space it includes
  (a reader's device only pulls), and record who wrote what arrived (`authors`);
- `remove_member`: the device leaves the roster and the space key rotates
  (`sync.devices.membership.remove_device`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tiermem.core import spaces
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound, RejectedRecords, TiermemError
from tiermem.core.spaces import Role
from tiermem.sync.crypto.roster import READER, WRITER, RosterView
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.devices.membership import DeviceInfo, list_devices, remove_device, resolve_device
from tiermem.sync.devices.rotation import RotationResult
from tiermem.sync.engine import InitResult, PullResult, PushResult, SyncEngine
from tiermem.sync.spaces import authors
from tiermem.sync.state import AlreadyInitialised
from tiermem.sync.vault.retry import RetryPolicy

__all__ = [
    "Member",
    "SpaceSync",
    "adopt",
    "check_member_name",
    "device_role",
    "members",
    "open_engine",
    "raise_refused",
    "remove_member",
    "share",
    "shared",
    "sync_included",
]


@dataclass(frozen=True)
class SpaceSync:
    """One shared space's part of an agent's push or pull."""

    space: str
    role: str
    pulled: PullResult | None
    pushed: PushResult | None
    writers: int
    """Memories that arrived whose verified writer was recorded here."""


@dataclass(frozen=True)
class Member:
    """A device of the space's vault with its signed role and the member name its inviter
    signed onto the roster ('' when the roster gives none: `spaces show` names it by its id)."""

    device: DeviceInfo
    role: str
    member: str = ""


@contextmanager
def open_engine(mem: Memory, name: str) -> Iterator[SyncEngine]:
    """The sync engine of the space `name` of `mem`'s home (its own scope and settings)."""
    spaces.require(mem.db, name)
    with mem.open_space(name) as space, SyncEngine(space) as engine:
        yield engine


def shared(engine: SyncEngine) -> bool:
    s = engine.settings()
    return s is not None and s.status == "ready"


def share(
    mem: Memory,
    name: str,
    url: str,
    token: str | None,
    recovery_key: bytes,
    *,
    store_token: bool = True,
    policy: RetryPolicy | None = None,
) -> tuple[InitResult, PushResult]:
    """Set the space's vault up on the server at `url` (beside any other vaults there) with
    this device as its first writer, named on the roster as `mem`'s agent, and push what the
    space holds."""
    spaces.require_writer(mem.db, mem.agent_id, name)
    with open_engine(mem, name) as engine:
        if engine.settings() is not None:
            raise AlreadyInitialised(
                f"space {name!r} is already shared from this home (see `tiermem spaces members`)"
            )
        result = engine.init(
            url,
            token,
            recovery_key,
            store_token=store_token,
            policy=policy,
            new_vault=True,
            member=mem.agent_id,
        )
        return result, engine.push(policy)


_MEMBER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_member_name(name: str) -> str:
    """A member's name as an inviter signs it: 1-64 letters, digits, '.', '_' or '-' (an
    agent id's alphabet, so a member's name and a writing agent's read alike)."""
    if not _MEMBER_NAME.fullmatch(name):
        raise InvalidInput(
            f"invalid member name {name!r}: use 1-64 letters, digits, '.', '_' or '-'"
        )
    return name


def device_role(engine: SyncEngine, view: RosterView | None = None) -> Role:
    """This device's role in the space, as the space's signed roster says."""
    view = view or roster_pin.verified(engine)
    me = None if view is None else view.devices.get(engine.require_ready().device_id)
    if me is None or me.removed:
        raise NotFound(f"this device is not a member of {engine.agent_id!r} on its signed roster")
    return spaces.check_role(me.role)


def adopt(mem: Memory, engine: SyncEngine) -> Role:
    """After this device joined a space's vault: the space exists here and `mem`'s agent
    includes it with the role the roster gives this device (a reader's agents all read)."""
    name = spaces.space_of(engine.agent_id)
    assert name is not None
    role = device_role(engine)
    spaces.adopt(mem.db, name, mem.agent_id, role, mem.now())
    return role


def sync_included(
    mem: Memory,
    policy: RetryPolicy,
    *,
    pull: bool = True,
    push: bool = True,
    only: str | None = None,
    on_error: Callable[[str, TiermemError], None] | None = None,
) -> list[SpaceSync]:
    """Pull (then push, on a writer's device) every shared space `mem`'s agent includes (or
    only the space `only`). `on_error`: a space that fails is reported there and the others
    go on (else the error ends the call)."""
    done = []
    for member in spaces.included(mem.db, mem.agent_id):
        if only is not None and member.space != only:
            continue
        with open_engine(mem, member.space) as engine:
            if not shared(engine):
                continue
            try:
                done.append(_sync_one(mem, engine, member.space, policy, pull, push))
            except TiermemError as exc:
                if on_error is None:
                    raise
                on_error(member.space, exc)
    return done


def _sync_one(
    mem: Memory, engine: SyncEngine, name: str, policy: RetryPolicy, pull: bool, push: bool
) -> SpaceSync:
    pulled = engine.pull(policy) if pull else None
    writers = authors.record_writers(engine)
    role = device_role(engine, roster_pin.verified(engine))
    if role == READER:
        spaces.limit_to_reading(mem.db, name)
    pushed = engine.push(policy) if push and role == WRITER else None
    return SpaceSync(name, role, pulled, pushed, writers)


def raise_refused(done: list[SpaceSync]) -> None:
    """A pull that left a space's records unapplied (unsigned, or signed by no writer) exits
    non-zero, after its report."""
    refused = sum(d.pulled.rejected for d in done if d.pulled is not None)
    if refused:
        raise RejectedRecords(
            f"{refused} record(s) of shared spaces were refused (not signed by a writer of the "
            "space, or damaged) and not applied; every pull fetches them again"
        )


def members(engine: SyncEngine) -> list[Member]:
    """The devices of the space's vault, each with the role its signed roster entry gives."""
    view = roster_pin.verified(engine, fresh=True)
    found = list_devices(engine, touch=False)
    roles = {} if view is None else {d.device_id.hex(): d.role for d in view.devices.values()}
    names = authors.member_names(view, epochs.id_key(engine), engine.agent_id)
    named = {device.hex(): name for device, name in names.items()}
    return [Member(d, roles.get(d.device_id, ""), named.get(d.device_id, "")) for d in found]


def remove_member(
    engine: SyncEngine,
    member: str,
    recovery_key: bytes,
    *,
    passphrase: str | None = None,
    policy: RetryPolicy | None = None,
) -> RotationResult:
    """Take a member's device off the space's roster and rotate the space key: nothing the
    space holds from now on can be read with what that device has. Needs the space's
    recovery key (the one `spaces share` showed)."""
    target = _find_member(engine, member)
    if target == engine.require_ready().device_id:
        raise InvalidInput("this is your own device; remove it from another member's device")
    return remove_device(engine, target, recovery_key, passphrase=passphrase, policy=policy)


def _find_member(engine: SyncEngine, given: str) -> bytes:
    """A device by its member name, its device name, or its id (a unique prefix)."""
    named = [
        m for m in members(engine) if given in (m.member, m.device.name) and not m.device.revoked
    ]
    if len(named) > 1:
        raise InvalidInput(f"{len(named)} member devices are named {given!r}; give the device id")
    if named:
        return bytes.fromhex(named[0].device.device_id)
    return resolve_device(engine, given, active=True)
