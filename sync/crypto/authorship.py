"""Who wrote a record of a shared space's vault: the writing device's Ed25519 signature inside
the sealed plaintext. Pure functions over bytes, no I/O.

Every member of a space holds the space's vault key, so the envelope alone says only "a member
sealed this". The signature says which device, and the space's signed roster says whether that
device may write (`RosterView.writer_keys`): a reader's device, or anyone holding the token and
the vault key, cannot make a record the others accept. Layout of the plaintext::

    "TMSG" | signature[64] | lp(writer) | payload

The signature covers a label, the record's whole context (space scope, table, record id,
version, writing device: what the envelope's associated data binds), the writer's name and
the payload, so it cannot be moved to another record, version or device.

The writer's *name* is not taken from the record: a writing device could sign any name. The
space's roster binds a name to each member device (the ``add`` entry's ``name``, signed by the
inviter), sealed under the space's id key so the server never reads it (`seal_member_name`);
readers show that name (`sync.spaces.authors`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tiermem.core.errors import TamperedData
from tiermem.sync.crypto.base import LEN_PREFIX, NONCE_LEN, check_key, hkdf, lp
from tiermem.sync.crypto.envelope import RecordContext

__all__ = [
    "MAX_MEMBER_NAME",
    "SIGNED_MAGIC",
    "Signed",
    "open_member_name",
    "open_signed",
    "seal_member_name",
    "sign_payload",
    "unsigned_payload",
]

SIGNED_MAGIC: Final = b"TMSG"
_LABEL: Final = b"tiermem/v1/space-record"
_SIG_LEN: Final = 64
_MAX_WRITER: Final = 256
_INFO_MEMBER_NAME: Final = b"tiermem/v1/member-name"
MAX_MEMBER_NAME: Final = 64
"""Bytes of a member's name on the roster (sealed padded to this, so its length is hidden)."""


@dataclass(frozen=True)
class Signed:
    """A verified record: who wrote it (the name its device signed) and what it says."""

    writer: str
    device_id: bytes
    payload: bytes


def _message(ctx: RecordContext, writer: bytes, payload: bytes) -> bytes:
    parts = (ctx.agent_id.encode(), ctx.table.encode(), ctx.record_id, ctx.version.encode())
    return _LABEL + b"".join(lp(p) for p in parts) + lp(ctx.device_id) + lp(writer) + payload


def sign_payload(key: Ed25519PrivateKey, ctx: RecordContext, writer: str, payload: bytes) -> bytes:
    """The plaintext to seal for `ctx`: `payload` signed by the writing device's key."""
    name = writer.encode()[:_MAX_WRITER]
    return SIGNED_MAGIC + key.sign(_message(ctx, name, payload)) + lp(name) + payload


def open_signed(plaintext: bytes, ctx: RecordContext, writers: Mapping[bytes, bytes]) -> Signed:
    """The payload of a signed plaintext when `ctx.device_id` is one of `writers` (device id →
    its Ed25519 public key) and its signature verifies; `TamperedData` otherwise."""
    public = writers.get(ctx.device_id)
    if public is None:
        raise TamperedData(
            f"a shared space's record comes from device {ctx.device_id.hex()[:12]}, which the "
            "space's signed roster does not list as a writer (a reader, or no member)"
        )
    signature, name, payload = _split(plaintext)
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, _message(ctx, name, payload))
    except InvalidSignature:
        raise TamperedData(
            f"a shared space's record is not signed by device {ctx.device_id.hex()[:12]}'s key"
        ) from None
    try:
        writer = name.decode()
    except UnicodeDecodeError:
        raise TamperedData("a shared space's record names its writer in invalid text") from None
    return Signed(writer, ctx.device_id, payload)


def _split(plaintext: bytes) -> tuple[bytes, bytes, bytes]:
    """(signature, writer name, payload) of a signed plaintext."""
    head = len(SIGNED_MAGIC) + _SIG_LEN
    if not plaintext.startswith(SIGNED_MAGIC) or len(plaintext) < head + LEN_PREFIX.size:
        raise TamperedData("a shared space's record carries no member signature")
    (size,) = LEN_PREFIX.unpack_from(plaintext, head)
    start = head + LEN_PREFIX.size
    if size > _MAX_WRITER or start + size > len(plaintext):
        raise TamperedData("a shared space's record has a malformed signature block")
    return (
        plaintext[len(SIGNED_MAGIC) : head],
        plaintext[start : start + size],
        plaintext[start + size :],
    )


def unsigned_payload(plaintext: bytes) -> bytes:
    """The payload of a plaintext, its signature block (if any) dropped unchecked: for the
    readers that authenticate by the vault key alone (restore, `sync check`); a pull verifies."""
    return _split(plaintext)[2] if plaintext.startswith(SIGNED_MAGIC) else plaintext


def _name_aad(scope: str, device_id: bytes) -> bytes:
    return _INFO_MEMBER_NAME + lp(scope.encode()) + lp(device_id)


def seal_member_name(id_key: bytes, scope: str, device_id: bytes, name: str) -> bytes:
    """A member's name as its roster entry holds it: sealed under the space's id key (every
    member has it, the server does not), bound to the space and the device, padded."""
    check_key(id_key, "id key")
    raw = name.encode()
    if not raw or len(raw) > MAX_MEMBER_NAME:
        raise ValueError(f"a member name has 1 to {MAX_MEMBER_NAME} bytes")
    nonce = os.urandom(NONCE_LEN)
    padded = raw.ljust(MAX_MEMBER_NAME, b"\0")
    key = AESGCM(hkdf(id_key, None, _INFO_MEMBER_NAME))
    return nonce + key.encrypt(nonce, padded, _name_aad(scope, device_id))


def open_member_name(id_key: bytes, scope: str, device_id: bytes, sealed: bytes) -> str:
    """The name `seal_member_name` sealed; `TamperedData` when it does not open."""
    key = AESGCM(hkdf(id_key, None, _INFO_MEMBER_NAME))
    try:
        padded = key.decrypt(sealed[:NONCE_LEN], sealed[NONCE_LEN:], _name_aad(scope, device_id))
        return padded.rstrip(b"\0").decode()
    except (InvalidTag, ValueError):
        raise TamperedData(
            f"the roster's name of device {device_id.hex()[:12]} does not open with the space key"
        ) from None
