"""This device's copy of the vault's checkpoint: the sealed versions of the prune record it
last wrote or read, kept in `sync_checkpoint`, so a prune builds the next checkpoint on them
instead of downloading the previous one again (about 66 B per kept record version).

The copy stands in for a download only when the server's prune record holds exactly its
versions: the same version, epoch, writer, envelope length, header (salt and nonce) and AEAD
tag, which the server returns without the envelopes (`store.version_fingerprints`). The copy
is then opened as a download is, so a copy changed on disk fails authentication and is
downloaded instead; a server envelope with those fields but other bytes cannot authenticate,
which `sync check` and a restore report as damage as before. No copy, a copy of another vault,
or another device's prune since: a download, its reason in the prune's report. The copy also
bounds what the server may serve: a whole checkpoint older than the copy's (or none) is a
rollback, and the prune refuses it.

A restore keeps the versions it downloaded and checked the vault against (`read_checked`) as the
restored device's copy, saved with the swap once the vault checked whole, so that device's first
prune downloads nothing of it either."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from tiermem.core.db import Database
from tiermem.core.errors import ServerRollback
from tiermem.sync import crypto, records
from tiermem.sync.crypto.roster import RosterView
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.restore.checkpoint import (
    PruneState,
    Select,
    prune_record_id,
    prune_rows,
    state_of_rows,
)
from tiermem.sync.vault import store

__all__ = [
    "NO_COPY",
    "OTHER_PRUNE",
    "TAMPERED_COPY",
    "Downloaded",
    "Previous",
    "download",
    "read_checked",
    "read_previous",
    "save",
]

NO_COPY = "this device holds no copy of it"
OTHER_PRUNE = "the server's parts are not this device's copy (another device pruned since)"
TAMPERED_COPY = "this device's copy fails authentication (changed on disk)"

Fingerprint = tuple[str, int, bytes, int, bytes, bytes]
"""version, epoch, writer, envelope length, header, AEAD tag."""


@dataclass(frozen=True)
class Previous:
    """The prune record as a prune reads it: its state, the rows downloaded (none when the
    copy served), and why the copy did not serve ('' when it did or there was nothing)."""

    state: PruneState
    downloaded: tuple[records.RemoteRow, ...] = ()
    reason: str = ""

    @property
    def source(self) -> str:
        """'copy', 'downloaded', or '' when the vault has no prune record."""
        if self.reason:
            return "downloaded"
        return "copy" if self.state.rows else ""


def read_previous(
    select: Select,
    db: Database,
    agent_id: str,
    ring: KeyRing,
    tag: bytes,
    roster: RosterView | None = None,
) -> Previous:
    """The prune record's state from this device's copy when the server's versions match it,
    else downloaded (ServerRollback: the server's checkpoint is older than the copy's); parts
    are judged by `roster` as a restore judges them (`checkpoint.state_of_rows`)."""
    rid = prune_record_id(ring)
    served = [_served(row) for row in select(*store.version_fingerprints(tag, rid)).rows]
    copy = _load(db, agent_id, tag, rid)
    if not served and not copy:
        return Previous(PruneState())
    reason, held = NO_COPY, 0
    if copy and sorted(f for _, f in served) == sorted(_fingerprint(r) for r in copy):
        seqs = {f[0]: seq for seq, f in served}
        state = state_of_rows((_at(r, seqs[r.version]) for r in copy), ring, roster)
        if not state.damaged:
            return Previous(state)
        reason = TAMPERED_COPY
    elif copy:
        mine = state_of_rows(copy, ring)
        reason = TAMPERED_COPY if mine.damaged else OTHER_PRUNE
        held = 0 if mine.damaged or mine.checkpoint is None else mine.checkpoint.number
    rows = tuple(prune_rows(select, tag, rid))
    state = state_of_rows(rows, ring, roster)
    number = state.checkpoint.number if state.checkpoint else 0
    if held > number and not state.damaged:
        raise ServerRollback(
            f"the server's checkpoint ({number or 'none'}) is older than checkpoint {held}, "
            "which this device wrote or read; nothing was pruned, run `tiermem sync check`"
        )
    return Previous(state, rows, reason)


@dataclass(frozen=True)
class Downloaded:
    """Every version of the prune record as a restore downloaded it, and the state they give."""

    state: PruneState
    rows: tuple[records.RemoteRow, ...]


def read_checked(
    rows: Future[tuple[records.RemoteRow, ...]], ring: KeyRing, roster: Future[RosterView | None]
) -> Downloaded:
    """The prune record's versions (`rows`, downloaded while the roster is read), each
    authenticated against the roster (`state_of_rows`), kept whole: what a restore checks the
    vault against and then saves as this device's copy."""
    downloaded = rows.result()
    return Downloaded(state_of_rows(downloaded, ring, roster.result()), downloaded)


def download(select: Select, ring: KeyRing, tag: bytes) -> tuple[records.RemoteRow, ...]:
    """Every version of the prune record, unchecked (`read_checked` checks them)."""
    return tuple(prune_rows(select, tag, prune_record_id(ring)))


def save(db: Database, agent_id: str, tag: bytes, rows: Iterable[records.RemoteRow]) -> None:
    """Make these versions of the prune record this device's copy (inside the caller's
    transaction, so the copy and the witness of the checkpoint move together)."""
    db.execute("DELETE FROM sync_checkpoint WHERE agent_id = ?", (agent_id,))
    db.executemany(
        "INSERT INTO sync_checkpoint (agent_id, vault, version, epoch, device_id, envelope) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(agent_id, tag, r.version, r.epoch, r.device_id, r.envelope) for r in rows],
    )


def _load(db: Database, agent_id: str, tag: bytes, rid: bytes) -> list[records.RemoteRow]:
    """This device's copy for the vault `tag` (empty: none, or one of another vault)."""
    found = db.query(
        "SELECT version, epoch, device_id, envelope FROM sync_checkpoint "
        "WHERE agent_id = ? AND vault = ? ORDER BY version",
        (agent_id, tag),
    )
    try:
        return [records.remote_row((0, rid, *row)) for row in found]
    except crypto.TamperedData:  # a column of the wrong type: no usable copy
        return []


def _served(row: Sequence[object]) -> tuple[int, Fingerprint]:
    """A `store.version_fingerprints` row: (seq, fingerprint), checked."""
    seq, version, epoch, device, length, header, tail = row
    return records.server_int(seq), (
        records.server_str(version),
        records.server_int(epoch),
        records.server_blob(device),
        records.server_int(length),
        records.server_blob(header),
        records.server_blob(tail),
    )


def _fingerprint(row: records.RemoteRow) -> Fingerprint:
    env = row.envelope
    header, tail = env[: crypto.ENVELOPE_HEADER_LEN], env[-crypto.TAG_LEN :]
    return (row.version, row.epoch, row.device_id, len(env), header, tail)


def _at(row: records.RemoteRow, seq: int) -> records.RemoteRow:
    """The copy's row at the seq the server holds it at."""
    return records.RemoteRow(
        seq, row.record_id, row.version, row.epoch, row.device_id, row.envelope
    )
