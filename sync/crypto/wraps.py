"""Recovery keys and key wraps (recovery, passphrase, device, chain) of the vault key, and the
MAC that vouches for a device entry. Pure functions over bytes, no I/O."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import struct
import unicodedata
from dataclasses import dataclass
from typing import ClassVar, Final, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

from tiermem.core.errors import (
    InvalidInput,
    KdfParametersOutOfBounds,
    MalformedKey,
    TamperedData,
    UnsupportedFormat,
    WrongKey,
    WrongPassphrase,
)
from tiermem.sync.crypto.base import (
    AGENT_TAG_LEN,
    COMMIT_LEN,
    FORMAT_V1,
    INFO_AGENT_TAG,
    INFO_CHAIN,
    INFO_DEVICE_LIST,
    INFO_DEVICE_WRAP,
    INFO_RECOVERY,
    INFO_WRAP_COMMIT,
    KEY_LEN,
    LEN_PREFIX,
    NONCE_LEN,
    PASSPHRASE_SALT_LEN,
    RECOVERY_CHECK_LABEL,
    TAG_LEN,
    WRAP_AAD_LABEL,
    WRAP_FORMAT,
    WRAP_MAGIC,
    X25519_LEN,
    check_epoch,
    check_key,
    hkdf,
    lp,
    random_or,
)

# ---------------------------------------------------------------------------------- recovery key

# Crockford base32: no I, L, O, U; on input O reads as 0 and I/L as 1.
_B32_ALPHABET: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_B32_DECODE: Final = {c: i for i, c in enumerate(_B32_ALPHABET)} | {"O": 0, "I": 1, "L": 1}
_RK_CHECK_LEN: Final = 3  # 32-byte key + 3-byte checksum = 280 bits = 56 characters
_RK_CHARS: Final = (KEY_LEN + _RK_CHECK_LEN) * 8 // 5
_RK_GROUP: Final = 4


def _recovery_check(key: bytes) -> bytes:
    return hashlib.sha256(RECOVERY_CHECK_LABEL + key).digest()[:_RK_CHECK_LEN]


def generate_recovery_key() -> bytes:
    """256 random bits. Shown once (`format_recovery_key`); tiermem never stores it."""
    return os.urandom(KEY_LEN)


def format_recovery_key(key: bytes) -> str:
    """56 Crockford base32 characters in 14 dash-separated groups of 4.

    The last 24 bits (the final group and one bit before it) are a checksum, so a typo is
    reported as `MalformedKey` rather than as a wrong key."""
    check_key(key, "recovery key")
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


def keyed_agent_tag(recovery_key: bytes, agent_id: str) -> bytes:
    """How the server files a vault's rows: ``HMAC-SHA256(HKDF(recovery key,
    "tiermem/v1/agent-tag-key"), agent id)[:16]``. Without the recovery key nobody can tell
    which agent id a tag stands for (an unkeyed hash lets a guessed id be confirmed)."""
    check_key(recovery_key, "recovery key")
    tag_key = hkdf(recovery_key, None, INFO_AGENT_TAG)
    return hmac.new(tag_key, agent_id.encode(), hashlib.sha256).digest()[:AGENT_TAG_LEN]


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


class _WrapBytes:
    """The layout every wrap kind shares: magic, format and kind bytes, the kind's own fields
    (`_fields`), the nonce, then the ciphertext and the key commitment."""

    __slots__ = ()
    kind: ClassVar[str]
    nonce: bytes
    ciphertext: bytes
    fmt: int
    commit: bytes

    def _fields(self) -> bytes:
        return b""

    def header(self) -> bytes:
        """Every byte before the ciphertext."""
        return WRAP_MAGIC + bytes((self.fmt, _KIND_CODES[self.kind])) + self._fields() + self.nonce

    def to_bytes(self) -> bytes:
        return self.header() + self.ciphertext + self.commit


@dataclass(frozen=True, slots=True)
class RecoveryWrap(_WrapBytes):
    """A parsed recovery-key wrap."""

    nonce: bytes
    ciphertext: bytes
    fmt: int = WRAP_FORMAT
    commit: bytes = b""

    kind: ClassVar[str] = "recovery"


@dataclass(frozen=True, slots=True)
class PassphraseWrap(_WrapBytes):
    """A parsed passphrase wrap; `params` are as stored, not yet checked against the bounds."""

    params: KdfParameters
    salt: bytes
    nonce: bytes
    ciphertext: bytes
    fmt: int = WRAP_FORMAT
    commit: bytes = b""

    kind: ClassVar[str] = "passphrase"

    def _fields(self) -> bytes:
        p = self.params
        return _KDF_STRUCT.pack(p.memory_kib, p.iterations, p.lanes) + self.salt


@dataclass(frozen=True, slots=True)
class DeviceWrap(_WrapBytes):
    """A parsed X25519 device wrap carrying the sender's one-time public key."""

    ephemeral_public: bytes
    nonce: bytes
    ciphertext: bytes
    fmt: int = WRAP_FORMAT
    commit: bytes = b""

    kind: ClassVar[str] = "device"

    def _fields(self) -> bytes:
        return self.ephemeral_public


