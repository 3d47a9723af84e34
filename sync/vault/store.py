"""What the vault holds, as the only SQL against the server's records, roster and devices.

Push, pull, restore, prune and check say what they want (records after a cursor, a batch of
records to append, the manifests of some devices, the roster's entries) and get the statement
that does it; they never write SQL text against the server's tables themselves. Each function
returns a statement (``(sql, args)``) rather than running it, because the callers compose them
into one atomic Hrana batch (a push: the epoch guard, its records and its manifest) and send it
through whichever client they hold (`Remote` with retries, a restore's pooled reader). The
tables themselves: `tiermem.sync.vault.schema`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from tiermem.sync import crypto
from tiermem.sync.vault.hrana import Args

__all__ = [
    "APPEND_RECORD",
    "APPEND_ROSTER_ENTRY",
    "INSERT_DEVICE",
    "INSERT_WRAP",
    "RECORDS_PER_APPEND",
    "RecordRow",
    "Statement",
    "Window",
    "append_record",
    "append_records",
    "append_roster_entry",
    "count_records",
    "count_upto",
    "critical_versions",
    "delete_records",
    "device_ids",
    "envelope_at",
    "last_seq",
    "live_device_ids",
    "manifest_since",
    "manifests_after",
    "newest_version",
    "prune_doomed",
    "prune_guard",
    "prune_horizon",
    "pull_page",
    "records_after",
    "records_by_id",
    "restore_index",
    "restore_page",
    "restore_records",
    "roster_entries",
    "rotation_guard",
    "touch_device",
    "version_fingerprints",
    "versions_of",
    "window_bounds",
    "with_headers_after",
    "wraps",
]

Statement = tuple[str, Args]
RecordRow = tuple[bytes, bytes, str, int, bytes, bytes]
"""(agent_tag, record_id, version, epoch, device_id, envelope): one row to append."""

_ROW: Final = "seq, record_id, version, epoch, device_id, envelope"

APPEND_RECORD: Final = (
    "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, envelope) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
RECORDS_PER_APPEND: Final = 200
"""Rows per `append_records` statement: 1,200 parameters, within every SQLite's limit."""

APPEND_ROSTER_ENTRY: Final = (
    "INSERT INTO roster (agent_tag, seq, body) SELECT ?1, ?2, ?3 WHERE NOT EXISTS "
    "(SELECT 1 FROM roster WHERE agent_tag = ?1 AND seq = ?2 AND body = ?3)"
)
"""Appending an entry again (a retry after a lost answer) changes nothing; another entry at the
same place is a conflict (the primary key refuses it)."""


# ---------------------------------------------------------------------------------- records


def append_record(row: RecordRow) -> Statement:
    """One record version; a version already there is left as it is (a retry changes nothing)."""
    return (APPEND_RECORD, row)


def append_records(rows: Sequence[RecordRow]) -> list[Statement]:
    """`append_record` for many rows, as few statements (each costs the server a step of its
    own)."""
    out: list[Statement] = []
    for lo in range(0, len(rows), RECORDS_PER_APPEND):
        chunk = rows[lo : lo + RECORDS_PER_APPEND]
        values = ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(chunk))
        sql = APPEND_RECORD.replace("(?, ?, ?, ?, ?, ?)", values)
        out.append((sql, tuple(v for row in chunk for v in row)))
    return out


def records_after(tag: bytes, after: int, limit: int) -> Statement:
    """A pull page: the vault's rows after the cursor `after`, in commit order."""
    return (
        f"SELECT {_ROW} FROM records WHERE agent_tag = ? AND seq > ? ORDER BY seq LIMIT ?",
        (tag, after, limit),
    )


def pull_page(tag: bytes, after: int, limit: int) -> Statement:
    """`records_after` without the versions that a newer version of the same record by the
    same device supersedes: each version is that device's whole state of the record (its
    critical state, manifest counter, metrics, a memory), so a pull needs only the newest.
    The unary `+` keeps the check on the record's own versions (its unique index): on the
    (agent_tag, seq) index it read every later row, and a pull from far behind grew with the
    square of the history."""
    return (
        f"SELECT {_ROW} FROM records AS r WHERE agent_tag = ? AND seq > ? AND NOT EXISTS "
        "(SELECT 1 FROM records AS n WHERE n.record_id = r.record_id "
        "AND +n.agent_tag = r.agent_tag AND +n.device_id = r.device_id AND +n.seq > r.seq) "
        "ORDER BY seq LIMIT ?",
        (tag, after, limit),
    )


