"""What sync keeps: opaque names, local settings, its errors.

The server's tables and the statements on them: `tiermem.sync.vault.schema` and
`tiermem.sync.vault.store`.

**Locally**, table ``sync_state`` (migration 4) keeps one row of non-secret settings per agent
(and, from later migrations, the epoch floor, the pinned roster and the vault's agent tag:
`Settings.tag` is the one way to get it); the token, the device's
private key and its roster signing key live in a `devices.secret_store` store.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from tiermem.core.db import Database, Row
from tiermem.core.environment import environment
from tiermem.core.errors import (
    AlreadyInitialised,
    HomeNotEmpty,
    MissingSecret,
    NothingToRestore,
    NotInitialised,
    StorageError,
    SyncFailed,
)
from tiermem.sync.devices.secret_store import (
    DEVICE_KEY,
    SIGNING_KEY,
    TOKEN,
    SecretStore,
    open_store,
)
from tiermem.sync.records import CRITICAL_TABLE
from tiermem.sync.vault.hrana import Args
from tiermem.sync.vault.store import INSERT_DEVICE, INSERT_WRAP

__all__ = [
    "CRITICAL_TABLE",
    "EPOCH",
    "AlreadyInitialised",
    "HomeNotEmpty",
    "Inflight",
    "MissingSecret",
    "NotInitialised",
    "NothingToRestore",
    "Settings",
    "SyncFailed",
    "agent_tag",
    "device_rows",
    "device_wrap_id",
    "insert_settings",
    "read_settings",
    "save_secrets",
    "state_digest",
    "wrap_id",
]

EPOCH: Final = 1

# ------------------------------------------------------------------------------------- errors


# ------------------------------------------------------------------------------ opaque naming


def agent_tag(agent_id: str) -> bytes:
    """The unkeyed tag: 16 bytes of a labelled SHA-256 of the agent id. Vaults set up before
    keyed tags (`crypto.keyed_agent_tag`) are filed under it, and so are pairing requests (the
    joining device knows nothing else yet); anyone can compute it from a guessed agent id."""
    return hashlib.sha256(b"tiermem/v1/agent-tag\x00" + agent_id.encode()).digest()[:16]


def wrap_id(tag: bytes, epoch: int, kind: str, extra: bytes = b"") -> bytes:
    """Deterministic wrap ids from the vault's tag (`Settings.tag`): a retried registration
    re-inserts the very same rows, and a wrap opens only under the tag it was made for."""
    material = b"\x00".join([b"tiermem/v1/wrap-id", tag, epoch.to_bytes(4, "big"), kind.encode()])
    return hashlib.sha256(material + b"\x00" + extra).digest()[:16]


def state_digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


# ---------------------------------------------------------------------------- local settings


@dataclass(frozen=True)
class Inflight:
    version: str
    envelope: bytes
    seq: int
    digest: str


@dataclass(frozen=True)
class Settings:
    """The local, non-secret sync settings of one agent (table ``sync_state``)."""

    agent_id: str
    status: str
    url: str
    device_id: bytes
    epoch: int
    secret_ref: str
    secret_store: str
    device_wrap: bytes
    recovery_wrap: bytes
    passphrase_wrap: bytes | None
    created_at: float
    registered: bool = False
    hlc: str = ""
    inflight: Inflight | None = None
    last_digest: str | None = None
    last_push_at: float | None = None
    last_push_version: str | None = None
    pushes: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    retry_at: float | None = None
    agent_tag: bytes | None = None
    """The vault's keyed tag; None for a vault set up before keyed tags."""

    @property
    def tag(self) -> bytes:
        """What the server files this vault's rows under (keyed, or the old unkeyed hash)."""
        return agent_tag(self.agent_id) if self.agent_tag is None else self.agent_tag


_COLUMNS: Final = (
    "agent_id, status, url, device_id, epoch, secret_ref, secret_store, device_wrap, "
    "recovery_wrap, passphrase_wrap, registered, hlc, inflight_version, inflight_envelope, "
    "inflight_seq, inflight_digest, last_digest, last_push_at, last_push_version, pushes, "
    "last_error, last_error_at, retry_at, created_at, agent_tag"
)


