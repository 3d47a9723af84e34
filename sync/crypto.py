"""End-to-end encryption for sync: record envelopes, opaque record ids, recovery keys, key wraps.

Pure functions over bytes, no I/O: nothing here touches files, the network, the keyring or a log.
Only pyca `cryptography` primitives are used (AES-256-GCM, HKDF-SHA256, HMAC-SHA256, X25519,
Argon2id); never Fernet, which has no associated data.

Key hierarchy (see the design notes, Part 3): a random 256-bit *vault key* per agent and epoch
encrypts everything. Human and device secrets only ever *wrap* the vault key, so changing a
passphrase or adding a device re-wraps 32 bytes and never re-encrypts data.

Record envelope, format 1 (all integers big-endian)::

    magic "TMEM" | fmt u8 = 1 | suite u8 = 1 | epoch u32 | salt[32] | nonce[12] | ciphertext || tag[16]

The record key is a one-time subkey ``HKDF-SHA256(vault_key, salt, "tiermem/v1/record")``; the
plaintext is padded (`pad`) before sealing. The associated data is never sent but binds the
envelope to where it belongs::

    "TMEM" | fmt u8 | suite u8 | epoch u32
    | lp(agent_id) | lp(table) | lp(record_id) | lp(version) | lp(writer_device_id)

where ``lp(x) = u32 len(x) || x`` and text is UTF-8, so the encoding is canonical.

Key wrap, format 1::

    magic "TMWK" | fmt u8 = 1 | kind u8 | <kind fields> | nonce[12] | AES-GCM(vault_key)[32 + 16]
    kind 1 recovery:   (no fields)            key = HKDF(recovery_key, info="tiermem/v1/recovery")
    kind 2 passphrase: m_kib u32 | t u32 | p u32 | salt[16]
                                              key = Argon2id(NFKC(passphrase), salt, m, t, p)
    kind 3 device:     ephemeral_pub[32]      key = HKDF(X25519(eph, device),
                                                         salt = eph_pub || device_pub,
                                                         info = "tiermem/v1/device-wrap")
    kind 4 chain:      parent_epoch u32       key = HKDF(vault key of parent_epoch,
                                                         info = "tiermem/v1/chain")

A *chain* wrap holds an older epoch's vault key sealed under the next epoch's key (kind 4, the
wrap's context epoch is the older one): every device that holds the current key reaches every
older one, and a device removed at a rotation never gets the new key.

with associated data ``lp("tiermem/v1/wrap") | lp(agent_id) | epoch u32 | lp(kind name) |
lp(wrap_id) | lp(everything in the blob before the ciphertext)``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import unicodedata
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from tiermem.core.errors import (
    CryptoError,
    InvalidInput,
    KdfParametersOutOfBounds,
    MalformedKey,
    TamperedData,
    UnsupportedFormat,
    WrongKey,
    WrongPassphrase,
)

__all__ = [
    "DEFAULT_KDF_PARAMS",
    "ENVELOPE_HEADER_LEN",
    "FORMAT_V1",
    "KEY_LEN",
    "MAGIC",
    "MIN_BUCKET",
    "PAIRING_NONCE_LEN",
    "RECORD_ID_LEN",
    "SNAPSHOT_BUCKET",
    "SUITE_AES_256_GCM",
    "WRAP_MAGIC",
    "ChainWrap",
    "CryptoError",
    "DeviceWrap",
    "Envelope",
    "KdfParameters",
    "KdfParametersOutOfBounds",
    "MalformedKey",
    "PairingTranscript",
    "PassphraseWrap",
    "RecordContext",
    "RecoveryWrap",
    "TamperedData",
    "UnsupportedFormat",
    "WrapContext",
    "WrongKey",
    "WrongPassphrase",
    "check_kdf_parameters",
    "device_entry_mac",
    "device_public_bytes",
    "format_recovery_key",
    "generate_device_key",
    "generate_recovery_key",
    "generate_vault_key",
    "load_device_private_key",
    "load_device_public_key",
    "open_pairing_bundle",
    "open_record",
    "pad",
    "padded_size",
    "pairing_code",
    "pairing_commitment",
    "parse_envelope",
    "parse_recovery_key",
    "parse_wrap",
    "record_aad",
    "record_id",
    "seal_pairing_bundle",
    "seal_record",
    "short_auth_string",
    "unpad",
    "unwrap_chain",
    "unwrap_for_device",
    "unwrap_with_passphrase",
    "unwrap_with_recovery_key",
    "verify_device_entry",
    "wrap_chain",
    "wrap_for_device",
    "wrap_with_passphrase",
    "wrap_with_recovery_key",
]

# --------------------------------------------------------------------------------------- errors


# ------------------------------------------------------------------------------------ constants

MAGIC: Final = b"TMEM"
WRAP_MAGIC: Final = b"TMWK"
FORMAT_V1: Final = 1
SUITE_AES_256_GCM: Final = 1

KEY_LEN: Final = 32
RECORD_SALT_LEN: Final = 32
NONCE_LEN: Final = 12
TAG_LEN: Final = 16
RECORD_ID_LEN: Final = 16
PASSPHRASE_SALT_LEN: Final = 16
X25519_LEN: Final = 32

_PREFIX = struct.Struct(">4sBBI")  # magic, fmt, suite, epoch
ENVELOPE_HEADER_LEN: Final = _PREFIX.size + RECORD_SALT_LEN + NONCE_LEN  # 54

MIN_BUCKET: Final = 256
SNAPSHOT_BUCKET: Final = 8192
_LEN_PREFIX = struct.Struct(">I")

_INFO_RECORD: Final = b"tiermem/v1/record"
_INFO_RECORD_ID: Final = b"tiermem/v1/record-id"
_INFO_RECOVERY: Final = b"tiermem/v1/recovery"
_INFO_DEVICE_WRAP: Final = b"tiermem/v1/device-wrap"
_WRAP_AAD_LABEL: Final = b"tiermem/v1/wrap"
_RECOVERY_CHECK_LABEL: Final = b"tiermem/v1/recovery-check"
_SAS_LABEL: Final = b"tiermem/v1/sas"
_INFO_CHAIN: Final = b"tiermem/v1/chain"
_INFO_DEVICE_LIST: Final = b"tiermem/v1/device-list"
_INFO_PAIRING: Final = b"tiermem/v1/pairing"
_PAIRING_CODE_LABEL: Final = b"tiermem/v1/pairing-code"
_PAIRING_COMMIT_LABEL: Final = b"tiermem/v1/pairing-commit"

_MAX_U32: Final = 0xFFFFFFFF


# ------------------------------------------------------------------------------------- helpers


def _lp(data: bytes) -> bytes:
    """Length-prefix `data` (u32 big-endian), so concatenations are unambiguous."""
    return _LEN_PREFIX.pack(len(data)) + data


def _hkdf(ikm: bytes, salt: bytes | None, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_LEN, salt=salt, info=info).derive(ikm)


def _check_key(key: bytes, what: str) -> None:
    if len(key) != KEY_LEN:
        raise ValueError(f"{what} must be {KEY_LEN} bytes, got {len(key)}")


def _check_epoch(epoch: int) -> None:
    if not 0 <= epoch <= _MAX_U32:
        raise ValueError(f"epoch must fit in 32 bits, got {epoch}")


def _random_or(given: bytes | None, length: int, what: str) -> bytes:
    """Fresh randomness, or the injected value (known-answer tests only)."""
    if given is None:
        return os.urandom(length)
    if len(given) != length:
        raise ValueError(f"{what} must be {length} bytes, got {len(given)}")
    return given


def generate_vault_key() -> bytes:
    """A fresh random 256-bit vault key (one per agent and epoch)."""
    return AESGCM.generate_key(bit_length=256)


# -------------------------------------------------------------------------------------- padding


def padded_size(length: int, min_bucket: int = MIN_BUCKET) -> int:
    """Size of the padded plaintext: the next power of two ≥ length + 4, at least `min_bucket`.

    So the server learns only a size class. Hot/tree snapshots use `SNAPSHOT_BUCKET` so every
    snapshot below 8 KiB looks the same."""
    if min_bucket < MIN_BUCKET or min_bucket & (min_bucket - 1):
        raise ValueError(f"min_bucket must be a power of two ≥ {MIN_BUCKET}, got {min_bucket}")
    if not 0 <= length <= _MAX_U32 - _LEN_PREFIX.size:
        raise ValueError(f"plaintext length out of range: {length}")
    return max(min_bucket, 1 << (length + _LEN_PREFIX.size - 1).bit_length())


def pad(plaintext: bytes, min_bucket: int = MIN_BUCKET) -> bytes:
    """``u32 len | plaintext | zeros`` up to `padded_size`."""
    size = padded_size(len(plaintext), min_bucket)
    body = _LEN_PREFIX.pack(len(plaintext)) + plaintext
    return body + bytes(size - len(body))


def unpad(padded: bytes) -> bytes:
    """Inverse of `pad`. Strict (power-of-two size, zero padding) so there is one encoding."""
    size = len(padded)
    if size < MIN_BUCKET or size & (size - 1):
        raise TamperedData("record plaintext has an invalid padded size")
    (length,) = _LEN_PREFIX.unpack_from(padded)
    end = _LEN_PREFIX.size + length
    if end > size or any(padded[end:]):
        raise TamperedData("record plaintext has invalid padding")
    return padded[_LEN_PREFIX.size : end]


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
        return _PREFIX.pack(MAGIC, self.fmt, self.suite, self.epoch) + self.salt + self.nonce

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
        _PREFIX.pack(MAGIC, fmt, suite, epoch)
        + _lp(context.agent_id.encode())
        + _lp(context.table.encode())
        + _lp(context.record_id)
        + _lp(context.version.encode())
        + _lp(context.device_id)
    )


def parse_envelope(data: bytes) -> Envelope:
    """Split an envelope into its fields; nothing is decrypted or authenticated yet."""
    if len(data) < _PREFIX.size or data[:4] != MAGIC:
        raise UnsupportedFormat("not a tiermem record envelope")
    _, fmt, suite, epoch = _PREFIX.unpack_from(data)
    if fmt != FORMAT_V1:
        raise UnsupportedFormat(f"record envelope format {fmt} is not supported by this tiermem")
    if suite != SUITE_AES_256_GCM:
        raise UnsupportedFormat(f"cipher suite {suite} is not supported by this tiermem")
    if len(data) < ENVELOPE_HEADER_LEN + TAG_LEN:
        raise TamperedData("record envelope is truncated")
    salt_end = _PREFIX.size + RECORD_SALT_LEN
    return Envelope(
        fmt=fmt,
        suite=suite,
        epoch=epoch,
        salt=data[_PREFIX.size : salt_end],
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
    _check_key(vault_key, "vault key")
    _check_epoch(epoch)
    salt = _random_or(salt, RECORD_SALT_LEN, "salt")
    nonce = _random_or(nonce, NONCE_LEN, "nonce")
    key = _hkdf(vault_key, salt, _INFO_RECORD)
    sealed = AESGCM(key).encrypt(nonce, pad(plaintext, min_bucket), record_aad(epoch, context))
    return Envelope(FORMAT_V1, SUITE_AES_256_GCM, epoch, salt, nonce, sealed).to_bytes()


def open_record(vault_key: bytes, context: RecordContext, envelope: bytes) -> bytes:
    """Authenticate and decrypt an envelope, returning the unpadded plaintext.

    The caller picks `vault_key` by ``parse_envelope(envelope).epoch``. Any mismatch (bytes,
    epoch, agent, table, record id, version, writer or key) raises `TamperedData`."""
    _check_key(vault_key, "vault key")
    env = parse_envelope(envelope)
    key = _hkdf(vault_key, env.salt, _INFO_RECORD)
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
    _check_key(vault_key, "vault key")
    if not table or "\x00" in table:
        raise ValueError("table must be non-empty and must not contain NUL")
    pk = primary_key.encode() if isinstance(primary_key, str) else primary_key
    index_key = _hkdf(vault_key, None, _INFO_RECORD_ID)
    mac = hmac.new(index_key, table.encode() + b"\x00" + pk, hashlib.sha256).digest()
    return mac[:RECORD_ID_LEN]


# ---------------------------------------------------------------------------------- recovery key

# Crockford base32: no I, L, O, U; on input O reads as 0 and I/L as 1.
_B32_ALPHABET: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_B32_DECODE: Final = {c: i for i, c in enumerate(_B32_ALPHABET)} | {"O": 0, "I": 1, "L": 1}
_RK_CHECK_LEN: Final = 3  # 32-byte key + 3-byte checksum = 280 bits = 56 characters
_RK_CHARS: Final = (KEY_LEN + _RK_CHECK_LEN) * 8 // 5
_RK_GROUP: Final = 4


def _recovery_check(key: bytes) -> bytes:
    return hashlib.sha256(_RECOVERY_CHECK_LABEL + key).digest()[:_RK_CHECK_LEN]


def generate_recovery_key() -> bytes:
    """256 random bits. Shown once (`format_recovery_key`); tiermem never stores it."""
    return os.urandom(KEY_LEN)


def format_recovery_key(key: bytes) -> str:
    """56 Crockford base32 characters in 14 dash-separated groups of 4.

    The last 24 bits (the final group and one bit before it) are a checksum, so a typo is
    reported as `MalformedKey` rather than as a wrong key."""
    _check_key(key, "recovery key")
    value = int.from_bytes(key + _recovery_check(key), "big")
    chars = [_B32_ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(_RK_CHARS))]
    text = "".join(chars)
    return "-".join(text[i : i + _RK_GROUP] for i in range(0, _RK_CHARS, _RK_GROUP))


def parse_recovery_key(text: str) -> bytes:
    """Inverse of `format_recovery_key`, tolerant of case, spaces and dashes (and of O/0, I/L/1).

    Raises `MalformedKey` for a wrong length, a character outside the alphabet or a checksum
    mismatch; the message names a position at most, never the characters."""
    compact = "".join(c for c in text.upper() if not c.isspace() and c != "-")
    if len(compact) != _RK_CHARS:
        raise MalformedKey(
            f"recovery key must have {_RK_CHARS} characters "
            f"({_RK_CHARS // _RK_GROUP} groups of {_RK_GROUP}), got {len(compact)}"
        )
    value = 0
    for position, char in enumerate(compact):
        digit = _B32_DECODE.get(char)
        if digit is None:
            group = position // _RK_GROUP + 1
            raise MalformedKey(f"recovery key has an invalid character in group {group}")
        value = (value << 5) | digit
    raw = value.to_bytes(KEY_LEN + _RK_CHECK_LEN, "big")
    key, check = raw[:KEY_LEN], raw[KEY_LEN:]
    if not hmac.compare_digest(check, _recovery_check(key)):
        raise MalformedKey("recovery key has a typo (its checksum does not match)")
    return key


# ------------------------------------------------------------------------------------ key wraps


@dataclass(frozen=True, slots=True)
class WrapContext:
    """Where a key wrap belongs (the `key_wraps` row). Authenticated, not stored in the blob."""

    agent_id: str
    epoch: int
    wrap_id: bytes


@dataclass(frozen=True, slots=True)
class KdfParameters:
    """Argon2id cost: memory in KiB, iterations (t) and lanes (p)."""

    memory_kib: int = 64 * 1024
    iterations: int = 3
    lanes: int = 4


DEFAULT_KDF_PARAMS: Final = KdfParameters()
# Accepted on both wrap and unwrap (age's maxWorkFactor idea). The lower bounds are a floor for
# what can be decoded, not a recommendation: new wraps should use DEFAULT_KDF_PARAMS.
_KDF_BOUNDS: Final = {
    "memory_kib": (8 * 1024, 1024 * 1024),
    "iterations": (1, 10),
    "lanes": (1, 16),
}


def check_kdf_parameters(params: KdfParameters) -> None:
    """Raise `KdfParametersOutOfBounds` unless 8 MiB ≤ m ≤ 1 GiB, 1 ≤ t ≤ 10, 1 ≤ p ≤ 16."""
    for name, (low, high) in _KDF_BOUNDS.items():
        value = getattr(params, name)
        if not low <= value <= high:
            raise KdfParametersOutOfBounds(
                f"Argon2id parameter {name}={value} is outside the accepted range {low}..{high}"
            )


@dataclass(frozen=True, slots=True)
class RecoveryWrap:
    """A parsed recovery-key wrap. `header()` is every byte before the ciphertext."""

    nonce: bytes
    ciphertext: bytes

    kind: ClassVar[str] = "recovery"

    def header(self) -> bytes:
        return WRAP_MAGIC + bytes((FORMAT_V1, _KIND_CODES[self.kind])) + self.nonce

    def to_bytes(self) -> bytes:
        return self.header() + self.ciphertext


@dataclass(frozen=True, slots=True)
class PassphraseWrap:
    """A parsed passphrase wrap; `params` are as stored, not yet checked against the bounds."""

    params: KdfParameters
    salt: bytes
    nonce: bytes
    ciphertext: bytes

    kind: ClassVar[str] = "passphrase"

    def header(self) -> bytes:
        p = self.params
        return (
            WRAP_MAGIC
            + bytes((FORMAT_V1, _KIND_CODES[self.kind]))
            + _KDF_STRUCT.pack(p.memory_kib, p.iterations, p.lanes)
            + self.salt
            + self.nonce
        )

    def to_bytes(self) -> bytes:
        return self.header() + self.ciphertext


@dataclass(frozen=True, slots=True)
class DeviceWrap:
    """A parsed X25519 device wrap carrying the sender's one-time public key."""

    ephemeral_public: bytes
    nonce: bytes
    ciphertext: bytes

    kind: ClassVar[str] = "device"

    def header(self) -> bytes:
        return (
            WRAP_MAGIC
            + bytes((FORMAT_V1, _KIND_CODES[self.kind]))
            + self.ephemeral_public
            + self.nonce
        )

    def to_bytes(self) -> bytes:
        return self.header() + self.ciphertext


