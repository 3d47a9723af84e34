"""The device roster: a chain of signed entries saying which devices belong to a vault and
which key epochs exist. Pure functions over bytes, no I/O.

Every entry names the hash of the entry before it and is signed (Ed25519) by the vault's
*recovery signing key* (derived from the recovery key, so only its holder has it) or by a
device already on the roster and not removed. The first entry (the *genesis*) is signed by the
recovery signing key and carries its public half, so a holder of the recovery key checks a whole
roster alone, and a device that verified a roster once pins its genesis and newest entry. Ops:

- ``genesis``: the recovery signing public key, the epoch at creation;
- ``add``: a new device (id, X25519 box key, Ed25519 signing key or none, and for a shared
  space's vault its ``role``: ``writer`` (the default) or ``reader``, and the member's ``name``
  sealed under the space's id key: `crypto.authorship.seal_member_name`), signed by the recovery key
  or a listed device; an ``add`` signed by a reader changes nothing (it is kept as *refused*), so
  a reader cannot vouch for a device that writes. An ``add`` for an id the roster already lists (even a removed
  one) changes nothing: it is kept in the view as *refused*, so a stolen device cannot swap
  another device's keys for its own (`sync check` names it);
- ``rekey``: new keys for a listed device (recovery key only: the one way a device's keys
  change);
- ``remove``: a device leaves (recovery key only);
- ``rotate``: key epoch ``epoch`` starts at wall time ``at`` (ms), with a check value of its key,
  its ``upto``: the server position (``seq``) of the vault's last row when the rotation was
  committed (the batch that writes the entry fails if a row came after it), and its ``tail``:
  the `row_digest` of every row under the ended epoch that the server held after the rotating
  device's pull cursor (the only rows under that epoch that a device which learnt of the
  rotation still accepts, see `tiermem.sync.devices.epochs`), and its ``listed``: the
  `row_digest` of every manifest and checkpoint part under the ended epoch up to ``upto`` (recovery
  key only). A row under an ended epoch after the position of the rotation that ended it
  (`RosterView.fenced_by`) was written after that rotation: a restore, a prune and `sync check`
  refuse it unless the tail names it. A manifest or checkpoint part (a *listing*: what says
  which rows a vault holds) under an ended epoch that the rotation's ``listed`` does not name
  is refused wherever it sits, so rows moved below the position (the server's numbering) are
  still told apart. A rotation signed before positions existed has no ``upto``
  (`RosterView.unbounded`), one whose old epoch held too many listings to sign has no
  ``listed`` (`RosterView.unlisted`).

An entry is stored as canonical JSON ``{"e": {fields}, "s": signature hex}``; the signed message
binds the agent id, which is not stored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from tiermem.core.errors import RosterTampered
from tiermem.sync.crypto.base import check_key, hkdf, lp

__all__ = [
    "READER",
    "RECOVERY",
    "WRITER",
    "RefusedEntry",
    "RosterDevice",
    "RosterView",
    "entry_hash",
    "epoch_check",
    "fingerprint",
    "generate_signing_key",
    "load_signing_key",
    "recovery_signing_key",
    "row_digest",
    "sign_entry",
    "signing_public_bytes",
    "verify_roster",
]

RECOVERY: Final = "recovery"
_SIGN_LABEL: Final = b"tiermem/v1/roster"
_HASH_LABEL: Final = b"tiermem/v1/roster-hash"
_INFO_RECOVERY_SIGN: Final = b"tiermem/v1/roster-recovery-signing"
_INFO_EPOCH_CHECK: Final = b"tiermem/v1/epoch-check"
_FINGERPRINT_LABEL: Final = b"tiermem/v1/device-fingerprint"
_ROW_LABEL: Final = b"tiermem/v1/rotation-tail"
_OPS: Final = frozenset({"genesis", "add", "rekey", "remove", "rotate"})
_RECOVERY_ONLY: Final = frozenset({"genesis", "rekey", "remove", "rotate"})
WRITER: Final = "writer"
READER: Final = "reader"
_ROLES: Final = frozenset({WRITER, READER})


def generate_signing_key() -> Ed25519PrivateKey:
    """A device's roster signing key (kept in the secret store next to its device key)."""
    return Ed25519PrivateKey.generate()