Window = tuple[int, int, str | None, Sequence[bytes]]
"""A restore's window: rows after seq ``after`` up to ``upto``, not newer than a version (or
None), without the records it reads apart (the critical state, the prune record)."""


def restore_page(tag: bytes, window: Window, limit: int, fetched: Sequence[int] = ()) -> Statement:
    """A restore's page: the rows of the window that are each writer's newest version of
    their record; an older version of a record by the same writer is the state that writer
    replaced, so a restore never needs it. Rows at the seqs `fetched` (by `restore_records`
    already) are left out."""
    return _newest_by_writer(_ROW, tag, window, limit, fetched)


def restore_records(
    record_ids: Sequence[bytes],
    tag: bytes,
    at: str | None,
    outside: Sequence[tuple[int, int]],
    after: int,
    limit: int,
) -> Statement:
    """Each writer's newest version (not newer than `at`) of these records, after seq `after`
    and outside the seq ranges (lo, hi] of `outside` (fetched by windows), in seq order: what
    a restore fetches first of the records it knows are warm. The unary `+` keeps the search
    on the records' own index: on (agent_tag, seq) it would read the whole vault each time."""
    marks = ", ".join("?" * len(record_ids))
    bound, inner = ("", "") if at is None else ("AND version <= ? ", "AND n.version <= ? ")
    ranges = "".join(" AND NOT (seq > ? AND seq <= ?)" for _ in outside)
    return (
        f"SELECT {_ROW} FROM records AS r WHERE record_id IN ({marks}) AND +agent_tag = ? "
        f"AND +seq > ?{ranges} {bound}AND NOT EXISTS (SELECT 1 FROM records AS n "
        "WHERE n.record_id = r.record_id AND n.agent_tag = r.agent_tag "
        f"AND n.device_id = r.device_id AND n.version > r.version {inner}) ORDER BY seq LIMIT ?",
        (
            *record_ids,
            tag,
            after,
            *(end for pair in outside for end in pair),
            *(() if at is None else (at, at)),
            limit,
        ),
    )


def restore_index(tag: bytes, window: Window, limit: int) -> Statement:
    """`restore_page` without the envelopes: record id, version and writer (what a resumed
    restore checks of the rows an earlier run stored)."""
    return _newest_by_writer("seq, record_id, version, device_id", tag, window, limit)


def _newest_by_writer(
    columns: str, tag: bytes, window: Window, limit: int, fetched: Sequence[int] = ()
) -> Statement:
    after, upto, at, apart = window
    bound, inner = ("", "") if at is None else ("AND version <= ? ", "AND n.version <= ? ")
    marks = ", ".join("?" * len(apart)) or "NULL"
    args: tuple[object, ...] = (tag, after, upto, *apart) + (() if at is None else (at, at))
    skip = ""
    if fetched:
        skip, args = (
            " AND seq NOT IN (SELECT value FROM json_each(?))",
            (*args, json.dumps(fetched)),
        )
    return (
        f"SELECT {columns} FROM records AS r WHERE agent_tag = ? AND seq > ? AND seq <= ? "
        f"AND record_id NOT IN ({marks}) {bound}AND NOT EXISTS (SELECT 1 FROM records AS n WHERE n.record_id = r.record_id "
        f"AND n.agent_tag = r.agent_tag AND n.device_id = r.device_id AND n.version > r.version "
        f"{inner}){skip} ORDER BY seq LIMIT ?",
        (*args, limit),
    )


def last_seq(tag: bytes) -> Statement:
    """The vault's newest row (0: none): a prune's snapshot."""
    return ("SELECT COALESCE(max(seq), 0) FROM records WHERE agent_tag = ?", (tag,))


def window_bounds(tag: bytes, after: int, every: int) -> Statement:
    """The seq of every `every`-th row of the vault after `after`, and of its last row: the
    ends of windows of `every` rows each, which a restore fetches several at a time; with the
    rows and their envelope bytes in all (a progress bar's totals)."""
    return (
        "SELECT seq, total, size FROM (SELECT seq, ROW_NUMBER() OVER (ORDER BY seq) AS rn, "
        "count(*) OVER () AS total, sum(length(envelope)) OVER () AS size FROM records "
        "WHERE agent_tag = ? AND seq > ?) WHERE rn % ? = 0 OR rn = total ORDER BY seq",
        (tag, after, every),
    )