@dataclass(frozen=True, slots=True)
class ChainWrap:
    """A parsed chain wrap: an older epoch's vault key under the key of `parent_epoch`."""

    parent_epoch: int
    nonce: bytes
    ciphertext: bytes

    kind: ClassVar[str] = "chain"

    def header(self) -> bytes:
        return (
            WRAP_MAGIC
            + bytes((FORMAT_V1, _KIND_CODES[self.kind]))
            + _LEN_PREFIX.pack(self.parent_epoch)
            + self.nonce
        )

    def to_bytes(self) -> bytes:
        return self.header() + self.ciphertext


Wrap = RecoveryWrap | PassphraseWrap | DeviceWrap | ChainWrap
_W = TypeVar("_W", RecoveryWrap, PassphraseWrap, DeviceWrap, ChainWrap)

_KIND_CODES: Final = {"recovery": 1, "passphrase": 2, "device": 3, "chain": 4}
_KDF_STRUCT = struct.Struct(">III")
_WRAPPED_LEN: Final = KEY_LEN + TAG_LEN
# Bytes after magic+fmt+kind and before the nonce, per kind.
_KIND_FIELDS_LEN: Final = {
    1: 0,
    2: _KDF_STRUCT.size + PASSPHRASE_SALT_LEN,
    3: X25519_LEN,
    4: _LEN_PREFIX.size,
}


