"""Shared pieces of the sync crypto: format constants, domain-separation labels and the
small helpers (length prefixes, HKDF, argument checks) every part uses. No I/O."""

from __future__ import annotations

import os
import struct
from typing import Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# --------------------------------------------------------------------------------------- errors


# ------------------------------------------------------------------------------------ constants

MAGIC: Final = b"TMEM"
WRAP_MAGIC: Final = b"TMWK"
FORMAT_V1: Final = 1
WRAP_FORMAT: Final = 2  # key wraps written now: format 1 plus a key commitment
COMMIT_LEN: Final = 32
SUITE_AES_256_GCM: Final = 1

KEY_LEN: Final = 32
RECORD_SALT_LEN: Final = 32
NONCE_LEN: Final = 12
TAG_LEN: Final = 16
RECORD_ID_LEN: Final = 16
PASSPHRASE_SALT_LEN: Final = 16
X25519_LEN: Final = 32

PREFIX = struct.Struct(">4sBBI")  # magic, fmt, suite, epoch
ENVELOPE_HEADER_LEN: Final = PREFIX.size + RECORD_SALT_LEN + NONCE_LEN  # 54

MIN_BUCKET: Final = 256
SNAPSHOT_BUCKET: Final = 8192
LEN_PREFIX = struct.Struct(">I")

INFO_RECORD: Final = b"tiermem/v1/record"
INFO_RECORD_ID: Final = b"tiermem/v1/record-id"
INFO_RECOVERY: Final = b"tiermem/v1/recovery"
INFO_DEVICE_WRAP: Final = b"tiermem/v1/device-wrap"
WRAP_AAD_LABEL: Final = b"tiermem/v1/wrap"
RECOVERY_CHECK_LABEL: Final = b"tiermem/v1/recovery-check"
SAS_LABEL: Final = b"tiermem/v1/sas"
INFO_CHAIN: Final = b"tiermem/v1/chain"
INFO_WRAP_COMMIT: Final = b"tiermem/v2/wrap-commit"
INFO_DEVICE_LIST: Final = b"tiermem/v1/device-list"
INFO_PAIRING: Final = b"tiermem/v1/pairing"
PAIRING_CODE_LABEL: Final = b"tiermem/v1/pairing-code"
PAIRING_COMMIT_LABEL: Final = b"tiermem/v1/pairing-commit"
INFO_AGENT_TAG: Final = b"tiermem/v1/agent-tag-key"
AGENT_TAG_LEN: Final = 16

MAX_U32: Final = 0xFFFFFFFF


# ------------------------------------------------------------------------------------- helpers


def lp(data: bytes) -> bytes:
    """Length-prefix `data` (u32 big-endian), so concatenations are unambiguous."""
    return LEN_PREFIX.pack(len(data)) + data


def hkdf(ikm: bytes, salt: bytes | None, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_LEN, salt=salt, info=info).derive(ikm)


def check_key(key: bytes, what: str) -> None:
    if len(key) != KEY_LEN:
        raise ValueError(f"{what} must be {KEY_LEN} bytes, got {len(key)}")


def check_epoch(epoch: int) -> None:
    if not 0 <= epoch <= MAX_U32:
        raise ValueError(f"epoch must fit in 32 bits, got {epoch}")


def random_or(given: bytes | None, length: int, what: str) -> bytes:
    """Fresh randomness, or the injected value (known-answer tests only)."""
    if given is None:
        return os.urandom(length)
    if len(given) != length:
        raise ValueError(f"{what} must be {length} bytes, got {len(given)}")
    return given


def generate_vault_key() -> bytes:
    """A fresh random 256-bit vault key (one per agent and epoch)."""
    return AESGCM.generate_key(bit_length=256)