def _ranked(kept: Sequence[bytes]) -> str:
    marks = ", ".join("?" * len(kept))
    return (
        "WITH ranked AS (SELECT seq, record_id, version, ROW_NUMBER() OVER (PARTITION BY "
        "record_id ORDER BY version DESC) AS rn FROM records WHERE agent_tag = ? AND seq <= ? "
        f"AND record_id NOT IN ({marks}))"
    )


def prune_doomed(
    tag: bytes, upto: int, exempt: Sequence[bytes], policy: tuple[int, str], after: int, limit: int
) -> Statement:
    """What a prune deletes, chosen by the server over the rows up to `upto` (a snapshot): the
    versions beyond the newest `keep` of each record that are also older than `before`
    (`policy`), never a record in `exempt`; (seq, record id, version) after seq `after`, a page
    at a time."""
    keep, before = policy
    return (
        f"{_ranked(exempt)} SELECT seq, record_id, version FROM ranked WHERE rn > ? AND "
        "version < ? AND seq > ? ORDER BY seq LIMIT ?",
        (tag, upto, *exempt, keep, before, after, limit),
    )


def prune_horizon(
    tag: bytes, upto: int, exempt: Sequence[bytes], policy: tuple[int, str]
) -> Statement:
    """The horizon `prune_doomed` leaves: the newest of the oldest versions kept of the records
    that lose one (NULL: none loses one)."""
    keep, before = policy
    doomed = "rn > ? AND version < ?"
    return (
        f"{_ranked(exempt)} SELECT max(oldest) FROM (SELECT min(version) AS oldest FROM ranked "
        f"WHERE NOT ({doomed}) AND record_id IN (SELECT record_id FROM ranked "
        f"WHERE {doomed}) GROUP BY record_id)",
        (tag, upto, *exempt, keep, before, keep, before),
    )


def prune_guard(tag: bytes, record_id: bytes, newest: str) -> Statement:
    """Statement 0 of a prune's first write: it fails the atomic batch (an integer overflow)
    when the prune record gained a version newer than `newest` since it was read, i.e. when
    another device pruned meanwhile; this prune then stops without writing anything."""
    return (
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM records WHERE agent_tag = ? AND record_id = ? "
        "AND version > ?) THEN abs(-9223372036854775807 - 1) ELSE 0 END",
        (tag, record_id, newest),
    )


def rotation_guard(tag: bytes, upto: int) -> Statement:
    """A rotation's last statement: it fails the atomic batch (an integer overflow) when the
    vault gained a row after seq `upto`, the position its signed entry names, so no row under
    the ending epoch lands between what the rotation read and its commit."""
    return (
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM records WHERE agent_tag = ? AND seq > ?) "
        "THEN abs(-9223372036854775807 - 1) ELSE 0 END",
        (tag, upto),
    )


def records_by_id(tag: bytes, record_ids: Sequence[bytes]) -> Statement:
    """Every version of these records, wherever the cursor is."""
    marks = ", ".join("?" * len(record_ids))
    return (
        f"SELECT {_ROW} FROM records WHERE agent_tag = ? AND record_id IN ({marks}) ORDER BY seq",
        (tag, *record_ids),
    )


def versions_of(tag: bytes, record_id: bytes, after: int, limit: int) -> Statement:
    """The versions of one record after seq `after`, as pull rows, a page at a time (the
    prune record's parts: up to 1 MiB each)."""
    return (
        f"SELECT {_ROW} FROM records WHERE record_id = ? AND agent_tag = ? AND seq > ? "
        "ORDER BY seq LIMIT ?",
        (record_id, tag, after, limit),
    )


def version_fingerprints(tag: bytes, record_id: bytes) -> Statement:
    """Every version of one record without its envelope: seq, version, epoch, writer, the
    envelope's length, its header (salt and nonce) and its AEAD tag. A prune compares them
    with its own copy of the prune record instead of downloading the parts again."""
    return (
        "SELECT seq, version, epoch, device_id, length(envelope), "
        f"substr(envelope, 1, {crypto.ENVELOPE_HEADER_LEN}), substr(envelope, -{crypto.TAG_LEN}) "
        "FROM records WHERE record_id = ? AND agent_tag = ? ORDER BY seq",
        (record_id, tag),
    )


def newest_version(tag: bytes, record_id: bytes) -> Statement:
    """The newest version of one record (NULL: none)."""
    return (
        "SELECT max(version) FROM records WHERE record_id = ? AND agent_tag = ?",
        (record_id, tag),
    )


