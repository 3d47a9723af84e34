"""The vault's device roster on the server (`crypto.roster` has the format and the checks) and
this device's anchor in it: the roster it verified and its *epoch floor*.

The server's ``roster(agent_tag, seq, body)`` table holds one signed entry per change. A device
verifies it from the first entry on every time it reads it, against what it pinned locally
(``sync_state.roster_genesis/roster_seq/roster_head``), so the server can neither forge an
entry, drop or reorder one, nor swap the whole roster. A vault set up before the roster existed
has none until an operation holding the recovery key (a rotation, a join with the recovery key)
writes its genesis; until then devices work as before (the old key's device-entry MACs decide
who gets a new key, and `sync check` has no roster to verify).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tiermem.core.db import Database
from tiermem.core.errors import RosterTampered
from tiermem.sync import crypto, records
from tiermem.sync.crypto.roster import (
    RECOVERY,
    RefusedEntry,
    RosterView,
    entry_hash,
    generate_signing_key,
    load_signing_key,
    recovery_signing_key,
    sign_entry,
    signing_public_bytes,
    verify_roster,
)
from tiermem.sync.devices.secret_store import SIGNING_KEY
from tiermem.sync.session import Session
from tiermem.sync.state import Settings
from tiermem.sync.vault import schema, store
from tiermem.sync.vault.hrana import Args, ResultSet, SqlError

__all__ = [
    "RECOVERY",
    "Anchor",
    "Draft",
    "RosterView",
    "check_roster",
    "forget",
    "raise_floor",
    "read_anchor",
    "read_bodies",
    "recovery_view",
    "save_anchor",
    "signing_key",
    "verified",
]

Select = Callable[[str, Args], ResultSet]

_VIEWS: weakref.WeakKeyDictionary[Session, RosterView] = weakref.WeakKeyDictionary()


# ------------------------------------------------------------------------------ local anchor


@dataclass(frozen=True)
class Anchor:
    """What this device verified: the roster's genesis hash, its newest entry, the floor."""

    genesis: bytes | None
    seq: int | None
    head: bytes | None
    floor: int


def read_anchor(db: Database, agent_id: str) -> Anchor:
    row = db.query_one(
        "SELECT roster_genesis, roster_seq, roster_head, epoch_floor FROM sync_state "
        "WHERE agent_id = ?",
        (agent_id,),
    )
    if row is None:
        return Anchor(None, None, None, 0)
    return Anchor(
        None if row[0] is None else bytes(row[0]),
        None if row[1] is None else int(row[1]),
        None if row[2] is None else bytes(row[2]),
        int(row[3]),
    )


def raise_floor(db: Database, agent_id: str, epoch: int) -> None:
    """This device has authenticated key epoch `epoch`: never seal under an older one."""
    with db.transaction():
        db.execute(
            "UPDATE sync_state SET epoch_floor = max(epoch_floor, ?) WHERE agent_id = ?",
            (epoch, agent_id),
        )


def save_anchor(db: Database, agent_id: str, view: RosterView, floor: int = 0) -> None:
    """Pin a verified roster (only ever forward) and raise the floor to its newest epoch."""
    with db.transaction():
        db.execute(
            "UPDATE sync_state SET roster_genesis = ?, roster_seq = ?, roster_head = ?, "
            "epoch_floor = max(epoch_floor, ?, ?) WHERE agent_id = ? "
            "AND (roster_seq IS NULL OR roster_seq <= ?)",
            (view.genesis, view.seq, view.head, view.epoch, floor, agent_id, view.seq),
        )


# ------------------------------------------------------------------------------ server side


def read_bodies(select: Select, tag: bytes) -> list[bytes]:
    """The roster's entries in order ([] when the server has no roster table yet)."""
    try:
        rows = select(*store.roster_entries(tag)).rows
    except SqlError as exc:
        if "no such table" not in str(exc):
            raise
        return []
    return [records.server_blob(body) for _, body in rows]


def _select(engine: Session) -> Select:
    s = engine.require_ready()
    return lambda sql, args: engine.remote(s).execute(sql, args)


def verified(engine: Session, *, fresh: bool = False) -> RosterView | None:
    """The server's roster, verified against this device's anchor (one remote read, cached per
    session unless `fresh`); None for a vault that has no roster yet."""
    if not fresh and engine in _VIEWS:
        return _VIEWS[engine]
    anchor = read_anchor(engine.db, engine.agent_id)
    bodies = read_bodies(_select(engine), engine.require_ready().tag)
    if not bodies:
        if anchor.genesis is not None:
            raise RosterTampered(
                "the server no longer shows the device roster this device verified (it hides "
                "or deleted it)"
            )
        return None
    pinned = None if anchor.seq is None or anchor.head is None else (anchor.seq, anchor.head)
    view = verify_roster(engine.agent_id, bodies, genesis=anchor.genesis, pinned=pinned)
    save_anchor(engine.db, engine.agent_id, view)
    _VIEWS[engine] = view
    return view


def forget(engine: Session) -> None:
    """Drop the cached roster (after this device changed it)."""
    _VIEWS.pop(engine, None)


