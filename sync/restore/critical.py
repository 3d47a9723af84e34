"""The critical state on the server as a restore reads it: every version (for the check) and
the newest few with their envelopes (a salvage falls back past damaged ones), authenticated
and decoded one at a time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tiermem.sync import crypto, hlc, records
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.state import NothingToRestore
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, ResultSet

__all__ = ["Critical", "critical_candidates", "open_critical"]


def open_critical(
    ring: KeyRing, agent: str, rid: bytes, version: str, writer: bytes, envelope: bytes
) -> dict[str, Any]:
    try:
        hlc.parse(version)
    except ValueError:
        raise crypto.TamperedData("the critical state has a malformed version") from None
    epoch = crypto.parse_envelope(envelope).epoch
    plaintext = records.open_row(
        ring.key(epoch),
        agent,
        records.CRITICAL_TABLE,
        records.RemoteRow(0, rid, version, epoch, writer, envelope),
        ring.verify,
    )
    return records.decode_critical(plaintext, agent)


@dataclass(frozen=True)
class Critical:
    """The critical record on the server (up to `at`): every version, and (version, writer,
    envelope) of the newest few, newest first."""

    versions: list[str]
    newest: list[tuple[str, bytes, bytes]]


def critical_candidates(
    select: Callable[[str, Args], ResultSet], ring: KeyRing, tag: bytes, rid: bytes, at: str | None
) -> Critical:
    """The critical states, newest first (not newer than `at`): a few with their envelopes,
    so that a salvage can fall back past damaged ones, and every version (the check)."""
    rows = select(*store.critical_versions(tag, rid, at)).rows
    if not rows:
        when = "" if at is None else f" as of {at}"
        raise NothingToRestore(
            f"the vault of agent {ring.agent_id!r} holds no critical state{when} "
            "(nothing was pushed)"
        )
    versions = [records.server_str(r[0]) for r in rows]
    newest = [
        (records.server_str(version), records.server_blob(writer), records.server_blob(envelope))
        for version, _, writer, envelope in rows
        if envelope is not None
    ]
    return Critical(versions, newest)