def parse_wrap(blob: bytes) -> Wrap:
    """Split a key-wrap blob into its fields; lengths are exact (no trailing bytes)."""
    if len(blob) < 6 or blob[:4] != WRAP_MAGIC:
        raise UnsupportedFormat("not a tiermem key wrap")
    fmt, code = blob[4], blob[5]
    if fmt != FORMAT_V1:
        raise UnsupportedFormat(f"key wrap format {fmt} is not supported by this tiermem")
    if code not in _KIND_FIELDS_LEN:
        raise UnsupportedFormat(f"key wrap kind {code} is not supported by this tiermem")
    fields_end = 6 + _KIND_FIELDS_LEN[code]
    nonce_end = fields_end + NONCE_LEN
    if len(blob) != nonce_end + _WRAPPED_LEN:
        raise TamperedData("key wrap is truncated or has trailing bytes")
    fields, nonce, ciphertext = blob[6:fields_end], blob[fields_end:nonce_end], blob[nonce_end:]
    if code == 1:
        return RecoveryWrap(nonce, ciphertext)
    if code == 2:
        m, t, p = _KDF_STRUCT.unpack_from(fields)
        return PassphraseWrap(KdfParameters(m, t, p), fields[_KDF_STRUCT.size :], nonce, ciphertext)
    if code == 4:
        (parent,) = _LEN_PREFIX.unpack(fields)
        return ChainWrap(parent, nonce, ciphertext)
    return DeviceWrap(fields, nonce, ciphertext)


