"""The prune record's versions read back: the prune horizon and the newest whole checkpoint
(`manifest.Checkpoint`), shared by prune, restore and `sync check`.

Every version of the prune record is read and authenticated. The horizon is the highest any of
them names (deleting the newest cannot lower it below what an older one says). The checkpoint
is the newest one whose parts are all there: a prune interrupted while it wrote its parts
leaves a partial one, which counts for nothing (the manifests it would cover are still there)
and the next prune deletes. A server that drops a whole checkpoint, or serves an older one in
its place, is caught by what the checkpoint covered: those manifests are gone, so their pushes
are missing, and the pruning device's next manifest names the checkpoint it made."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

from tiermem.sync import crypto, hlc, records
from tiermem.sync.crypto.roster import RosterView
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.manifest import Checkpoint, ManifestEntry, decode_checkpoint
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, ResultSet

__all__ = [
    "PruneState",
    "Whole",
    "decode_horizon",
    "prune_record_id",
    "prune_rows",
    "read_prune_state",
    "state_of_rows",
]

Select = Callable[[str, Args], ResultSet]
_PARTS_PER_PAGE: Final = 4
"""Checkpoint parts per request: about 6 MB of Hrana JSON at most."""


@dataclass(frozen=True)
class Whole:
    """A checkpoint with every part: what it covers (device hex → pushes 1..n), its lines,
    and the versions of its parts."""

    number: int
    covers: dict[str, int]
    lines: tuple[ManifestEntry, ...]
    versions: frozenset[str]


@dataclass
class PruneState:
    """Every version of the prune record, authenticated: (seq, version) of each, the horizon,
    the newest whole checkpoint, and what failed authentication."""

    rows: list[tuple[int, str]] = field(default_factory=list)
    horizon: str | None = None
    checkpoint: Whole | None = None
    damaged: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    """Of `damaged`: parts under an ended epoch written after its rotation (left out; a prune
    builds on the rest)."""

    @property
    def newest(self) -> str:
        return max((v for _, v in self.rows), default="")


def prune_record_id(ring: KeyRing) -> bytes:
    return crypto.record_id(ring.id_key, records.PRUNE_TABLE, records.PRUNE_KEY)


def decode_horizon(plaintext: bytes) -> str | None:
    """The horizon a prune record names (None: a checkpoint written before any delete)."""
    part = decode_checkpoint(plaintext)
    if part is not None:
        horizon = part.horizon
    else:
        horizon = records.load(plaintext, "prune").get("horizon")
        if not isinstance(horizon, str):
            raise crypto.TamperedData("a prune record is malformed")
    if horizon is not None:
        try:
            hlc.parse(horizon)
        except ValueError:
            raise crypto.TamperedData("a prune record names a malformed horizon") from None
    return horizon


def read_prune_state(
    select: Select, ring: KeyRing, tag: bytes, roster: RosterView | None = None
) -> PruneState:
    """Every version of the prune record: horizon, newest whole checkpoint, damage (a part
    under an ended epoch written after its signed rotation, by `roster`, counts for nothing)."""
    return state_of_rows(prune_rows(select, tag, prune_record_id(ring)), ring, roster)


def state_of_rows(
    rows: Iterable[records.RemoteRow], ring: KeyRing, roster: RosterView | None = None
) -> PruneState:
    """The prune state these versions of the prune record give, each authenticated (the
    server's, or this device's copy of them: `checkpoint_copy`)."""
    state = PruneState()
    parts: dict[int, dict[int, tuple[str, Checkpoint]]] = {}
    for row in rows:
        state.rows.append((row.seq, row.version))
        late = roster and roster.fenced_by(
            row.epoch, row.seq, row.record_id, row.version, row.envelope, listing=True
        )
        if late:
            state.late.append(
                f"a prune record (seq {row.seq}) is sealed under the ended key epoch "
                f"{row.epoch} but written after the signed rotation to epoch {late} (by a "
                "removed device or the server)"
            )
            state.damaged.append(state.late[-1])
            continue
        try:
            plaintext = records.open_row(
                ring.key(row.epoch), ring.agent_id, records.PRUNE_TABLE, row, ring.verify
            )
            horizon = decode_horizon(plaintext)
            part = decode_checkpoint(plaintext)
        except crypto.CryptoError as exc:
            state.damaged.append(f"a prune record fails authentication ({exc})")
            continue
        if horizon is not None:
            state.horizon = max(state.horizon or horizon, horizon)
        if part is not None:
            parts.setdefault(part.number, {})[part.part] = (row.version, part)
    state.checkpoint = _newest_whole(parts)
    return state


def prune_rows(select: Select, tag: bytes, rid: bytes) -> Iterator[records.RemoteRow]:
    """Every version of the prune record, a few parts a request (halved while the server
    finds the answer too large)."""
    after, limit = 0, _PARTS_PER_PAGE
    while True:
        page = functools.partial(_page, select, tag, rid, after)
        result, limit = records.fit_page(page, limit)
        rows = [records.remote_row(tuple(raw)) for raw in result.rows]
        yield from rows
        if len(rows) < limit:
            return
        after = rows[-1].seq


def _page(select: Select, tag: bytes, rid: bytes, after: int, limit: int) -> ResultSet:
    return select(*store.versions_of(tag, rid, after, limit))


def _newest_whole(parts: dict[int, dict[int, tuple[str, Checkpoint]]]) -> Whole | None:
    """The highest-numbered checkpoint with all its parts, agreeing on what they cover."""
    for number in sorted(parts, reverse=True):
        got = parts[number]
        first = next(iter(got.values()))[1]
        if set(got) != set(range(first.parts)):
            continue
        if any(p.parts != first.parts or p.covers != first.covers for _, p in got.values()):
            continue
        lines = tuple(e for i in sorted(got) for e in got[i][1].lines)
        versions = frozenset(v for v, _ in got.values())
        return Whole(number, dict(first.covers), lines, versions)
    return None
