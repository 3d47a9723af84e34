"""Pairing a new device with an existing one, through the server, checked by a short code.

The server relays four messages through one row of its ``pairings`` table:

1. the new device N posts its public key and a *commitment* ``H(N_pub, n_N)`` to a random nonce;
2. an existing device E answers with its device public key and its own nonce ``n_E``;
3. N reveals ``n_N``; E checks it against the commitment;
4. both show six words derived from the whole transcript (agent, pairing id, both public
   keys, both nonces: `crypto.pairing_code`). The user compares them and confirms on E; only
   then does E post the vault key, sealed under a key only E's and N's private keys can derive
   (static X25519 + HKDF over the transcript). N opens it, makes its own device wrap and
   registers like any joining device (`membership.join`).

A server that swaps N's key for its own makes E show a different code (and cannot decrypt the
answer anyway); one that swaps E's key makes N show a different code and the answer fails to
open. The commitment stops it from searching for two keys whose codes happen to match: each
side's nonce is fixed before it learns the other's. A mismatch refuses the pairing on E and
nothing is sent.

The request is filed under the unkeyed tag of the agent id (`state.agent_tag`): the new device
knows nothing else yet. So while a pairing is pending, a server can confirm a guessed agent id
from its ``pairings`` row (deleted when the pairing completes or is cancelled, or once expired);
the vault's own rows stay under its keyed tag, which the approval carries inside the sealed
answer.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import httpx

from tiermem.core.engine import Memory
from tiermem.core.errors import (
    EpochRollback,
    InvalidInput,
    NotFound,
    PairingRefused,
    PairingTimeout,
    RosterTampered,
)
from tiermem.sync import crypto
from tiermem.sync.crypto.roster import generate_signing_key, signing_public_bytes, verify_roster
from tiermem.sync.devices import epochs, find_vault, roster_pin
from tiermem.sync.devices.enroll import Enrollment
from tiermem.sync.devices.membership import (
    JoinResult,
    check_empty_home,
    epoch_wraps,
    join,
    own_entry_statements,
)
from tiermem.sync.session import Session
from tiermem.sync.state import agent_tag
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT, Value
from tiermem.sync.vault.remote import Remote
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.schema import CREATE_PAIRINGS
from tiermem.sync.vault.transport import to_base_url

__all__ = [
    "PAIRING_TTL",
    "Approval",
    "NewDevicePairing",
    "PairingRefused",
    "PairingRequest",
    "PairingTimeout",
    "answer_pairing",
    "approve_pairing",
    "codes_match",
    "finish_pairing",
    "pending_pairings",
    "refuse_pairing",
    "start_pairing",
]

PAIRING_TTL: Final = 15 * 60.0  # seconds a request stays listed
POLL: Final = 1.0

_SELECT: Final = (
    "SELECT pairing_id, created, new_public, commitment, approver_public, approver_nonce, "
    "new_nonce, bundle, refused FROM pairings"
)


@dataclass(frozen=True)
class _Row:
    pairing_id: bytes
    created: float
    new_public: bytes
    commitment: bytes
    approver_public: bytes | None
    approver_nonce: bytes | None
    new_nonce: bytes | None
    bundle: bytes | None
    refused: bool


def _opt(value: Value) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, bytes):
        raise crypto.TamperedData("the server returned a malformed pairing row")
    return value


def _row(r: tuple[Value, ...]) -> _Row:
    pid, public, commitment = _opt(r[0]), _opt(r[2]), _opt(r[3])
    if pid is None or public is None or commitment is None:
        raise crypto.TamperedData("the server returned a malformed pairing row")
    return _Row(
        pid,
        float(str(r[1])),
        public,
        commitment,
        _opt(r[4]),
        _opt(r[5]),
        _opt(r[6]),
        _opt(r[7]),
        bool(r[8]),
    )


def codes_match(shown: str, typed: str) -> bool:
    """Compare codes word by word, ignoring case, spaces, dashes and punctuation."""

    def words(text: str) -> list[str]:
        cleaned = "".join(c if c.isalnum() else " " for c in text.lower())
        return cleaned.split()

    return words(shown) == words(typed)


def _wait(
    fetch: Callable[[], _Row | None],
    ready: Callable[[_Row], bool],
    timeout: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    what: str,
) -> _Row:
    deadline = clock() + timeout
    while True:
        row = fetch()
        if row is None:
            raise NotFound(f"the pairing request is gone from the server ({what})")
        if row.refused:
            raise PairingRefused("the pairing was refused on the existing device; nothing was sent")
        if ready(row):
            return row
        if clock() >= deadline:
            raise PairingTimeout(f"gave up waiting {timeout:.0f} s for {what}")
        sleep(POLL)


# ------------------------------------------------------------------------- the new device


class NewDevicePairing:
    """The new device's side (steps 1, 3 and the end). Holds its fresh private key in memory
    only: an interrupted pairing is started again."""

    def __init__(
        self,
        mem: Memory,
        url: str,
        token: str | None,
        *,
        name: str | None = None,
        store_token: bool = True,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mem = mem
        self.token = token
        self.name = name
        self.store_token = store_token
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.clock = clock
        self.remote = Remote(to_base_url(url), token, timeout=timeout, transport=transport)
        self.key = crypto.generate_device_key()
        self.sign_key = generate_signing_key()
        self.public = crypto.device_public_bytes(self.key)
        # What the approver signs onto the roster: the X25519 key, then the signing key.
        self.posted = self.public + signing_public_bytes(self.sign_key)
        self.nonce = os.urandom(crypto.PAIRING_NONCE_LEN)
        self.pairing_id = os.urandom(16)
        self.code: str | None = None
        self._transcript: crypto.PairingTranscript | None = None

    @property
    def request_id(self) -> str:
        """What the existing device lists (a short, non-secret handle)."""
        return self.pairing_id.hex()[:8]

    def close(self) -> None:
        self.remote.close()

    def start(self) -> None:
        """Step 1: post the public key and the commitment."""
        check_empty_home(self.mem)
        # Which vault is this agent's only the approval tells (its tag is keyed): fail fast
        # at a server that holds none at all.
        find_vault.require_some_vault(functools.partial(self.remote.execute, policy=self.policy))
        statements = [
            (CREATE_PAIRINGS, ()),
            (
                "INSERT INTO pairings (pairing_id, agent_tag, created, new_public, commitment) "
                "VALUES (?, ?, ?, ?, ?)",
                (
                    self.pairing_id,
                    agent_tag(self.mem.agent_id),
                    time.time(),
                    self.posted,
                    crypto.pairing_commitment(self.posted, self.nonce),
                ),
            ),
        ]
        self.remote.batch(statements, self.policy)

    def _fetch(self) -> _Row | None:
        rows = self.remote.execute(
            f"{_SELECT} WHERE pairing_id = ?", (self.pairing_id,), self.policy
        ).rows
        return _row(rows[0]) if rows else None

    def wait_code(self, timeout: float = PAIRING_TTL) -> str:
        """Step 3: wait for an existing device to answer, reveal the nonce, return the code."""
        row = _wait(
            self._fetch,
            lambda r: r.approver_public is not None and r.approver_nonce is not None,
            timeout,
            self.sleep,
            self.clock,
            "an existing device to answer (run `tiermem sync approve-device` there)",
        )
        assert row.approver_public is not None and row.approver_nonce is not None
        if len(row.approver_public) != crypto.X25519_LEN:
            raise crypto.TamperedData("the answer holds a malformed public key")
        self.remote.execute(
            "UPDATE pairings SET new_nonce = ? WHERE pairing_id = ? AND new_nonce IS NULL",
            (self.nonce, self.pairing_id),
            self.policy,
        )
        self._transcript = crypto.PairingTranscript(
            agent_id=self.mem.agent_id,
            pairing_id=self.pairing_id,
            new_public=self.posted,
            new_nonce=self.nonce,
            approver_public=row.approver_public,
            approver_nonce=row.approver_nonce,
        )
        self.code = crypto.pairing_code(self._transcript)
        return self.code

    def finish(self, timeout: float = PAIRING_TTL) -> JoinResult:
        """Wait for the approval, open it, and join this home to the vault as a new device."""
        if self._transcript is None:
            raise RuntimeError("call wait_code() first")
        row = _wait(
            self._fetch,
            lambda r: r.bundle is not None,
            timeout,
            self.sleep,
            self.clock,
            "the codes to be confirmed on the existing device",
        )
        assert row.bundle is not None
        try:
            epoch, vault_key, anchor, tag = crypto.open_pairing_answer(
                self.key, self._transcript, row.bundle
            )
        except crypto.WrongKey as exc:
            raise PairingRefused(f"{exc}; nothing was set up") from None
        tag = tag or agent_tag(self.mem.agent_id)  # no tag: a vault set up before keyed tags
        _, wraps = epoch_wraps(self.remote, tag, self.mem.agent_id, self.policy, epoch)
        result = join(
            self.mem,
            self.remote,
            self.token,
            self.key,
            (tag, epoch, vault_key),
            wraps,
            name=self.name,
            via="pairing",
            store_token=self.store_token,
            policy=self.policy,
            enroll=self._enrollment(tag, epoch, anchor),
            device_id=self.pairing_id,
            signing_key=self.sign_key,
        )
        self.cancel()
        return result

    def _enrollment(
        self, tag: bytes, epoch: int, anchor: tuple[int, int, bytes] | None
    ) -> Enrollment:
        """The roster as the approver vouched for it (its newest entry, which adds this
        device) and its floor; `EpochRollback` when that floor is above the epoch given."""
        if anchor is None:
            return Enrollment([], None, epoch)
        floor, seq, head = anchor
        if floor > epoch:
            raise EpochRollback(
                f"the approving device knows key epoch {floor} but sent epoch {epoch}; nothing "
                "was set up"
            )
        if not head:
            return Enrollment([], None, floor)
        select = functools.partial(self.remote.execute, policy=self.policy)
        bodies = roster_pin.read_bodies(select, tag)
        view = verify_roster(self.mem.agent_id, bodies, pinned=(seq, head))
        listed = view.devices.get(self.pairing_id)
        if listed is None or listed.removed or listed.box_public != self.public:
            raise RosterTampered("the signed roster does not list this device as approved")
        return Enrollment(bodies, view, floor)

    def cancel(self) -> None:
        """Withdraw the request (also done after a successful join)."""
        self.remote.execute(
            "DELETE FROM pairings WHERE pairing_id = ?", (self.pairing_id,), self.policy
        )


def start_pairing(
    mem: Memory,
    url: str,
    token: str | None,
    name: str | None = None,
    *,
    store_token: bool = True,
    timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
    policy: RetryPolicy | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> NewDevicePairing:
    """Step 1 on the new device; then `wait_code()` (show it) and `finish_pairing`."""
    pairing = NewDevicePairing(
        mem,
        url,
        token,
        name=name,
        store_token=store_token,
        timeout=timeout,
        transport=transport,
        policy=policy,
        sleep=sleep,
        clock=clock,
    )
    try:
        pairing.start()
    except BaseException:
        pairing.close()
        raise
    return pairing


def finish_pairing(pairing: NewDevicePairing, timeout: float = PAIRING_TTL) -> JoinResult:
    return pairing.finish(timeout)


# ---------------------------------------------------------------------- the existing device


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
                    f"{_SELECT} WHERE agent_tag = ? AND bundle IS NULL AND refused = 0 "
                    "ORDER BY created DESC",
                    (tag,),
                ),
            ]
        ),
        RetryPolicy(),
    )
    rows = [_row(r) for r in results[2].rows]
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
    ) -> None:
        self.engine = engine
        self.pairing_id = pairing_id
        self.sleep = sleep
        self.clock = clock
        s = engine.require_ready()
        self.device_key = engine.device_key(s)
        self.public = crypto.device_public_bytes(self.device_key)
        self.nonce = os.urandom(crypto.PAIRING_NONCE_LEN)
        self.code: str | None = None
        self._transcript: crypto.PairingTranscript | None = None

    def _fetch(self) -> _Row | None:
        rows = epochs.query(self.engine, f"{_SELECT} WHERE pairing_id = ?", (self.pairing_id,))
        return _row(rows[0]) if rows else None

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
        row = _wait(
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
        posted = self._transcript.new_public
        sign = posted[crypto.X25519_LEN :] or None
        draft = roster_pin.Draft(self.engine.agent_id, s.tag, view)
        draft.add(self.pairing_id, posted[: crypto.X25519_LEN], sign, own_key, s.device_id.hex())
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
) -> Approval:
    """Step 2 on an existing device for the request `request` (its id or a prefix), or the
    only pending one. Then `wait_code()`, and `approve_pairing` with the new device's code.
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
    approval = Approval(engine, waiting[0].pairing_id, sleep=sleep, clock=clock)
    approval.answer()
    return approval


def approve_pairing(approval: Approval, typed_code: str) -> None:
    approval.approve(typed_code)


def refuse_pairing(approval: Approval) -> None:
    approval.refuse()