@dataclass(frozen=True, slots=True)
class ChainWrap(_WrapBytes):
    """A parsed chain wrap: an older epoch's vault key under the key of `parent_epoch`."""

    parent_epoch: int
    nonce: bytes
    ciphertext: bytes
    fmt: int = WRAP_FORMAT
    commit: bytes = b""

    kind: ClassVar[str] = "chain"

    def _fields(self) -> bytes:
        return LEN_PREFIX.pack(self.parent_epoch)


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
    4: LEN_PREFIX.size,
}


def parse_wrap(blob: bytes) -> Wrap:
    """Split a key-wrap blob into its fields; lengths are exact (no trailing bytes). Format 1
    (no key commitment) is still read; format 2 ends with the commitment."""
    if len(blob) < 6 or blob[:4] != WRAP_MAGIC:
        raise UnsupportedFormat("not a tiermem key wrap")
    fmt, code = blob[4], blob[5]
    if fmt not in (FORMAT_V1, WRAP_FORMAT):
        raise UnsupportedFormat(f"key wrap format {fmt} is not supported by this tiermem")
    if code not in _KIND_FIELDS_LEN:
        raise UnsupportedFormat(f"key wrap kind {code} is not supported by this tiermem")
    fields_end = 6 + _KIND_FIELDS_LEN[code]
    nonce_end = fields_end + NONCE_LEN
    sealed_end = nonce_end + _WRAPPED_LEN
    commit_len = COMMIT_LEN if fmt == WRAP_FORMAT else 0
    if len(blob) != sealed_end + commit_len:
        raise TamperedData("key wrap is truncated or has trailing bytes")
    fields, nonce = blob[6:fields_end], blob[fields_end:nonce_end]
    ciphertext, commit = blob[nonce_end:sealed_end], blob[sealed_end:]
    if code == 1:
        return RecoveryWrap(nonce, ciphertext, fmt, commit)
    if code == 2:
        m, t, p = _KDF_STRUCT.unpack_from(fields)
        params = KdfParameters(m, t, p)
        return PassphraseWrap(params, fields[_KDF_STRUCT.size :], nonce, ciphertext, fmt, commit)
    if code == 4:
        (parent,) = LEN_PREFIX.unpack(fields)
        return ChainWrap(parent, nonce, ciphertext, fmt, commit)
    return DeviceWrap(fields, nonce, ciphertext, fmt, commit)


def _wrap_aad(context: WrapContext, wrap: Wrap) -> bytes:
    check_epoch(context.epoch)
    return (
        lp(WRAP_AAD_LABEL)
        + lp(context.agent_id.encode())
        + LEN_PREFIX.pack(context.epoch)
        + lp(wrap.kind.encode())
        + lp(context.wrap_id)
        + lp(wrap.header())
    )


def _format(fmt: int) -> int:
    if fmt not in (FORMAT_V1, WRAP_FORMAT):
        raise ValueError(f"key wrap format {fmt} cannot be written")
    return fmt


def _expect_kind(blob: bytes, kind: type[_W]) -> _W:
    wrap = parse_wrap(blob)
    if not isinstance(wrap, kind):
        raise UnsupportedFormat(f"this is a {wrap.kind} key wrap, not a {kind.kind} key wrap")
    return wrap


def _commitment(key: bytes, context: WrapContext, wrap: Wrap) -> bytes:
    """HMAC of the associated data under a subkey of the wrapping key: it pins the one key a
    wrap opens with (AES-GCM alone does not: a blob can be made to open under two keys)."""
    return hmac.new(hkdf(key, None, INFO_WRAP_COMMIT), _wrap_aad(context, wrap), "sha256").digest()


def _seal(key: bytes, shell: _W, vault_key: bytes, context: WrapContext) -> _W:
    """`shell` (its header fields set) with the vault key sealed and, from format 2, committed."""
    sealed = AESGCM(key).encrypt(shell.nonce, vault_key, _wrap_aad(context, shell))
    commit = _commitment(key, context, shell) if shell.fmt == WRAP_FORMAT else b""
    return dataclasses.replace(shell, ciphertext=sealed, commit=commit)


def _unwrap(key: bytes, wrap: Wrap, context: WrapContext) -> bytes | None:
    """The vault key, or None when authentication (or, from format 2, the commitment) fails."""
    if wrap.fmt == WRAP_FORMAT and not hmac.compare_digest(
        wrap.commit, _commitment(key, context, wrap)
    ):
        return None
    try:
        return AESGCM(key).decrypt(wrap.nonce, wrap.ciphertext, _wrap_aad(context, wrap))
    except InvalidTag:
        return None


# Recovery key ------------------------------------------------------------------------------