def _wrap_aad(context: WrapContext, wrap: Wrap) -> bytes:
    _check_epoch(context.epoch)
    return (
        _lp(_WRAP_AAD_LABEL)
        + _lp(context.agent_id.encode())
        + _LEN_PREFIX.pack(context.epoch)
        + _lp(wrap.kind.encode())
        + _lp(context.wrap_id)
        + _lp(wrap.header())
    )


def _expect_kind(blob: bytes, kind: type[_W]) -> _W:
    wrap = parse_wrap(blob)
    if not isinstance(wrap, kind):
        raise UnsupportedFormat(f"this is a {wrap.kind} key wrap, not a {kind.kind} key wrap")
    return wrap


def _unwrap(key: bytes, wrap: Wrap, context: WrapContext) -> bytes | None:
    """The vault key, or None when authentication fails."""
    try:
        return AESGCM(key).decrypt(wrap.nonce, wrap.ciphertext, _wrap_aad(context, wrap))
    except InvalidTag:
        return None


# Recovery key ------------------------------------------------------------------------------


def wrap_with_recovery_key(
    vault_key: bytes, recovery_key: bytes, context: WrapContext, *, nonce: bytes | None = None
) -> bytes:
    """Wrap the vault key under ``HKDF(recovery_key, info="tiermem/v1/recovery")``. No
    stretching: the recovery key has full entropy. `nonce` is for known-answer tests only."""
    _check_key(vault_key, "vault key")
    _check_key(recovery_key, "recovery key")
    shell = RecoveryWrap(_random_or(nonce, NONCE_LEN, "nonce"), b"")
    key = _hkdf(recovery_key, None, _INFO_RECOVERY)
    sealed = AESGCM(key).encrypt(shell.nonce, vault_key, _wrap_aad(context, shell))
    return RecoveryWrap(shell.nonce, sealed).to_bytes()


