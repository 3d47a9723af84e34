"""Signatures on a shared space's records: a writer's device signs every record it seals, and a
pull opens a record only when its device is a writer on the space's signed roster and the
signature verifies (`crypto.authorship` has the format).

The name a record carries is the space member who first wrote the memory (`space_writers` on
the writing device); the device is what the roster vouches for. A pull keeps both, verified, as
the memory's writer here (`record_writers`), so `spaces show --by` and `spaces undo --by` work
on every member's device.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from tiermem.core import spaces
from tiermem.core.db import Database
from tiermem.sync import crypto
from tiermem.sync import records as records_fmt
from tiermem.sync.crypto.authorship import Signed, open_signed, sign_payload
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.records import MEMORY_TABLE, Signer, Verifier
from tiermem.sync.session import Session
from tiermem.sync.state import Settings

__all__ = ["SignerFor", "record_writers", "signer", "verifier"]

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


def verifier(session: Session) -> Verifier | None:
    """How a pull checks a space's record: signed by a device the roster (read afresh, so a
    member invited since the last pull counts) lets write. None for an agent's vault."""
    if not spaces.is_scope(session.agent_id):
        return None
    view = roster_pin.verified(session, fresh=True)
    writers = {} if view is None else view.writer_keys()
    opened = _OPENED.setdefault(session, _Opened())

    def verify(ctx: crypto.RecordContext, plaintext: bytes) -> bytes:
        signed = open_signed(plaintext, ctx, writers)
        if ctx.table == MEMORY_TABLE:
            opened.memories[ctx.record_id] = signed
        return signed.payload

    return verify


def record_writers(session: Session) -> int:
    """Say which member wrote each memory of the space that arrived without a writer here, from
    the signatures the pulls verified (the device that first signed a version of it, and the
    name it signed); how many were recorded."""
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
            name = signed.writer or signed.device_id.hex()[:12]
            rows.append((scope, str(memory_id), name, signed.device_id.hex(), float(created_at)))
    with db.transaction():
        db.executemany(
            "INSERT INTO space_writers (agent_id, id, writer, device, written_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent_id, id) DO NOTHING",
            rows,
        )
    return len(rows)