def wrap_with_recovery_key(
    vault_key: bytes,
    recovery_key: bytes,
    context: WrapContext,
    *,
    nonce: bytes | None = None,
    fmt: int = WRAP_FORMAT,
) -> bytes:
    """Wrap the vault key under ``HKDF(recovery_key, info="tiermem/v1/recovery")``. No
    stretching: the recovery key has full entropy. `nonce` and `fmt` are for known-answer
    tests only."""
    check_key(vault_key, "vault key")
    check_key(recovery_key, "recovery key")
    shell = RecoveryWrap(random_or(nonce, NONCE_LEN, "nonce"), b"", _format(fmt))
    return _seal(hkdf(recovery_key, None, INFO_RECOVERY), shell, vault_key, context).to_bytes()


def unwrap_with_recovery_key(blob: bytes, recovery_key: bytes, context: WrapContext) -> bytes:
    """The vault key, or `WrongKey` (which also covers a wrap tampered with or moved to another
    agent/epoch/id: AES-GCM cannot tell those apart)."""
    check_key(recovery_key, "recovery key")
    wrap = _expect_kind(blob, RecoveryWrap)
    vault_key = _unwrap(hkdf(recovery_key, None, INFO_RECOVERY), wrap, context)
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
    fmt: int = WRAP_FORMAT,
) -> bytes:
    """Wrap the vault key under Argon2id(NFKC(passphrase)). The parameters are stored in the
    wrap, so raising them later is a re-wrap. `salt`/`nonce` are for known-answer tests only."""
    check_key(vault_key, "vault key")
    if not passphrase:
        raise InvalidInput("the passphrase must not be empty")
    check_kdf_parameters(params)
    shell = PassphraseWrap(
        params,
        random_or(salt, PASSPHRASE_SALT_LEN, "salt"),
        random_or(nonce, NONCE_LEN, "nonce"),
        b"",
        _format(fmt),
    )
    key = _passphrase_key(passphrase, shell.salt, params)
    return _seal(key, shell, vault_key, context).to_bytes()


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
    return hkdf(shared, ephemeral_public + recipient_public, INFO_DEVICE_WRAP)


def wrap_for_device(
    vault_key: bytes,
    recipient: X25519PublicKey,
    context: WrapContext,
    *,
    ephemeral_key: X25519PrivateKey | None = None,
    nonce: bytes | None = None,
    fmt: int = WRAP_FORMAT,
) -> bytes:
    """age-style X25519 wrap of the vault key to a device's public key.
    `ephemeral_key`/`nonce` are for known-answer tests only."""
    check_key(vault_key, "vault key")
    ephemeral = X25519PrivateKey.generate() if ephemeral_key is None else ephemeral_key
    try:
        shared = ephemeral.exchange(recipient)
    except ValueError:
        raise MalformedKey("the device public key is not a usable X25519 key") from None
    shell = DeviceWrap(
        device_public_bytes(ephemeral), random_or(nonce, NONCE_LEN, "nonce"), b"", _format(fmt)
    )
    key = _device_wrap_key(shared, shell.ephemeral_public, recipient.public_bytes_raw())
    return _seal(key, shell, vault_key, context).to_bytes()


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
    return hkdf(parent_key, None, INFO_CHAIN)


def wrap_chain(
    old_key: bytes,
    parent_key: bytes,
    parent_epoch: int,
    context: WrapContext,
    *,
    nonce: bytes | None = None,
    fmt: int = WRAP_FORMAT,
) -> bytes:
    """Wrap the vault key of epoch ``context.epoch`` under the key of the newer `parent_epoch`.
    `nonce` and `fmt` are for known-answer tests only."""
    check_key(old_key, "vault key")
    check_key(parent_key, "parent vault key")
    check_epoch(parent_epoch)
    if parent_epoch <= context.epoch:
        raise ValueError("a chain wrap's parent epoch must be newer than the wrapped epoch")
    shell = ChainWrap(parent_epoch, random_or(nonce, NONCE_LEN, "nonce"), b"", _format(fmt))
    return _seal(_chain_key(parent_key), shell, old_key, context).to_bytes()


def unwrap_chain(blob: bytes, parent_key: bytes, context: WrapContext) -> bytes:
    """The older epoch's vault key, or `WrongKey` when `parent_key` does not open the wrap (or
    the wrap was modified or moved)."""
    check_key(parent_key, "parent vault key")
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
    check_key(vault_key, "vault key")
    check_epoch(epoch)
    key = hkdf(vault_key, None, INFO_DEVICE_LIST)
    message = lp(agent_id.encode()) + LEN_PREFIX.pack(epoch) + lp(device_id) + lp(public_key)
    return hmac.new(key, message, hashlib.sha256).digest()


def verify_device_entry(
    mac: bytes, vault_key: bytes, agent_id: str, epoch: int, device_id: bytes, public_key: bytes
) -> bool:
    expected = device_entry_mac(vault_key, agent_id, epoch, device_id, public_key)
    return hmac.compare_digest(mac, expected)


# Short authentication string --------------------------------------------------------------

# The PGP word list's "even" (two-syllable) table: 256 words chosen to be hard to confuse.