def unwrap_with_recovery_key(blob: bytes, recovery_key: bytes, context: WrapContext) -> bytes:
    """The vault key, or `WrongKey` (which also covers a wrap tampered with or moved to another
    agent/epoch/id: AES-GCM cannot tell those apart)."""
    _check_key(recovery_key, "recovery key")
    wrap = _expect_kind(blob, RecoveryWrap)
    vault_key = _unwrap(_hkdf(recovery_key, None, _INFO_RECOVERY), wrap, context)
    if vault_key is None:
        raise WrongKey("the recovery key does not unlock this vault")
    return vault_key


# Passphrase --------------------------------------------------------------------------------


def _passphrase_key(passphrase: str, salt: bytes, params: KdfParameters) -> bytes:
    normalized = unicodedata.normalize("NFKC", passphrase)
    # Checked up front rather than by catching UnicodeEncodeError: that exception holds the whole
    # passphrase and would stay reachable as __context__ even when raising `from None`.
    if any("\ud800" <= ch <= "\udfff" for ch in normalized):
        raise InvalidInput("the passphrase contains characters that cannot be encoded")
    secret = normalized.encode("utf-8")
    kdf = Argon2id(
        salt=salt,
        length=KEY_LEN,
        iterations=params.iterations,
        lanes=params.lanes,
        memory_cost=params.memory_kib,
    )
    return kdf.derive(secret)