def _settings_from_row(r: Row) -> Settings:
    inflight = None
    if r[12] is not None:
        inflight = Inflight(str(r[12]), bytes(r[13]), int(r[14]), str(r[15]))
    return Settings(
        agent_id=str(r[0]),
        status=str(r[1]),
        url=str(r[2]),
        device_id=bytes.fromhex(str(r[3])),
        epoch=int(r[4]),
        secret_ref=str(r[5]),
        secret_store=str(r[6]),
        device_wrap=bytes(r[7]),
        recovery_wrap=bytes(r[8]),
        passphrase_wrap=None if r[9] is None else bytes(r[9]),
        registered=bool(r[10]),
        hlc=str(r[11]),
        inflight=inflight,
        last_digest=None if r[16] is None else str(r[16]),
        last_push_at=None if r[17] is None else float(r[17]),
        last_push_version=None if r[18] is None else str(r[18]),
        pushes=int(r[19]),
        last_error=None if r[20] is None else str(r[20]),
        last_error_at=None if r[21] is None else float(r[21]),
        retry_at=None if r[22] is None else float(r[22]),
        created_at=float(r[23]),
        agent_tag=None if r[24] is None else bytes(r[24]),
    )


def read_settings(db: Database, agent_id: str) -> Settings | None:
    row = db.query_one(f"SELECT {_COLUMNS} FROM sync_state WHERE agent_id = ?", (agent_id,))
    return None if row is None else _settings_from_row(row)


def insert_settings(db: Database, s: Settings) -> None:
    """This device's sync settings for an agent, and from now on its changes tracked for
    upload: memories, read counters, episodes and entities already there are marked, so the first push sends
    them (nothing is tracked for an agent that does not sync)."""
    with db.transaction():
        _insert_row(db, s)
        db.execute(
            "INSERT OR IGNORE INTO sync_dirty (agent_id, id) "
            "SELECT agent_id, id FROM memories WHERE agent_id = ? ORDER BY seq",
            (s.agent_id,),
        )
        db.execute(
            "INSERT OR IGNORE INTO reinforce_dirty (agent_id, id) "
            "SELECT agent_id, id FROM reinforcement WHERE agent_id = ? AND device = ''",
            (s.agent_id,),
        )
        for kind, table in (("episode", "episodes"), ("entity", "entities")):
            db.execute(
                "INSERT OR IGNORE INTO graph_dirty (agent_id, kind, id) "
                f"SELECT agent_id, '{kind}', id FROM {table} WHERE agent_id = ? ORDER BY id",
                (s.agent_id,),
            )


def _insert_row(db: Database, s: Settings) -> None:
    db.execute(
        "INSERT INTO sync_state (agent_id, status, url, device_id, epoch, secret_ref, "
        "secret_store, device_wrap, recovery_wrap, passphrase_wrap, registered, hlc, "
        "last_digest, created_at, agent_tag) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            s.agent_id,
            s.status,
            s.url,
            s.device_id.hex(),
            s.epoch,
            s.secret_ref,
            s.secret_store,
            s.device_wrap,
            s.recovery_wrap,
            s.passphrase_wrap,
            int(s.registered),
            s.hlc,
            s.last_digest,
            s.created_at,
            s.agent_tag,
        ),
    )


def device_wrap_id(s: Settings) -> bytes:
    return wrap_id(s.tag, s.epoch, "device", s.device_id)


def device_rows(s: Settings, public: bytes) -> list[tuple[str, Args]]:
    return [
        (INSERT_DEVICE, (s.device_id, s.tag, public, s.hlc or "0")),
        (
            INSERT_WRAP + " ON CONFLICT DO NOTHING",
            (device_wrap_id(s), s.tag, s.epoch, "device", s.device_wrap),
        ),
    ]


def save_secrets(
    home_root: Path,
    ref: str,
    device_key: X25519PrivateKey,
    token: str | None,
    signing_key: Ed25519PrivateKey | None = None,
) -> tuple[SecretStore, bool]:
    """Store the device key (and the roster signing key and token) in the keyring, falling back
    to the 0600 file when the keyring refuses (unless the keyring was asked for explicitly)."""
    values = {DEVICE_KEY: device_key.private_bytes_raw().hex()}
    if signing_key is not None:
        values[SIGNING_KEY] = signing_key.private_bytes_raw().hex()
    if token:
        values[TOKEN] = token
    store = open_store(home_root, ref)
    try:
        for name, value in values.items():
            store.set(name, value)
    except StorageError:
        store.delete_all()
        if store.kind != "keyring" or environment().secret_store == "keyring":
            raise
        store = open_store(home_root, ref, "file")
        for name, value in values.items():
            store.set(name, value)
    return store, bool(token)
