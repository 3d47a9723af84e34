"""The approving device's side of a pairing (steps 2 and 4 of `pairing_exchange`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from tiermem.core.errors import InvalidInput, NotFound, PairingRefused
from tiermem.sync import crypto
from tiermem.sync.crypto.authorship import seal_member_name
from tiermem.sync.crypto.roster import WRITER, signing_public_bytes
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.devices.membership import own_entry_statements
from tiermem.sync.devices.pairing_rows import PAIRING_TTL, SELECT, PairingRow, pairing_row, wait_for
from tiermem.sync.session import Session
from tiermem.sync.state import agent_tag
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.schema import CREATE_PAIRINGS

__all__ = [
    "PAIRING_TTL",
    "Approval",
    "PairingRefused",
    "PairingRequest",
    "answer_pairing",
    "approve_pairing",
    "codes_match",
    "pending_pairings",
    "refuse_pairing",
]


def codes_match(shown: str, typed: str) -> bool:
    """Compare codes word by word, ignoring case, spaces, dashes and punctuation."""

    def words(text: str) -> list[str]:
        cleaned = "".join(c if c.isalnum() else " " for c in text.lower())
        return cleaned.split()

    return words(shown) == words(typed)


@dataclass(frozen=True)
class PairingRequest:
    request_id: str  # the first 8 hex digits of the pairing id
    pairing_id: bytes
    created: float
    answered: bool


def pending_pairings(engine: Session, now: float | None = None) -> list[PairingRequest]:
    """Requests of new devices for this agent, newest first (expired ones are deleted)."""
    now = time.time() if now is None else now
    tag = agent_tag(engine.agent_id)  # requests are filed under the unkeyed tag
    s = engine.require_ready()
    results, _, _ = engine.remote(s).send(
        lambda c: c.batch(
            [
                (CREATE_PAIRINGS, ()),
                (
                    "DELETE FROM pairings WHERE agent_tag = ? AND created < ?",
                    (tag, now - PAIRING_TTL),
                ),
                (
                    f"{SELECT} WHERE agent_tag = ? AND bundle IS NULL AND refused = 0 "
                    "ORDER BY created DESC",
                    (tag,),
                ),
            ]
        ),
        RetryPolicy(),
    )
    rows = [pairing_row(r) for r in results[2].rows]
    return [
        PairingRequest(
            r.pairing_id.hex()[:8], r.pairing_id, r.created, r.approver_public is not None
        )
        for r in rows
    ]


class Approval:
    """The existing device's side of one pairing (steps 2 and 4)."""

    def __init__(
        self,
        engine: Session,
        pairing_id: bytes,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        role: str | None = None,
        name: str | None = None,
    ) -> None:
        self.engine = engine
        self.pairing_id = pairing_id
        self.role = role
        """A shared space's member role the new device gets on the roster (None: the owner's)."""
        self.name = name
        """The member's name this device signs onto the roster with it (a shared space)."""
        self.sleep = sleep
        self.clock = clock
        s = engine.require_ready()
        self.device_key = engine.device_key(s)
        self.public = crypto.device_public_bytes(self.device_key)
        self.nonce = os.urandom(crypto.PAIRING_NONCE_LEN)
        self.code: str | None = None
        self._transcript: crypto.PairingTranscript | None = None

    def _fetch(self) -> PairingRow | None:
        rows = epochs.query(self.engine, f"{SELECT} WHERE pairing_id = ?", (self.pairing_id,))
        return pairing_row(rows[0]) if rows else None

    def answer(self) -> None:
        """Step 2: post this device's public key and nonce (only if nobody answered yet)."""
        epochs.refresh_epoch(self.engine)
        s = self.engine.require_ready()
        statements = [
            *own_entry_statements(self.engine, s),
            (
                "UPDATE pairings SET approver_public = ?, approver_nonce = ? "
                "WHERE pairing_id = ? AND approver_public IS NULL AND refused = 0",
                (self.public, self.nonce, self.pairing_id),
            ),
        ]
        results, _, _ = self.engine.remote(s).send(lambda c: c.batch(statements), RetryPolicy())
        if results[-1].affected_row_count != 1:
            raise PairingRefused(
                "this pairing request was already answered (by another device?) or is gone; "
                "start the pairing again on the new device"
            )

    def wait_code(self, timeout: float = PAIRING_TTL) -> str:
        """Wait for the new device's reveal, check its commitment, return the code to show."""
        row = wait_for(
            self._fetch,
            lambda r: r.new_nonce is not None,
            timeout,
            self.sleep,
            self.clock,
            "the new device to show its code",
        )
        assert row.new_nonce is not None
        if row.approver_public != self.public or row.approver_nonce != self.nonce:
            self.refuse()
            raise PairingRefused("the server altered this device's answer; pairing refused")
        if crypto.pairing_commitment(row.new_public, row.new_nonce) != row.commitment:
            self.refuse()
            raise PairingRefused(
                "the new device's key does not match what it committed to (the server may "
                "have swapped it); pairing refused, nothing was sent"
            )
        self._transcript = crypto.PairingTranscript(
            agent_id=self.engine.agent_id,
            pairing_id=self.pairing_id,
            new_public=row.new_public,
            new_nonce=row.new_nonce,
            approver_public=self.public,
            approver_nonce=self.nonce,
        )
        self.code = crypto.pairing_code(self._transcript)
        return self.code

    def approve(self, typed_code: str) -> None:
        """Step 4: when `typed_code` (what the new device shows) equals this device's code,
        post the sealed vault key; otherwise refuse the pairing and send nothing."""
        if self._transcript is None or self.code is None:
            raise RuntimeError("call wait_code() first")
        if not codes_match(self.code, typed_code):
            self.refuse()
            raise PairingRefused(
                "the codes differ: someone may be in the middle (the server?); pairing "
                "refused, nothing was sent"
            )
        epoch, key = epochs.current_key(self.engine)
        draft = self._roster_entry()
        floor = max(epoch, roster_pin.read_anchor(self.engine.db, self.engine.agent_id).floor)
        head = b"" if draft is None else draft.prev
        s = self.engine.require_ready()
        bundle = crypto.seal_pairing_bundle(
            self.device_key,
            self._transcript,
            epoch,
            key,
            anchor=(floor, 0 if draft is None else draft.seq - 1, head),
            tag=None if s.tag == agent_tag(s.agent_id) else s.tag,
        )
        statements = [] if draft is None else draft.statements
        statements.append(
            (
                "UPDATE pairings SET bundle = ? WHERE pairing_id = ? AND bundle IS NULL "
                "AND refused = 0",
                (bundle, self.pairing_id),
            )
        )
        results, _, _ = self.engine.remote(s).send(lambda c: c.batch(statements), RetryPolicy())
        if results[-1].affected_row_count != 1:
            raise PairingRefused("the pairing request is gone or was refused; nothing was sent")
        roster_pin.forget(self.engine)

    def _roster_entry(self) -> roster_pin.Draft | None:
        """The new device's ``add`` entry on the roster, signed by this device (None for a
        vault without a roster)."""
        assert self._transcript is not None
        view = roster_pin.verified(self.engine, fresh=True)
        if view is None:
            return None
        s = self.engine.require_ready()
        own_key = roster_pin.signing_key(self.engine, s)
        me = view.devices.get(s.device_id)
        if me is None or me.removed or me.sign_public != signing_public_bytes(own_key):
            raise InvalidInput(
                "this device cannot vouch for new devices (it is not on the signed device "
                "roster with its signing key); approve from another device, or join the new "
                "one with the recovery key (`tiermem sync add-device --recovery`)"
            )
        if me.role != WRITER:
            raise InvalidInput("a reader of this space cannot invite members; ask a writer")
        posted = self._transcript.new_public
        sign = posted[crypto.X25519_LEN :] or None
        draft = roster_pin.Draft(self.engine.agent_id, s.tag, view)
        name = None
        if self.name is not None:
            id_key = epochs.id_key(self.engine)
            name = seal_member_name(id_key, self.engine.agent_id, self.pairing_id, self.name)
        draft.add(
            self.pairing_id,
            posted[: crypto.X25519_LEN],
            sign,
            own_key,
            s.device_id.hex(),
            self.role,
            name,
        )
        return draft

    def refuse(self) -> None:
        epochs.query(
            self.engine,
            "UPDATE pairings SET refused = 1 WHERE pairing_id = ? AND bundle IS NULL",
            (self.pairing_id,),
        )


