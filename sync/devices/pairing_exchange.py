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

Here is the new device's side; the existing device's is `pairing_approval`, and the server's
``pairings`` row both read is `pairing_rows`.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable

import httpx

from tiermem.core.engine import Memory
from tiermem.core.errors import EpochRollback, PairingRefused, PairingTimeout, RosterTampered
from tiermem.sync import crypto
from tiermem.sync.crypto.roster import generate_signing_key, signing_public_bytes, verify_roster
from tiermem.sync.devices import find_vault, roster_pin
from tiermem.sync.devices.enroll import Enrollment
from tiermem.sync.devices.membership import JoinResult, check_empty_home, epoch_wraps, join
from tiermem.sync.devices.pairing_rows import PAIRING_TTL, SELECT, PairingRow, pairing_row, wait_for
from tiermem.sync.state import agent_tag
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT
from tiermem.sync.vault.remote import Remote
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.schema import CREATE_PAIRINGS
from tiermem.sync.vault.transport import to_base_url

__all__ = [
    "PAIRING_TTL",
    "NewDevicePairing",
    "PairingRefused",
    "PairingTimeout",
    "finish_pairing",
    "start_pairing",
]


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

    def _fetch(self) -> PairingRow | None:
        rows = self.remote.execute(
            f"{SELECT} WHERE pairing_id = ?", (self.pairing_id,), self.policy
        ).rows
        return pairing_row(rows[0]) if rows else None

    def wait_code(self, timeout: float = PAIRING_TTL) -> str:
        """Step 3: wait for an existing device to answer, reveal the nonce, return the code."""
        row = wait_for(
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
        row = wait_for(
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