def load_signing_key(raw: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(raw)


def signing_public_bytes(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes_raw()


def recovery_signing_key(recovery_key: bytes) -> Ed25519PrivateKey:
    """The recovery key's roster signing key: deterministic, so a restore re-derives it."""
    check_key(recovery_key, "recovery key")
    return Ed25519PrivateKey.from_private_bytes(hkdf(recovery_key, None, _INFO_RECOVERY_SIGN))


def epoch_check(vault_key: bytes) -> str:
    """A public check value of an epoch's key (16 bytes, hex): a rotation entry names it, so a
    key unwrapped later is known to be the one the rotation made."""
    check_key(vault_key, "vault key")
    return hkdf(vault_key, None, _INFO_EPOCH_CHECK)[:16].hex()


def fingerprint(box_public: bytes) -> str:
    """A device key's fingerprint (80 bits, five groups of four hex digits): short enough to
    compare by eye on two screens, too long for a server to find another key that shows it."""
    digest = hashlib.sha256(_FINGERPRINT_LABEL + box_public).hexdigest()[:20]
    return "-".join(digest[i : i + 4] for i in range(0, 20, 4))


def row_digest(record_id: bytes, version: str, envelope: bytes) -> str:
    """A server row as a rotation's tail names it (128 bits, hex): its id, version and the
    exact envelope, so a row rewritten under the same id and version is not it."""
    message = _ROW_LABEL + lp(record_id) + lp(version.encode()) + envelope
    return hashlib.sha256(message).hexdigest()[:32]


def _canonical(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, sort_keys=True, separators=(",", ":")).encode()


def _message(agent_id: str, entry: dict[str, Any]) -> bytes:
    return _SIGN_LABEL + lp(agent_id.encode()) + lp(_canonical(entry))


def sign_entry(agent_id: str, entry: dict[str, Any], key: Ed25519PrivateKey) -> bytes:
    """The stored form of `entry` signed with `key`."""
    signature = key.sign(_message(agent_id, entry))
    return _canonical({"e": entry, "s": signature.hex()})


def entry_hash(body: bytes) -> bytes:
    """What the next entry's ``prev`` names (hex of it)."""
    return hashlib.sha256(_HASH_LABEL + body).digest()


@dataclass
class RosterDevice:
    """A device as the roster says: its keys, who added it, whether it was removed."""

    device_id: bytes
    box_public: bytes
    sign_public: bytes | None
    added_by: str  # RECOVERY or a device id (hex)
    seq: int
    removed: bool = False
    role: str = WRITER
    """What the signed ``add`` says the device may do in a shared space: write or only read."""
    sealed_name: bytes | None = None
    """A shared space's member name as its inviter signed it (sealed; None: none given)."""


@dataclass(frozen=True)
class RefusedEntry:
    """An ``add`` for a device the roster already lists, signed by `by`: it changed nothing."""

    seq: int
    device_id: bytes
    by: str


@dataclass
class RosterView:
    """A verified roster: the devices, the newest epoch, when each epoch started, its head."""

    recovery_public: bytes
    genesis: bytes
    devices: dict[bytes, RosterDevice] = field(default_factory=dict)
    epoch: int = 1
    rotations: dict[int, int] = field(default_factory=dict)  # epoch → start (wall ms)
    checks: dict[int, str] = field(default_factory=dict)  # epoch → epoch_check
    tails: dict[int, frozenset[str]] = field(default_factory=dict)  # epoch → rows it let in
    positions: dict[int, int] = field(default_factory=dict)  # epoch → its rotation's ``upto``
    listings: dict[int, frozenset[str]] = field(default_factory=dict)  # epoch → ``listed``
    seq: int = 0
    head: bytes = b""
    refused: list[RefusedEntry] = field(default_factory=list)

    def active(self) -> list[RosterDevice]:
        return [d for d in self.devices.values() if not d.removed]

    def writer_keys(self) -> dict[bytes, bytes]:
        """device id → signing key of every device the roster lets write (removed ones too:
        what they wrote before their removal stays theirs; the epoch guard stops the rest)."""
        return {
            d.device_id: d.sign_public
            for d in self.devices.values()
            if d.role == WRITER and d.sign_public is not None
        }

    def fenced_by(
        self,
        epoch: int,
        seq: int,
        record_id: bytes,
        version: str,
        envelope: bytes,
        *,
        listing: bool = False,
    ) -> int | None:
        """The rotation (its new epoch) after which a row sealed under `epoch` at server
        position `seq` was written: past its signed position, unless the tail of the rotation
        that ended `epoch` names it, or, for a `listing` (a manifest or checkpoint part), not
        among those the rotation that ended `epoch` signed, wherever it sits. None when the row
        is within every signed bound. The digest (a hash of the whole envelope) is taken only
        when a bound needs it: most rows of a vault lie within every bound."""
        signed = self.listings.get(epoch + 1)
        if (
            listing
            and signed is not None
            and row_digest(record_id, version, envelope) not in signed
        ):
            return epoch + 1
        bound = next((e for e in sorted(self.positions) if e > epoch), None)
        if bound is None or seq <= self.positions[bound]:
            return None
        if row_digest(record_id, version, envelope) in self.tails.get(epoch + 1, frozenset()):
            return None
        return bound

    def unbounded(self) -> list[int]:
        """Rotations signed without a position (before positions existed): rows under the
        epoch each ended are checked against the manifests only."""
        return sorted(e for e in self.rotations if e not in self.positions)

    def unlisted(self) -> list[int]:
        """Rotations signed with a position but without the ended epoch's listings (too many
        to sign, or signed before they were): its rows are bounded by the position only."""
        return sorted(e for e in self.positions if e not in self.listings)

    def endorsed_by(self, device_id: bytes) -> list[RosterDevice]:
        """Active devices added by `device_id`, or by a device it added, and so on."""
        found: list[RosterDevice] = []
        frontier = {device_id.hex()}
        while frontier:
            step = [d for d in self.active() if d.added_by in frontier and d not in found]
            found += step
            frontier = {d.device_id.hex() for d in step}
        return found


def _hex(value: object, what: str, size: int | None = None) -> bytes:
    try:
        raw = bytes.fromhex(str(value))
    except ValueError:
        raise RosterTampered(f"the device roster holds a malformed {what}") from None
    if size is not None and len(raw) != size:
        raise RosterTampered(f"the device roster holds a malformed {what}")
    return raw


def _parse(body: bytes) -> tuple[dict[str, Any], bytes]:
    try:
        outer = json.loads(body)
        entry, signature = outer["e"], outer["s"]
    except (ValueError, KeyError, TypeError):
        raise RosterTampered("a device roster entry is not readable") from None
    if not isinstance(entry, dict) or entry.get("op") not in _OPS:
        raise RosterTampered("a device roster entry has an unknown form")
    return entry, _hex(signature, "signature", 64)


def _signer(view: RosterView | None, entry: dict[str, Any]) -> Ed25519PublicKey:
    by = str(entry.get("by", ""))
    if by == RECOVERY:
        public = _hex(entry["recovery"], "key", 32) if view is None else view.recovery_public
        return Ed25519PublicKey.from_public_bytes(public)
    if view is None or entry["op"] in _RECOVERY_ONLY:
        raise RosterTampered(f"a device roster '{entry['op']}' entry is not signed by the owner")
    signer = view.devices.get(_hex(by, "device id", 16))
    if signer is None or signer.removed or signer.sign_public is None:
        raise RosterTampered(
            f"a device roster entry (#{entry.get('seq')}) is signed by a device that is not "
            "on the roster or was removed: refusing it"
        )
    return Ed25519PublicKey.from_public_bytes(signer.sign_public)


def _apply(view: RosterView, entry: dict[str, Any]) -> None:
    op = entry["op"]
    if op in ("add", "rekey"):
        device_id = _hex(entry["device"], "device id", 16)
        sign = str(entry.get("sign") or "")
        box = _hex(entry["box"], "device key", 32)
        sign_public = _hex(sign, "signing key", 32) if sign else None
        listed = view.devices.get(device_id)
        if op == "rekey":
            if listed is None or listed.removed:
                raise RosterTampered(f"device roster entry #{entry['seq']} re-keys no device")
            listed.box_public, listed.sign_public = box, sign_public
        elif listed is not None or _by_reader(view, entry):
            view.refused.append(RefusedEntry(int(entry["seq"]), device_id, str(entry["by"])))
        else:
            view.devices[device_id] = RosterDevice(
                device_id, box, sign_public, str(entry["by"]), int(entry["seq"]), role=_role(entry)
            )
            name = str(entry.get("name") or "")
            view.devices[device_id].sealed_name = _hex(name, "member name") if name else None
    elif op == "remove":
        gone = view.devices.get(_hex(entry["device"], "device id", 16))
        if gone is not None:
            gone.removed = True
    elif op == "rotate":
        epoch = int(entry["epoch"])
        if epoch != view.epoch + 1:
            raise RosterTampered(f"the device roster skips from epoch {view.epoch} to {epoch}")
        view.epoch = epoch
        view.rotations[epoch] = int(entry["at"])
        view.checks[epoch] = str(entry["check"])
        view.tails[epoch] = frozenset(str(d) for d in entry.get("tail", ()))
        if "upto" in entry:
            view.positions[epoch] = int(entry["upto"])
        if "listed" in entry:
            view.listings[epoch] = frozenset(str(d) for d in entry["listed"])


def _role(entry: dict[str, Any]) -> str:
    role = str(entry.get("role") or WRITER)
    if role not in _ROLES:
        raise RosterTampered(f"device roster entry #{entry['seq']} names an unknown role")
    return role


def _by_reader(view: RosterView, entry: dict[str, Any]) -> bool:
    """An entry signed by a device whose own role is reader (it may not vouch for others)."""
    signer = (
        view.devices.get(_hex(entry["by"], "device id", 16)) if entry["by"] != RECOVERY else None
    )
    return signer is not None and signer.role == READER


def verify_roster(
    agent_id: str,
    bodies: list[bytes],
    *,
    recovery_public: bytes | None = None,
    genesis: bytes | None = None,
    pinned: tuple[int, bytes] | None = None,
) -> RosterView:
    """Check every entry of a roster (ordered by seq) and return what it says.

    `recovery_public` (from the recovery key) or `genesis` (a pinned first-entry hash) anchors
    it; `pinned` (seq, hash) is an entry this device saw before, which must still be there."""
    view: RosterView | None = None
    prev = b""
    for seq, body in enumerate(bodies):
        entry, signature = _parse(body)
        if entry.get("seq") != seq or entry.get("prev") != prev.hex():
            raise RosterTampered(f"the device roster is out of order at entry #{seq}")
        if (seq == 0) != (entry["op"] == "genesis"):
            raise RosterTampered("the device roster does not start with its genesis entry")
        try:
            _signer(view, entry).verify(signature, _message(agent_id, entry))
            if view is None:
                view = RosterView(_hex(entry["recovery"], "key", 32), entry_hash(body))
                view.epoch = int(entry["epoch"])
            _apply(view, entry)
        except InvalidSignature:
            raise RosterTampered(f"device roster entry #{seq} has a forged signature") from None
        except (KeyError, TypeError, ValueError):
            raise RosterTampered(f"device roster entry #{seq} is malformed") from None
        prev = entry_hash(body)
        if pinned is not None and pinned[0] == seq and not hmac.compare_digest(prev, pinned[1]):
            raise RosterTampered(f"device roster entry #{seq} differs from the one seen before")
    if view is None:
        raise RosterTampered("the device roster is empty")
    if recovery_public is not None and view.recovery_public != recovery_public:
        raise RosterTampered("the device roster was not made with this vault's recovery key")
    if genesis is not None and view.genesis != genesis:
        raise RosterTampered("the device roster was replaced by another one")
    if pinned is not None and pinned[0] >= len(bodies):
        raise RosterTampered(
            f"the server shows {len(bodies)} device roster entries, fewer than the "
            f"{pinned[0] + 1} this device verified before (it hides changes)"
        )
    view.seq, view.head = len(bodies) - 1, prev
    return view
