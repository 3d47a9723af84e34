"""Record envelopes: padding, sealing and opening with associated data, opaque record ids.
Pure functions over bytes, no I/O."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tiermem.core.errors import (
    TamperedData,
    UnsupportedFormat,
)
from tiermem.sync.crypto.base import (
    ENVELOPE_HEADER_LEN,
    FORMAT_V1,
    INFO_RECORD,
    INFO_RECORD_ID,
    LEN_PREFIX,
    MAGIC,
    MAX_U32,
    MIN_BUCKET,
    NONCE_LEN,
    PREFIX,
    RECORD_ID_LEN,
    RECORD_SALT_LEN,
    SUITE_AES_256_GCM,
    TAG_LEN,
    check_epoch,
    check_key,
    hkdf,
    lp,
    random_or,
)

# -------------------------------------------------------------------------------------- padding


def padded_size(length: int, min_bucket: int = MIN_BUCKET) -> int:
    """Size of the padded plaintext: the next power of two ≥ length + 4, at least `min_bucket`.

    So the server learns only a size class. Hot/tree snapshots use `SNAPSHOT_BUCKET` so every
    snapshot below 8 KiB looks the same."""
    if min_bucket < MIN_BUCKET or min_bucket & (min_bucket - 1):
        raise ValueError(f"min_bucket must be a power of two ≥ {MIN_BUCKET}, got {min_bucket}")
    if not 0 <= length <= MAX_U32 - LEN_PREFIX.size:
        raise ValueError(f"plaintext length out of range: {length}")
    return max(min_bucket, 1 << (length + LEN_PREFIX.size - 1).bit_length())


def pad(plaintext: bytes, min_bucket: int = MIN_BUCKET) -> bytes:
    """``u32 len | plaintext | zeros`` up to `padded_size`."""
    size = padded_size(len(plaintext), min_bucket)
    body = LEN_PREFIX.pack(len(plaintext)) + plaintext
    return body + bytes(size - len(body))


def unpad(padded: bytes) -> bytes:
    """Inverse of `pad`. Strict (power-of-two size, zero padding) so there is one encoding."""
    size = len(padded)
    if size < MIN_BUCKET or size & (size - 1):
        raise TamperedData("record plaintext has an invalid padded size")
    (length,) = LEN_PREFIX.unpack_from(padded)
    end = LEN_PREFIX.size + length
    if end > size or padded[end:] != bytes(size - end):
        raise TamperedData("record plaintext has invalid padding")
    return padded[LEN_PREFIX.size : end]


# ------------------------------------------------------------------------------------- envelope


@dataclass(frozen=True, slots=True)
class RecordContext:
    """Where a record belongs. Authenticated as associated data, never sent inside it."""

    agent_id: str
    table: str
    record_id: bytes
    version: str  # a hybrid logical clock, as text
    device_id: bytes  # the writer


@dataclass(frozen=True, slots=True)
class Envelope:
    """A parsed record envelope. `ciphertext` includes the 16-byte GCM tag."""

    fmt: int
    suite: int
    epoch: int
    salt: bytes
    nonce: bytes
    ciphertext: bytes

    def header(self) -> bytes:
        return PREFIX.pack(MAGIC, self.fmt, self.suite, self.epoch) + self.salt + self.nonce

    def to_bytes(self) -> bytes:
        return self.header() + self.ciphertext


def record_aad(
    epoch: int,
    context: RecordContext,
    *,
    fmt: int = FORMAT_V1,
    suite: int = SUITE_AES_256_GCM,
) -> bytes:
    """The canonical associated data of a record (see the module docstring)."""
    return (
        PREFIX.pack(MAGIC, fmt, suite, epoch)
        + lp(context.agent_id.encode())
        + lp(context.table.encode())
        + lp(context.record_id)
        + lp(context.version.encode())
        + lp(context.device_id)
    )


def parse_envelope(data: bytes) -> Envelope:
    """Split an envelope into its fields; nothing is decrypted or authenticated yet."""
    if len(data) < PREFIX.size or data[:4] != MAGIC:
        raise UnsupportedFormat("not a tiermem record envelope")
    _, fmt, suite, epoch = PREFIX.unpack_from(data)
    if fmt != FORMAT_V1:
        raise UnsupportedFormat(f"record envelope format {fmt} is not supported by this tiermem")
    if suite != SUITE_AES_256_GCM:
        raise UnsupportedFormat(f"cipher suite {suite} is not supported by this tiermem")
    if len(data) < ENVELOPE_HEADER_LEN + TAG_LEN:
        raise TamperedData("record envelope is truncated")
    salt_end = PREFIX.size + RECORD_SALT_LEN
    return Envelope(
        fmt=fmt,
        suite=suite,
        epoch=epoch,
        salt=data[PREFIX.size : salt_end],
        nonce=data[salt_end:ENVELOPE_HEADER_LEN],
        ciphertext=data[ENVELOPE_HEADER_LEN:],
    )


def seal_record(
    vault_key: bytes,
    epoch: int,
    context: RecordContext,
    plaintext: bytes,
    *,
    min_bucket: int = MIN_BUCKET,
    salt: bytes | None = None,
    nonce: bytes | None = None,
) -> bytes:
    """Pad and encrypt one record version under a one-time subkey of the epoch's vault key.

    `salt` and `nonce` exist only for known-answer tests; never pass them otherwise (a repeated
    salt would reuse a record key)."""
    check_key(vault_key, "vault key")
    check_epoch(epoch)
    salt = random_or(salt, RECORD_SALT_LEN, "salt")
    nonce = random_or(nonce, NONCE_LEN, "nonce")
    key = hkdf(vault_key, salt, INFO_RECORD)
    sealed = AESGCM(key).encrypt(nonce, pad(plaintext, min_bucket), record_aad(epoch, context))
    return Envelope(FORMAT_V1, SUITE_AES_256_GCM, epoch, salt, nonce, sealed).to_bytes()


def open_record(vault_key: bytes, context: RecordContext, envelope: bytes) -> bytes:
    """Authenticate and decrypt an envelope, returning the unpadded plaintext.

    The caller picks `vault_key` by ``parse_envelope(envelope).epoch``. Any mismatch (bytes,
    epoch, agent, table, record id, version, writer or key) raises `TamperedData`."""
    return open_envelope(vault_key, context, parse_envelope(envelope))


def open_envelope(vault_key: bytes, context: RecordContext, env: Envelope) -> bytes:
    """`open_record` of an envelope parsed already (a reader that looked at its epoch)."""
    check_key(vault_key, "vault key")
    key = hkdf(vault_key, env.salt, INFO_RECORD)
    aad = record_aad(env.epoch, context, fmt=env.fmt, suite=env.suite)
    try:
        padded = AESGCM(key).decrypt(env.nonce, env.ciphertext, aad)
    except InvalidTag:
        raise TamperedData(
            "record failed authentication: it was modified, moved, relabelled "
            "or sealed under another key"
        ) from None
    return unpad(padded)


def record_id(vault_key: bytes, table: str, primary_key: str | bytes) -> bytes:
    """Opaque, deterministic 16-byte id: ``HMAC-SHA256(K_idx, table | 0x00 | pk)[:16]`` with
    ``K_idx = HKDF(vault_key, info="tiermem/v1/record-id")``. The server can upsert by it
    without learning the table or key. `table` must not contain NUL (it is the separator)."""
    return record_id_hasher(vault_key, table)(primary_key)


def record_id_hasher(vault_key: bytes, table: str) -> Callable[[str | bytes], bytes]:
    """`record_id` of one table as a function of the primary key, with the index key derived
    once (deriving it is most of the cost of a record id)."""
    check_key(vault_key, "vault key")
    if not table or "\x00" in table:
        raise ValueError("table must be non-empty and must not contain NUL")
    index_key = hkdf(vault_key, None, INFO_RECORD_ID)
    prefix = hmac.new(index_key, table.encode() + b"\x00", hashlib.sha256)

    def rid(primary_key: str | bytes) -> bytes:
        mac = prefix.copy()
        mac.update(primary_key.encode() if isinstance(primary_key, str) else primary_key)
        return mac.digest()[:RECORD_ID_LEN]

    return rid