def wrap_with_passphrase(
    vault_key: bytes,
    passphrase: str,
    context: WrapContext,
    *,
    params: KdfParameters = DEFAULT_KDF_PARAMS,
    salt: bytes | None = None,
    nonce: bytes | None = None,
) -> bytes:
    """Wrap the vault key under Argon2id(NFKC(passphrase)). The parameters are stored in the
    wrap, so raising them later is a re-wrap. `salt`/`nonce` are for known-answer tests only."""
    _check_key(vault_key, "vault key")
    if not passphrase:
        raise InvalidInput("the passphrase must not be empty")
    check_kdf_parameters(params)
    shell = PassphraseWrap(
        params,
        _random_or(salt, PASSPHRASE_SALT_LEN, "salt"),
        _random_or(nonce, NONCE_LEN, "nonce"),
        b"",
    )
    key = _passphrase_key(passphrase, shell.salt, params)
    sealed = AESGCM(key).encrypt(shell.nonce, vault_key, _wrap_aad(context, shell))
    return PassphraseWrap(params, shell.salt, shell.nonce, sealed).to_bytes()


def unwrap_with_passphrase(blob: bytes, passphrase: str, context: WrapContext) -> bytes:
    """The vault key, `WrongPassphrase`, or `KdfParametersOutOfBounds` (checked before any
    Argon2id work). A tampered wrap also reads as `WrongPassphrase`."""
    wrap = _expect_kind(blob, PassphraseWrap)
    check_kdf_parameters(wrap.params)
    vault_key = _unwrap(_passphrase_key(passphrase, wrap.salt, wrap.params), wrap, context)
    if vault_key is None:
        raise WrongPassphrase("the passphrase does not unlock this vault")
    return vault_key


# Device (X25519) ---------------------------------------------------------------------------


def generate_device_key() -> X25519PrivateKey:
    """A new device's X25519 key pair (the private half belongs in the OS keyring)."""
    return X25519PrivateKey.generate()


def device_public_bytes(key: X25519PrivateKey | X25519PublicKey) -> bytes:
    """The raw 32-byte public key."""
    public = key.public_key() if isinstance(key, X25519PrivateKey) else key
    return public.public_bytes_raw()


def load_device_public_key(raw: bytes) -> X25519PublicKey:
    if len(raw) != X25519_LEN:
        raise MalformedKey(f"a device public key is {X25519_LEN} bytes, got {len(raw)}")
    return X25519PublicKey.from_public_bytes(raw)


def load_device_private_key(raw: bytes) -> X25519PrivateKey:
    if len(raw) != X25519_LEN:
        raise MalformedKey(f"a device private key is {X25519_LEN} bytes, got {len(raw)}")
    return X25519PrivateKey.from_private_bytes(raw)


def _device_wrap_key(shared: bytes, ephemeral_public: bytes, recipient_public: bytes) -> bytes:
    return _hkdf(shared, ephemeral_public + recipient_public, _INFO_DEVICE_WRAP)


def wrap_for_device(
    vault_key: bytes,
    recipient: X25519PublicKey,
    context: WrapContext,
    *,
    ephemeral_key: X25519PrivateKey | None = None,
    nonce: bytes | None = None,
) -> bytes:
    """age-style X25519 wrap of the vault key to a device's public key.
    `ephemeral_key`/`nonce` are for known-answer tests only."""
    _check_key(vault_key, "vault key")
    ephemeral = X25519PrivateKey.generate() if ephemeral_key is None else ephemeral_key
    try:
        shared = ephemeral.exchange(recipient)
    except ValueError:
        raise MalformedKey("the device public key is not a usable X25519 key") from None
    shell = DeviceWrap(device_public_bytes(ephemeral), _random_or(nonce, NONCE_LEN, "nonce"), b"")
    key = _device_wrap_key(shared, shell.ephemeral_public, recipient.public_bytes_raw())
    sealed = AESGCM(key).encrypt(shell.nonce, vault_key, _wrap_aad(context, shell))
    return DeviceWrap(shell.ephemeral_public, shell.nonce, sealed).to_bytes()


def unwrap_for_device(blob: bytes, device_key: X25519PrivateKey, context: WrapContext) -> bytes:
    """The vault key, or `WrongKey` if this device's key does not unlock the wrap."""
    wrap = _expect_kind(blob, DeviceWrap)
    try:
        shared = device_key.exchange(X25519PublicKey.from_public_bytes(wrap.ephemeral_public))
    except ValueError:  # a low-order ephemeral point gives an all-zero secret
        raise TamperedData("key wrap holds an invalid ephemeral key") from None
    key = _device_wrap_key(shared, wrap.ephemeral_public, device_public_bytes(device_key))
    vault_key = _unwrap(key, wrap, context)
    if vault_key is None:
        raise WrongKey("this device's key does not unlock this vault")
    return vault_key


# Chain (older epoch under the next one) ----------------------------------------------------


def _chain_key(parent_key: bytes) -> bytes:
    return _hkdf(parent_key, None, _INFO_CHAIN)


