"""Signatures on a shared space's records: a writer's device signs every record it seals, and a
pull, a restore and `sync check` open a record only when its device is a writer on the space's
signed roster and the signature verifies (`crypto.authorship` has the format; `record_check`
is the one check all three use).

Who wrote a record is its device, which the roster vouches for, and the name the roster gives
that device (signed by whoever invited it); the name a record itself carries is the writing
device's own claim and is never shown. A pull keeps the device and the roster's name as the
memory's writer here (`record_writers`), so `spaces show --by` and `spaces undo --by` work on
every member's device.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from tiermem.core import spaces
from tiermem.core.db import Database
from tiermem.core.errors import RosterTampered
from tiermem.sync import crypto
from tiermem.sync import records as records_fmt
from tiermem.sync.crypto.authorship import Signed, open_member_name, open_signed, sign_payload
from tiermem.sync.crypto.roster import RosterView
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.records import MEMORY_TABLE, Signer, Verifier
from tiermem.sync.session import Session
from tiermem.sync.state import Settings

__all__ = [
    "RecordCheck",
    "SignerFor",
    "member_names",
    "record_check",
    "record_writers",
    "signer",
    "space_verifier",
    "verifier",
]

SignerFor = Callable[[str, str], Signer]
"""(table, record key) → the signer of that record."""


@dataclass
class _Opened:
    """What this session's pulls verified: memory record id → its signed writer and device."""

    memories: dict[bytes, Signed] = field(default_factory=dict)


_OPENED: weakref.WeakKeyDictionary[Session, _Opened] = weakref.WeakKeyDictionary()


def signer(session: Session, s: Settings) -> SignerFor | None:
    """How this device signs the records it seals into a space's vault (None: an agent's
    vault, whose records carry no member signature)."""
    if not spaces.is_scope(session.agent_id):
        return None
    key = roster_pin.signing_key(session, s)

    def sign_for(table: str, record_key: str) -> Signer:
        writer = (
            _first_writer(session.db, session.agent_id, record_key) if table == MEMORY_TABLE else ""
        )

        def sign(ctx: crypto.RecordContext, payload: bytes) -> bytes:
            return sign_payload(key, ctx, writer, payload)

        return sign

    return sign_for


def _first_writer(db: Database, scope: str, memory_id: str) -> str:
    found = db.scalar(
        "SELECT writer FROM space_writers WHERE agent_id = ? AND id = ?", (scope, memory_id)
    )
    return "" if found is None else str(found)


RecordCheck = Callable[[crypto.RecordContext, bytes], Signed]
"""A space's record (its context and opened plaintext) → its verified writer and payload."""


def member_names(view: RosterView | None, id_key: bytes, scope: str) -> dict[bytes, str]:
    """device id → the member name its roster entry gives it (signed by its inviter); a
    device without one, or whose name does not open, is left out."""
    names: dict[bytes, str] = {}
    for device in [] if view is None else view.devices.values():
        if device.sealed_name is not None:
            try:
                names[device.device_id] = open_member_name(
                    id_key, scope, device.device_id, device.sealed_name
                )
            except crypto.TamperedData:
                continue
    return names


def record_check(view: RosterView | None, id_key: bytes, scope: str) -> RecordCheck:
    """The check of a space's record against its signed roster `view`: its device is a writer
    there and its signature verifies (a removed writer's records written after its removal are
    the epoch rules' to refuse: `devices.epochs.record_key`, `RosterView.fenced_by`). The writer
    is named as the roster names the device (else by its id), never by the name inside the
    record. `TamperedData` otherwise."""
    writers = {} if view is None else view.writer_keys()
    names = member_names(view, id_key, scope)

    def check(ctx: crypto.RecordContext, plaintext: bytes) -> Signed:
        signed = open_signed(plaintext, ctx, writers)
        name = names.get(ctx.device_id) or ctx.device_id.hex()[:12]
        return Signed(name, signed.device_id, signed.payload)

    return check


def payload_check(check: RecordCheck) -> Verifier:
    """`check` as the verifier `records.open_row` takes (the payload only)."""
    return lambda ctx, plaintext: check(ctx, plaintext).payload


def space_verifier(session: Session) -> Verifier | None:
    """`record_check` as `sync check` applies it to a space's vault, against the roster this
    device verified (a roster that does not verify is reported apart, and opens no record).
    None for an agent's vault."""
    if not spaces.is_scope(session.agent_id):
        return None
    try:
        view = roster_pin.verified(session)
    except RosterTampered:
        view = None
    return payload_check(record_check(view, epochs.id_key(session), session.agent_id))


def verifier(session: Session) -> Verifier | None:
    """How a pull checks a space's record (`record_check`, against the roster read afresh, so
    a member invited since the last pull counts). None for an agent's vault."""
    if not spaces.is_scope(session.agent_id):
        return None
    view = roster_pin.verified(session, fresh=True)
    check = record_check(view, epochs.id_key(session), session.agent_id)
    opened = _OPENED.setdefault(session, _Opened())

    def verify(ctx: crypto.RecordContext, plaintext: bytes) -> bytes:
        signed = check(ctx, plaintext)
        if ctx.table == MEMORY_TABLE:
            opened.memories[ctx.record_id] = signed
        return signed.payload

    return verify


def record_writers(session: Session) -> int:
    """Say which member wrote each memory of the space that arrived without a writer here, from
    the signatures the pulls verified (the device that first signed a version of it, and the
    roster's name of that device); how many were recorded. This device's own writes take its
    roster name too, so every member lists a memory under the same name."""
    _name_own_writes(session)
    opened = _OPENED.pop(session, None)
    if opened is None or not opened.memories:
        return 0
    scope, db = session.agent_id, session.db
    missing = db.query(
        "SELECT id, created_at FROM memories m WHERE agent_id = ? AND NOT EXISTS "
        "(SELECT 1 FROM space_writers w WHERE w.agent_id = m.agent_id AND w.id = m.id)",
        (scope,),
    )
    id_key = epochs.id_key(session)
    rows = []
    for memory_id, created_at in missing:
        signed = opened.memories.get(records_fmt.record_id(id_key, MEMORY_TABLE, str(memory_id)))
        if signed is not None:
            rows.append(
                (scope, str(memory_id), signed.writer, signed.device_id.hex(), float(created_at))
            )
    with db.transaction():
        db.executemany(
            "INSERT INTO space_writers (agent_id, id, writer, device, written_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent_id, id) DO NOTHING",
            rows,
        )
    return len(rows)


def _name_own_writes(session: Session) -> None:
    """This device's writes (recorded under the writing agent, device '') under the member name
    the space's roster gives this device, and its id: what the other members show for them."""
    s = session.require_ready()
    names = member_names(roster_pin.verified(session), epochs.id_key(session), session.agent_id)
    me = names.get(s.device_id)
    if me is None:
        return
    with session.db.transaction():
        session.db.execute(
            "UPDATE space_writers SET writer = ?, device = ? WHERE agent_id = ? AND device = ''",
            (me, s.device_id.hex(), session.agent_id),
        )
