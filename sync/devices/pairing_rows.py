"""The server's ``pairings`` row, read alike by the new device and the approving one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from tiermem.core.errors import NotFound, PairingRefused, PairingTimeout
from tiermem.sync import crypto
from tiermem.sync.vault.hrana import Value

__all__ = ["PAIRING_TTL", "POLL", "SELECT", "PairingRow", "pairing_row", "wait_for"]

PAIRING_TTL: Final = 15 * 60.0  # seconds a request stays listed
POLL: Final = 1.0

SELECT: Final = (
    "SELECT pairing_id, created, new_public, commitment, approver_public, approver_nonce, "
    "new_nonce, bundle, refused FROM pairings"
)


@dataclass(frozen=True)
class PairingRow:
    """One row of the server's ``pairings`` table: the messages both sides posted so far."""

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


def pairing_row(r: tuple[Value, ...]) -> PairingRow:
    """A row `SELECT` returned, checked (TamperedData when malformed)."""
    pid, public, commitment = _opt(r[0]), _opt(r[2]), _opt(r[3])
    if pid is None or public is None or commitment is None:
        raise crypto.TamperedData("the server returned a malformed pairing row")
    return PairingRow(
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


def wait_for(
    fetch: Callable[[], PairingRow | None],
    ready: Callable[[PairingRow], bool],
    timeout: float,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    what: str,
) -> PairingRow:
    """Poll the row until `ready`: NotFound when it is gone, PairingRefused when refused,
    PairingTimeout after `timeout` seconds (`what` says what was awaited)."""
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