def wrap_chain(
    old_key: bytes,
    parent_key: bytes,
    parent_epoch: int,
    context: WrapContext,
    *,
    nonce: bytes | None = None,
) -> bytes:
    """Wrap the vault key of epoch ``context.epoch`` under the key of the newer `parent_epoch`.
    `nonce` is for known-answer tests only."""
    _check_key(old_key, "vault key")
    _check_key(parent_key, "parent vault key")
    _check_epoch(parent_epoch)
    if parent_epoch <= context.epoch:
        raise ValueError("a chain wrap's parent epoch must be newer than the wrapped epoch")
    shell = ChainWrap(parent_epoch, _random_or(nonce, NONCE_LEN, "nonce"), b"")
    sealed = AESGCM(_chain_key(parent_key)).encrypt(shell.nonce, old_key, _wrap_aad(context, shell))
    return ChainWrap(parent_epoch, shell.nonce, sealed).to_bytes()


def unwrap_chain(blob: bytes, parent_key: bytes, context: WrapContext) -> bytes:
    """The older epoch's vault key, or `WrongKey` when `parent_key` does not open the wrap (or
    the wrap was modified or moved)."""
    _check_key(parent_key, "parent vault key")
    wrap = _expect_kind(blob, ChainWrap)
    if wrap.parent_epoch <= context.epoch:
        raise TamperedData("chain wrap points to an epoch that is not newer")
    old_key = _unwrap(_chain_key(parent_key), wrap, context)
    if old_key is None:
        raise WrongKey("the newer vault key does not unlock this chain wrap")
    return old_key


# Device list entries ------------------------------------------------------------------------


def device_entry_mac(
    vault_key: bytes, agent_id: str, epoch: int, device_id: bytes, public_key: bytes
) -> bytes:
    """HMAC-SHA256 over one entry of the server's device list under a subkey of the epoch's
    vault key: the server (which holds no vault key) cannot add a device of its own, so a
    rotation never wraps the new key to a public key it slipped in."""
    _check_key(vault_key, "vault key")
    _check_epoch(epoch)
    key = _hkdf(vault_key, None, _INFO_DEVICE_LIST)
    message = _lp(agent_id.encode()) + _LEN_PREFIX.pack(epoch) + _lp(device_id) + _lp(public_key)
    return hmac.new(key, message, hashlib.sha256).digest()


def verify_device_entry(
    mac: bytes, vault_key: bytes, agent_id: str, epoch: int, device_id: bytes, public_key: bytes
) -> bool:
    expected = device_entry_mac(vault_key, agent_id, epoch, device_id, public_key)
    return hmac.compare_digest(mac, expected)


# Short authentication string --------------------------------------------------------------

# The PGP word list's "even" (two-syllable) table: 256 words chosen to be hard to confuse.
_SAS_WORDLIST: Final = (
    "aardvark absurd accrue acme adrift adult afflict ahead aimless algol allow alone ammo "
    "ancient apple artist assume athens atlas aztec baboon backfield backward banjo beaming "
    "bedlamp beehive beeswax befriend belfast berserk billiard bison blackjack blockade "
    "blowtorch bluebird bombast bookshelf brackish breadline breakup brickyard briefcase "
    "burbank button buzzard cement chairlift chatter checkup chisel choking chopper christmas "
    "clamshell classic classroom cleanup clockwork cobra commence concert cowbell crackdown "
    "cranky crowfoot crucial crumpled crusade cubic dashboard deadbolt deckhand dogsled "
    "dragnet drainage dreadful drifter dropper drumbeat drunken dupont dwelling eating edict "
    "egghead eightball endorse endow enlist erase escape exceed eyeglass eyetooth facial "
    "fallout flagpole flatfoot flytrap fracture framework freedom frighten gazelle geiger "
    "glitter glucose goggles goldfish gremlin guidance hamlet highchair hockey indoors "
    "indulge inverse involve island jawbone keyboard kickoff kiwi klaxon locale lockup merit "
    "minnow miser mohawk mural music necklace neptune newborn nightbird oakland obtuse "
    "offload optic orca payday peachy pheasant physique playhouse pluto preclude prefer "
    "preshrunk printer prowler pupil puppy python quadrant quiver quota ragtime ratchet "
    "rebirth reform regain reindeer rematch repay retouch revenge reward rhythm ribcage "
    "ringbolt robust rocker ruffled sailboat sawdust scallion scenic scorecard scotland "
    "seabird select sentence shadow shamrock showgirl skullcap skydive slingshot slowdown "
    "snapline snapshot snowcap snowslide solo southward soybean spaniel spearhead spellbind "
    "spheroid spigot spindle spyglass stagehand stagnate stairway standard stapler steamship "
    "sterling stockman stopwatch stormy sugar surmount suspense sweatband swelter tactics "
    "talon tapeworm tempest tiger tissue tonic topmost tracker transit trauma treadmill "
    "trojan trouble tumor tunnel tycoon uncut unearth unwind uproot upset upshot vapor "
    "village virus vulcan waffle wallet watchword wayside willow woodlark zulu"
)
_SAS_WORDS: Final = tuple(_SAS_WORDLIST.split())
_SAS_LEN: Final = 6  # 48 bits