def answer_pairing(
    engine: Session,
    request: str | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    role: str | None = None,
    name: str | None = None,
) -> Approval:
    """Step 2 on an existing device for the request `request` (its id or a prefix), or the
    only pending one (`role`, `name`: a shared space's new member's, signed onto the roster). Then `wait_code()`, and `approve_pairing` with the new device's code.
    A device that was removed from the vault cannot approve (`epochs.DeviceRevoked`)."""
    epochs.refresh_epoch(engine)
    pending = pending_pairings(engine)
    if request is not None:
        wanted = request.strip().lower()
        pending = [p for p in pending if p.pairing_id.hex().startswith(wanted)]
    waiting = [p for p in pending if not p.answered]
    if pending and not waiting:
        raise PairingRefused(
            "this pairing request was already answered (by another device?); start the "
            "pairing again on the new device"
        )
    if not waiting:
        raise NotFound(
            "no pairing request is waiting; start one on the new device with "
            "`tiermem sync add-device --pair`"
        )
    if len(waiting) > 1:
        ids = ", ".join(p.request_id for p in waiting)
        raise InvalidInput(f"several pairing requests are waiting ({ids}); pick one with --request")
    approval = Approval(
        engine, waiting[0].pairing_id, sleep=sleep, clock=clock, role=role, name=name
    )
    approval.answer()
    return approval


def approve_pairing(approval: Approval, typed_code: str) -> None:
    approval.approve(typed_code)


def refuse_pairing(approval: Approval) -> None:
    approval.refuse()