def manifests_after(tag: bytes, record_ids: Sequence[bytes], after: int, limit: int) -> Statement:
    """The versions of these manifest records after `after`, as pull rows."""
    marks = ", ".join("?" * len(record_ids))
    return (
        f"SELECT {_ROW} FROM records "
        f"WHERE agent_tag = ? AND record_id IN ({marks}) AND seq > ? ORDER BY seq LIMIT ?",
        (tag, *record_ids, after, limit),
    )


def with_headers_after(tag: bytes, after: int, limit: int) -> Statement:
    """`sync check`'s page: each row with its envelope's length, header and envelope."""
    return (
        "SELECT seq, record_id, version, epoch, device_id, length(envelope), "
        f"substr(envelope, 1, {crypto.ENVELOPE_HEADER_LEN}), envelope FROM records "
        "WHERE agent_tag = ? AND seq > ? ORDER BY seq LIMIT ?",
        (tag, after, limit),
    )


def manifest_since(tag: bytes, record_id: bytes, version: str) -> Statement:
    """version, envelope of this device's manifest record from `version` on (what committed)."""
    return (
        "SELECT version, envelope FROM records WHERE agent_tag = ? "
        "AND record_id = ? AND version >= ?",
        (tag, record_id, version),
    )


def critical_versions(tag: bytes, record_id: bytes, at: str | None) -> Statement:
    """version, epoch, writer and envelope of every version of the critical record (not newer
    than `at`), newest first; the envelope only for the newest two (NULL for the others)."""
    bound = "" if at is None else "AND version <= ? "
    return (
        "SELECT version, epoch, device_id, CASE WHEN rn <= 2 THEN envelope END FROM (SELECT "
        "version, epoch, device_id, envelope, ROW_NUMBER() OVER (ORDER BY version DESC) AS rn "
        f"FROM records WHERE record_id = ? AND agent_tag = ? {bound}) ORDER BY version DESC",
        (record_id, tag) if at is None else (record_id, tag, at),
    )


def count_records(tag: bytes) -> Statement:
    return ("SELECT count(*) FROM records WHERE agent_tag = ?", (tag,))


def count_upto(tag: bytes, upto: int) -> Statement:
    """Rows and distinct records up to seq `upto` (what a prune reports it looked at)."""
    return (
        "SELECT count(*), count(DISTINCT record_id) FROM records WHERE agent_tag = ? AND seq <= ?",
        (tag, upto),
    )


def envelope_at(seq: int) -> Statement:
    """The envelope of the row at `seq`."""
    return ("SELECT envelope FROM records WHERE seq = ?", (seq,))


def delete_records(tag: bytes, seqs: Sequence[int]) -> Statement:
    """Delete the vault's rows at these seqs (prune)."""
    return (
        f"DELETE FROM records WHERE agent_tag = ? AND seq IN ({', '.join('?' * len(seqs))})",
        (tag, *seqs),
    )


# ---------------------------------------------------------------------------- roster, devices

INSERT_WRAP: Final = (
    "INSERT INTO key_wraps (wrap_id, agent_tag, epoch, kind, blob) VALUES (?, ?, ?, ?, ?)"
)
INSERT_DEVICE: Final = (
    "INSERT INTO devices (device_id, agent_tag, public_key, added) VALUES (?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)


def wraps(tag: bytes) -> Statement:
    """Every key wrap of the vault: epoch, kind, wrap id, blob."""
    return ("SELECT epoch, kind, wrap_id, blob FROM key_wraps WHERE agent_tag = ?", (tag,))


def roster_entries(tag: bytes) -> Statement:
    """The roster's entries in order: seq, body."""
    return ("SELECT seq, body FROM roster WHERE agent_tag = ? ORDER BY seq", (tag,))


def append_roster_entry(tag: bytes, seq: int, body: bytes) -> Statement:
    return (APPEND_ROSTER_ENTRY, (tag, seq, body))


def touch_device(tag: bytes, device_id: bytes, now: float) -> Statement:
    """`sync devices` LAST SEEN: every push refreshes it, a pull once per clock hour (display
    only, not trusted)."""
    return (
        "UPDATE devices SET last_seen = ? WHERE device_id = ? AND agent_tag = ?",
        (now, device_id, tag),
    )


def device_ids(tag: bytes) -> Statement:
    """Every device that ever joined the vault, removed ones too."""
    return ("SELECT device_id FROM devices WHERE agent_tag = ?", (tag,))


def live_device_ids(tag: bytes) -> Statement:
    """The devices not removed."""
    return ("SELECT device_id FROM devices WHERE agent_tag = ? AND revoked_at IS NULL", (tag,))
