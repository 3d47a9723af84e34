"""The server's tables, written once: `SCHEMA` creates every one (setup), and the roster and
pairings tables, which came later, each have their own statement for a vault set up before them.

**The server's tables** hold only ciphertext and opaque ids:

- ``records(seq, agent_tag, record_id, version, epoch, device_id, envelope)``: one row per
  pushed version of a record. ``seq`` is the server's commit order (what pulls page by),
  ``record_id`` an HMAC under the vault's id key (`crypto.record_id`), ``version`` a hybrid
  logical clock (`hlc`) with the writer's device id as tie-break, ``envelope`` the sealed,
  padded plaintext; ``UNIQUE (record_id, version)`` with inserts ``ON CONFLICT DO NOTHING``, so
  a retried push changes nothing. What the envelopes hold: `tiermem.sync.records`.
- ``key_wraps(wrap_id, agent_tag, epoch, kind, blob)``: the vault key wrapped to the recovery
  key, the optional passphrase and each device. ``agent_tag`` files every row of one vault: an
  HMAC of the agent id under a key derived from the recovery key (`crypto.keyed_agent_tag`), so
  a restore with the recovery key finds it and the server cannot confirm a guessed agent id. A
  vault set up before keyed tags keeps the unkeyed labelled hash (`state.agent_tag`), which a
  server can test guesses against; so are the short-lived ``pairings`` rows of every vault.
- ``devices(device_id, agent_tag, public_key, added, …)``: the devices that push (X25519 public
  keys, for pairing later), their sealed names, MACs and removal marks.
- ``roster(agent_tag, seq, body)``: the signed, chained device roster
  (`tiermem.sync.devices.roster_pin`).
- ``pairings``: one row per pairing of a new device, deleted when it completes
  (`tiermem.sync.devices.pairing_exchange`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["CREATE_PAIRINGS", "CREATE_ROSTER", "SCHEMA"]

CREATE_ROSTER: Final = (
    "CREATE TABLE IF NOT EXISTS roster (agent_tag BLOB NOT NULL, seq INTEGER NOT NULL, "
    "body BLOB NOT NULL, PRIMARY KEY (agent_tag, seq))"
)
CREATE_PAIRINGS: Final = (
    "CREATE TABLE IF NOT EXISTS pairings ("
    "pairing_id BLOB PRIMARY KEY, agent_tag BLOB NOT NULL, created REAL NOT NULL, "
    "new_public BLOB NOT NULL, commitment BLOB NOT NULL, approver_public BLOB, "
    "approver_nonce BLOB, new_nonce BLOB, bundle BLOB, refused INTEGER NOT NULL DEFAULT 0)"
)
SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS records ("
    "seq INTEGER PRIMARY KEY AUTOINCREMENT, agent_tag BLOB NOT NULL, "
    "record_id BLOB NOT NULL, version TEXT NOT NULL, epoch INTEGER NOT NULL, "
    "device_id BLOB NOT NULL, envelope BLOB NOT NULL, UNIQUE (record_id, version))",
    "CREATE INDEX IF NOT EXISTS records_agent ON records (agent_tag, seq)",
    "CREATE TABLE IF NOT EXISTS key_wraps ("
    "wrap_id BLOB PRIMARY KEY, agent_tag BLOB NOT NULL, epoch INTEGER NOT NULL, "
    "kind TEXT NOT NULL CHECK (kind IN ('device', 'recovery', 'passphrase', 'chain')), "
    "blob BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS key_wraps_agent ON key_wraps (agent_tag, kind, epoch)",
    "CREATE TABLE IF NOT EXISTS devices ("
    "device_id BLOB PRIMARY KEY, agent_tag BLOB NOT NULL, public_key BLOB NOT NULL, "
    "added TEXT NOT NULL, "
    # name = sealed envelope; mac = crypto.device_entry_mac under the key of mac_epoch;
    # revoked_* set by `sync remove-device` (sync/devices/membership.py).
    "name BLOB, last_seen REAL, revoked_at REAL, revoked_epoch INTEGER, "
    "mac BLOB, mac_epoch INTEGER)",
    CREATE_ROSTER,
    CREATE_PAIRINGS,
)