def recovery_view(
    select: Select, agent_id: str, tag: bytes, recovery_key: bytes
) -> RosterView | None:
    """The server's roster checked with the recovery key alone (a restore or a join): None when
    the vault has none yet."""
    bodies = read_bodies(select, tag)
    if not bodies:
        return None
    public = signing_public_bytes(recovery_signing_key(recovery_key))
    return verify_roster(agent_id, bodies, recovery_public=public)


def signing_key(engine: Session, s: Settings) -> Ed25519PrivateKey:
    """This device's roster signing key from the secret store (made on first use by a device
    set up before the roster existed)."""
    store = engine.secret_store(s)
    raw = store.get(SIGNING_KEY)
    if raw is None:
        key = generate_signing_key()
        store.set(SIGNING_KEY, key.private_bytes_raw().hex())
        return key
    try:
        return load_signing_key(bytes.fromhex(raw))
    except ValueError:
        raise crypto.MalformedKey("the stored roster signing key is damaged") from None


class Draft:
    """New roster entries on top of `view` (or a new roster from its genesis), as statements
    for one atomic batch: a concurrent change makes the batch fail on the entry's seq."""

    def __init__(self, agent_id: str, tag: bytes, view: RosterView | None) -> None:
        self.agent_id = agent_id
        self.tag = tag
        self.seq = 0 if view is None else view.seq + 1
        self.prev = b"" if view is None else view.head
        self.statements: list[tuple[str, Args]] = [(schema.CREATE_ROSTER, ())]
        self.bodies: list[bytes] = []

    def append(self, fields: dict[str, Any], key: Ed25519PrivateKey, by: str) -> bytes:
        entry = {**fields, "seq": self.seq, "prev": self.prev.hex(), "by": by}
        body = sign_entry(self.agent_id, entry, key)
        self.statements.append(store.append_roster_entry(self.tag, self.seq, body))
        self.bodies.append(body)
        self.seq += 1
        self.prev = entry_hash(body)
        return body

    def genesis(self, recovery_key: bytes, epoch: int) -> None:
        key = recovery_signing_key(recovery_key)
        public = signing_public_bytes(key).hex()
        self.append({"op": "genesis", "recovery": public, "epoch": epoch}, key, RECOVERY)

    def add(
        self,
        device_id: bytes,
        box_public: bytes,
        sign_public: bytes | None,
        key: Ed25519PrivateKey,
        by: str,
        role: str | None = None,
        name: bytes | None = None,
    ) -> None:
        """`role`, `name`: a shared space's member role and sealed member name (None: a device
        of the owner, a writer)."""
        fields = {
            "op": "add",
            "device": device_id.hex(),
            "box": box_public.hex(),
            "sign": "" if sign_public is None else sign_public.hex(),
        }
        if role is not None:
            fields["role"] = role
        if name is not None:
            fields["name"] = name.hex()
        self.append(fields, key, by)

    def rekey(
        self, device_id: bytes, box_public: bytes, sign_public: bytes | None, recovery_key: bytes
    ) -> None:
        """New keys for a listed device: only the recovery key signs this."""
        fields = {
            "op": "rekey",
            "device": device_id.hex(),
            "box": box_public.hex(),
            "sign": "" if sign_public is None else sign_public.hex(),
        }
        self.append(fields, recovery_signing_key(recovery_key), RECOVERY)


# ------------------------------------------------------------------------------ sync check


def check_roster(engine: Session) -> list[str]:
    """`sync check`'s roster step: the roster verifies from its first entry against this
    device's anchor, every device the server lists as active is on it and not removed (a
    device slipped in, or added by a device since removed, is named), and no device still on it
    signed an ``add`` for a device already listed (a stolen device trying to swap in its own
    keys: it changed nothing, but its signer must be removed)."""
    try:
        view = verified(engine, fresh=True)
    except RosterTampered as exc:
        return [str(exc)]
    if view is None:
        return []
    s = engine.require_ready()
    rows = engine.remote(s).execute(*store.live_device_ids(s.tag)).rows
    problems = [_refused_problem(r) for r in view.refused if _still_signing(view, r.by)]
    for (raw,) in rows:
        device_id = records.server_blob(raw)
        listed = view.devices.get(device_id)
        if listed is None:
            problems.append(
                f"device {device_id.hex()[:12]}… is listed by the server but not on the signed "
                "roster (slipped in, or added without the owner's or a device's signature)"
            )
        elif listed.removed:
            problems.append(
                f"device {device_id.hex()[:12]}… was removed on the roster but the server "
                "lists it as active"
            )
    return problems


def _still_signing(view: RosterView, by: str) -> bool:
    """Whether the device `by` (hex) is on the roster and not removed."""
    try:
        listed = view.devices.get(bytes.fromhex(by))
    except ValueError:
        return False
    return listed is not None and not listed.removed


def _refused_problem(refused: RefusedEntry) -> str:
    return (
        f"device roster entry #{refused.seq}, signed by device {refused.by[:12]}…, tries to "
        f"replace the keys of device {refused.device_id.hex()[:12]}… (only the recovery key "
        "may): it was ignored, but the device that signed it is likely stolen; remove it "
        f"(`tiermem sync remove-device {refused.by[:12]}`)"
    )
