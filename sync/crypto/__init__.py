"""End-to-end encryption for sync: record envelopes, opaque record ids, recovery keys, key wraps.

Pure functions over bytes, no I/O: nothing here touches files, the network, the keyring or a log.
Only pyca `cryptography` primitives are used (AES-256-GCM, HKDF-SHA256, HMAC-SHA256, X25519,
Argon2id); never Fernet, which has no associated data.

Parts: `envelope` (padding, sealed records, record ids), `wraps` (recovery keys, key wraps,
device keys, device-entry MACs), `pairing` (codes and the pairing bundle), `base` (format
constants, labels, helpers). Everything public is importable from here.

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

Key wrap, format 2 (format 1 is the same without the commitment, and is still read)::

    magic "TMWK" | fmt u8 = 2 | kind u8 | <kind fields> | nonce[12] | AES-GCM(vault_key)[32 + 16]
    | commitment[32] = HMAC-SHA256(HKDF(wrapping key, info="tiermem/v2/wrap-commit"), aad)
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

with associated data ``aad = lp("tiermem/v1/wrap") | lp(agent_id) | epoch u32 | lp(kind name) |
lp(wrap_id) | lp(everything in the blob before the ciphertext)``. The commitment is checked
before decrypting: AES-GCM alone is not key-committing (a blob can be built to open under two
keys, e.g. two passphrases), the commitment pins the one wrapping key.

The device roster (`roster`): Ed25519-signed, hash-chained entries; see that module.

The server files a vault's rows under its *agent tag*, ``HMAC-SHA256(HKDF(recovery_key,
info="tiermem/v1/agent-tag-key"), agent_id)[:16]`` (`keyed_agent_tag`), so it cannot confirm a
guessed agent id; vaults set up before keep the unkeyed hash (`tiermem.sync.state.agent_tag`).
"""

from __future__ import annotations

from tiermem.core.errors import (
    CryptoError,
    KdfParametersOutOfBounds,
    MalformedKey,
    TamperedData,
    UnsupportedFormat,
    WrongKey,
    WrongPassphrase,
)
from tiermem.sync.crypto.base import (
    ENVELOPE_HEADER_LEN,
    FORMAT_V1,
    KEY_LEN,
    MAGIC,
    MIN_BUCKET,
    NONCE_LEN,
    PASSPHRASE_SALT_LEN,
    RECORD_ID_LEN,
    RECORD_SALT_LEN,
    SNAPSHOT_BUCKET,
    SUITE_AES_256_GCM,
    TAG_LEN,
    WRAP_FORMAT,
    WRAP_MAGIC,
    X25519_LEN,
    generate_vault_key,
)
from tiermem.sync.crypto.envelope import (
    Envelope,
    RecordContext,
    open_envelope,
    open_record,
    pad,
    padded_size,
    parse_envelope,
    record_aad,
    record_id,
    record_id_hasher,
    seal_record,
    unpad,
)
from tiermem.sync.crypto.pairing import (
    PAIRING_NONCE_LEN,
    PairingTranscript,
    open_pairing_answer,
    open_pairing_bundle,
    pairing_code,
    pairing_commitment,
    seal_pairing_bundle,
    short_auth_string,
)
from tiermem.sync.crypto.wraps import (
    DEFAULT_KDF_PARAMS,
    ChainWrap,
    DeviceWrap,
    KdfParameters,
    PassphraseWrap,
    RecoveryWrap,
    Wrap,
    WrapContext,
    check_kdf_parameters,
    device_entry_mac,
    device_public_bytes,
    format_recovery_key,
    generate_device_key,
    generate_recovery_key,
    keyed_agent_tag,
    load_device_private_key,
    load_device_public_key,
    parse_recovery_key,
    parse_wrap,
    unwrap_chain,
    unwrap_for_device,
    unwrap_with_passphrase,
    unwrap_with_recovery_key,
    verify_device_entry,
    wrap_chain,
    wrap_for_device,
    wrap_with_passphrase,
    wrap_with_recovery_key,
)

__all__ = [
    "DEFAULT_KDF_PARAMS",
    "ENVELOPE_HEADER_LEN",
    "FORMAT_V1",
    "KEY_LEN",
    "MAGIC",
    "MIN_BUCKET",
    "NONCE_LEN",
    "PAIRING_NONCE_LEN",
    "PASSPHRASE_SALT_LEN",
    "RECORD_ID_LEN",
    "RECORD_SALT_LEN",
    "SNAPSHOT_BUCKET",
    "SUITE_AES_256_GCM",
    "TAG_LEN",
    "WRAP_FORMAT",
    "WRAP_MAGIC",
    "X25519_LEN",
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
    "Wrap",
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
    "keyed_agent_tag",
    "load_device_private_key",
    "load_device_public_key",
    "open_envelope",
    "open_pairing_answer",
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
    "record_id_hasher",
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