def short_auth_string(public_key: X25519PublicKey | bytes) -> str:
    """Six words (48 bits) from ``SHA-256("tiermem/v1/sas" | public key)``, for both screens to
    show during pairing so a swapped key is noticed."""
    raw = public_key if isinstance(public_key, bytes) else public_key.public_bytes_raw()
    if len(raw) != X25519_LEN:
        raise MalformedKey(f"a device public key is {X25519_LEN} bytes, got {len(raw)}")
    digest = hashlib.sha256(_SAS_LABEL + raw).digest()
    return " ".join(_SAS_WORDS[b] for b in digest[:_SAS_LEN])


# Pairing ----------------------------------------------------------------------------------

PAIRING_NONCE_LEN: Final = 16


@dataclass(frozen=True, slots=True)
class PairingTranscript:
    """Everything both devices saw during one pairing. The code shown on both screens and the
    answer's key are derived from all of it, so a key swapped by the server changes the code."""

    agent_id: str
    pairing_id: bytes
    new_public: bytes
    new_nonce: bytes
    approver_public: bytes
    approver_nonce: bytes

    def to_bytes(self) -> bytes:
        return (
            _lp(self.agent_id.encode())
            + _lp(self.pairing_id)
            + _lp(self.new_public)
            + _lp(self.new_nonce)
            + _lp(self.approver_public)
            + _lp(self.approver_nonce)
        )


def pairing_commitment(new_public: bytes, new_nonce: bytes) -> bytes:
    """What the new device posts first: ``SHA-256(label | lp(public) | lp(nonce))``. It reveals
    the nonce only after the existing device's nonce is on the server, so nobody in between can
    search for two keys whose codes collide (the Bluetooth numeric-comparison commitment)."""
    if len(new_public) != X25519_LEN:
        raise MalformedKey(f"a device public key is {X25519_LEN} bytes, got {len(new_public)}")
    return hashlib.sha256(_PAIRING_COMMIT_LABEL + _lp(new_public) + _lp(new_nonce)).digest()


def pairing_code(transcript: PairingTranscript) -> str:
    """Six words (48 bits) binding both public keys, both nonces, the agent and the pairing."""
    digest = hashlib.sha256(_PAIRING_CODE_LABEL + transcript.to_bytes()).digest()
    return " ".join(_SAS_WORDS[b] for b in digest[:_SAS_LEN])


def _pairing_key(own: X25519PrivateKey, peer_public: bytes, transcript: PairingTranscript) -> bytes:
    try:
        shared = own.exchange(load_device_public_key(peer_public))
    except ValueError:
        raise TamperedData("the pairing holds an invalid public key") from None
    salt = hashlib.sha256(transcript.to_bytes()).digest()
    return _hkdf(shared, salt, _INFO_PAIRING)


_BUNDLE = struct.Struct(">I")


def seal_pairing_bundle(
    approver_key: X25519PrivateKey,
    transcript: PairingTranscript,
    epoch: int,
    vault_key: bytes,
    *,
    nonce: bytes | None = None,
) -> bytes:
    """The approval: ``nonce | AES-GCM(epoch u32 | vault key)`` under a key only the two
    devices of `transcript` can derive (static X25519 between the approver's device key and the
    new device's key), associated data = the transcript."""
    _check_key(vault_key, "vault key")
    _check_epoch(epoch)
    if device_public_bytes(approver_key) != transcript.approver_public:
        raise ValueError("the approver key does not match the transcript")
    key = _pairing_key(approver_key, transcript.new_public, transcript)
    nonce = _random_or(nonce, NONCE_LEN, "nonce")
    plain = _BUNDLE.pack(epoch) + vault_key
    return nonce + AESGCM(key).encrypt(nonce, plain, transcript.to_bytes())


def open_pairing_bundle(
    new_key: X25519PrivateKey, transcript: PairingTranscript, blob: bytes
) -> tuple[int, bytes]:
    """(epoch, vault key) of an approval, or `WrongKey` when it was not made by the device whose
    public key is in `transcript` for this very pairing."""
    if device_public_bytes(new_key) != transcript.new_public:
        raise ValueError("the device key does not match the transcript")
    if len(blob) != NONCE_LEN + _BUNDLE.size + KEY_LEN + TAG_LEN:
        raise TamperedData("the pairing answer is truncated or has trailing bytes")
    key = _pairing_key(new_key, transcript.approver_public, transcript)
    try:
        plain = AESGCM(key).decrypt(blob[:NONCE_LEN], blob[NONCE_LEN:], transcript.to_bytes())
    except InvalidTag:
        raise WrongKey(
            "the pairing answer does not authenticate: it was not made by the device whose "
            "code was compared"
        ) from None
    (epoch,) = _BUNDLE.unpack_from(plain)
    return epoch, plain[_BUNDLE.size :]
