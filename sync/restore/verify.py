"""Does the server hold the whole vault its own manifests and checkpoint describe? A restore
reads them once (the compact lines of every push since the last prune, and the checkpoint
that stands for the pushes before) and checks in two steps, so the home is usable before the
memories are checked:

Before anything is written (`check_before`):
- *rollback*: a device's pushes are numbered with a gap after what the checkpoint covers, a
  push that another device's push saw is gone, or the checkpoint its writer made is;
- the critical state: every listed version is there (pruning aside), the newest served is as
  new as the newest listed (*replay* otherwise), and a version no line lists is never taken.

After the memories are streamed into staging, before they are swapped in (`check_after`),
against what the stream served (each writer's newest version of every record):
- *deletion*: a record the lines list was not served at all;
- *replay*: the newest version served is older than the newest one listed;
- *damaged*: rows no line lists (injected or relabelled), not restored; a device of the vault
  whose rows are there with no manifest or checkpoint listing them is a *rollback*.

Throughout, a row (a manifest, a checkpoint part, a record) sealed under an ended key epoch
that lies after the server position the signed rotation ending that epoch names, and that its
tail does not name, is *damaged*: a removed device (or the server) wrote it after the rotation
(`RosterView.fenced_by`); its lines list nothing and it is not restored.

Old versions of a memory record that nothing restores are not looked for here; `sync check`
checks every row. A fresh home has no anchor of its own, so a server that drops the newest
pushes of every device at once is not seen (as with restic); a push that any later push saw is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from tiermem.core.errors import RecordDeleted, RecordReplayed, ServerRollback, TiermemError
from tiermem.sync import crypto, records
from tiermem.sync.crypto.roster import (
    RosterView,
    recovery_signing_key,
    signing_public_bytes,
    verify_roster,
)
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.manifest import CHECKPOINT_WITNESS, Manifest, decode_manifest
from tiermem.sync.restore.checkpoint import PruneState
from tiermem.sync.restore.live import Completion
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, ResultSet

__all__ = [
    "Finding",
    "Listed",
    "Listing",
    "Served",
    "Verified",
    "check_after",
    "check_before",
    "fenced",
    "fetch_listing",
    "refusal",
    "restore_roster",
    "served_before",
    "unbounded_notes",
]

Kind = Literal["rollback", "replay", "deletion", "damaged"]
ORDER: Final[tuple[Kind, ...]] = ("damaged", "rollback", "replay", "deletion")
_LATEST: Final = "~"  # sorts after every version
_MANIFEST_PAGE: Final = 200
Select = Callable[[str, Args], ResultSet]


@dataclass(frozen=True)
class Finding:
    kind: Kind
    message: str
    record_id: str | None = None
    version: str | None = None


@dataclass
class Verified:
    """What the checks found."""

    findings: list[Finding] = field(default_factory=list)


@dataclass
class Listed:
    """What the vault's manifests and checkpoint list: the versions of each record, the
    (record id, version) pairs, the manifests per device and the vault's devices."""

    versions: dict[bytes, list[str]] = field(default_factory=dict)
    pairs: set[tuple[bytes, str]] = field(default_factory=set)
    manifests: dict[str, dict[int, Manifest]] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)
    pruned: PruneState = field(default_factory=PruneState)

    @property
    def listing_devices(self) -> set[str]:
        """Devices whose pushes a manifest or the checkpoint stands for."""
        covered = self.pruned.checkpoint.covers if self.pruned.checkpoint else {}
        return set(covered) | set(self.manifests)


@dataclass
class Served:
    """What the stream served: the newest version of each record, the writers, and the rows
    no line lists (left out)."""

    newest: dict[bytes, str] = field(default_factory=dict)
    writers: set[str] = field(default_factory=set)
    unlisted: dict[str, int] = field(default_factory=dict)  # writer → rows left out
    roster: RosterView | None = None
    late: int = 0  # rows under an ended epoch written after its rotation, left out

    def admit(self, row: records.RemoteRow, pairs: set[tuple[bytes, str]]) -> bool:
        """`add` for a row of the stream, which is left out (False) when it was written under
        an ended epoch after that epoch's rotation (`fenced`)."""
        if fenced(self.roster, row) is not None:
            self.late += 1
            return False
        return self.add(row.record_id, row.version, row.device_id, pairs)

    def add(self, rid: bytes, version: str, writer: bytes, pairs: set[tuple[bytes, str]]) -> bool:
        """Count a served row; False when no line lists it (it is left out)."""
        device = writer.hex()
        self.writers.add(device)
        if (rid, version) not in pairs:
            self.unlisted[device] = self.unlisted.get(device, 0) + 1
            return False
        if version > self.newest.get(rid, ""):
            self.newest[rid] = version
        return True


def fenced(
    roster: RosterView | None, row: records.RemoteRow, *, listing: bool = False
) -> str | None:
    """Why `row` was written after the signed rotation that ended its key epoch (None: it was
    not, or the vault has no roster that says). `listing`: the row is a manifest or a
    checkpoint part, which must also be among those the rotation signed."""
    if roster is None:
        return None
    rotation = roster.fenced_by(
        row.epoch, row.seq, row.record_id, row.version, row.envelope, listing=listing
    )
    if rotation is None:
        return None
    return (
        f"sealed under the ended key epoch {row.epoch} but written after the signed rotation "
        f"to epoch {rotation} (by a removed device or the server)"
    )


def unbounded_notes(roster: RosterView | None) -> list[str]:
    """What `sync check` says of rotations signed before they named a position, or without
    the ended epoch's manifests and checkpoint parts."""
    if roster is None:
        return []
    return [
        f"the rotation to key epoch {e} was signed before rotations named their server "
        f"position: rows under epoch {e - 1} are checked against the manifests only (the "
        "next `tiermem sync rotate-key` bounds every older epoch from then on)"
        for e in roster.unbounded()
    ] + [
        f"the rotation to key epoch {e} does not name the manifests of epoch {e - 1}: its "
        "rows are bounded by the server position only, which a server can renumber (run "
        "`tiermem sync prune`, then `tiermem sync rotate-key`)"
        for e in roster.unlisted()
    ]


def restore_roster(
    agent_id: str, bodies: list[bytes], recovery_key: bytes | None
) -> RosterView | None:
    """The roster a restore judges rows by: checked with the recovery key when it has it, as
    found with the passphrase (None: the vault has no roster)."""
    if not bodies:
        return None
    public = (
        None if recovery_key is None else signing_public_bytes(recovery_signing_key(recovery_key))
    )
    return verify_roster(agent_id, bodies, recovery_public=public)


@dataclass(frozen=True)
class Listing:
    """The vault's devices and every manifest row of theirs, as the server gave them (read
    while the roster and the checkpoint are fetched; `read_listed` opens and judges them)."""

    members: set[str]
    rows: list[records.RemoteRow]


def fetch_listing(select: Select, ring: KeyRing, tag: bytes) -> Listing:
    """Every device of the vault and each one's manifest rows, fifty devices a request."""
    members = {records.server_blob(r[0]).hex() for r in select(*store.device_ids(tag)).rows}
    rids = sorted(records.record_id(ring.id_key, records.MANIFEST_TABLE, d) for d in members)
    rows: list[records.RemoteRow] = []
    for i in range(0, len(rids), 50):
        chunk, after, limit = rids[i : i + 50], 0, _MANIFEST_PAGE
        while True:
            page = functools.partial(_manifest_page, select, tag, chunk, after)
            result, limit = records.fit_page(page, limit)
            rows += [records.remote_row(tuple(raw)) for raw in result.rows]
            if len(result.rows) < limit:
                break
            after = records.server_int(result.rows[-1][0])
    return Listing(members, rows)


def read_listed(
    listing: Listing,
    ring: KeyRing,
    pruned: PruneState,
    out: Verified,
    roster: RosterView | None = None,
) -> Listed:
    """Every device's manifests (decrypted, once) and the checkpoint's lines; a manifest
    written under an ended epoch after its rotation (`fenced` by `roster`) lists nothing."""
    listed = Listed(pruned=pruned, members=listing.members)
    out.findings += [Finding("damaged", why) for why in pruned.damaged]
    for row in listing.rows:
        late = fenced(roster, row, listing=True)
        if late is not None:
            message = f"a push of device {row.device_id.hex()[:12]}… is {late}"
            out.findings.append(Finding("damaged", message, row.record_id.hex(), row.version))
            continue
        _add_manifest(ring, row, listed, out)
    checkpoint = pruned.checkpoint
    pushed = [e for ms in listed.manifests.values() for m in ms.values() for e in m.records]
    for line in (*(checkpoint.lines if checkpoint else ()), *pushed):
        try:
            rid = bytes.fromhex(line.record_id)
        except ValueError:
            continue
        listed.versions.setdefault(rid, []).append(line.version)
        listed.pairs.add((rid, line.version))
    return listed


def served_before(
    select: Select,
    vault: tuple[bytes, bytes],
    skip: set[bytes],
    stored: tuple[int, int],
    at: str | None,
    listed: Listed,
    seen: tuple[Served, Completion],
) -> None:
    """A resumed restore: the rows an earlier run stored, in (cursor, top] of the vault
    (its tag, id key), ids and versions, no envelopes, as the stream counts them (not the
    records read apart, `skip`, nor a manifest), and which memories they complete."""
    served, completion = seen
    tag, id_key = vault
    skip = skip | {records.record_id(id_key, records.MANIFEST_TABLE, d) for d in listed.members}
    after, top = stored
    while True:
        window = (after, top, at, sorted(skip))
        rows = select(*store.restore_index(tag, window, 20_000)).rows
        for seq, rid, version, device in rows:
            after = records.server_int(seq)
            if records.server_blob(rid) in skip:
                continue
            rid_, version_ = records.server_blob(rid), records.server_str(version)
            if served.add(rid_, version_, records.server_blob(device), listed.pairs):
                completion.staged(rid_, version_)
        if len(rows) < 20_000:
            return


def _manifest_page(select: Select, tag: bytes, rids: list[bytes], after: int, n: int) -> ResultSet:
    return select(*store.manifests_after(tag, rids, after, n))


def _add_manifest(ring: KeyRing, row: records.RemoteRow, listed: Listed, out: Verified) -> None:
    device = row.device_id.hex()
    try:
        plaintext = records.open_row(
            ring.key(row.epoch), ring.agent_id, records.MANIFEST_TABLE, row, ring.verify
        )
        m = decode_manifest(plaintext, device)
        if any(e.version != row.version for e in m.records):
            raise crypto.TamperedData("a manifest lists records of another push")
    except crypto.CryptoError as exc:
        out.findings.append(
            Finding(
                "damaged",
                f"a manifest of device {device[:12]}… fails: {exc}",
                row.record_id.hex(),
                row.version,
            )
        )
        return
    mine = listed.manifests.setdefault(device, {})
    if m.n in mine:
        out.findings.append(
            Finding("damaged", f"device {device[:12]}… has two manifests numbered {m.n}")
        )
    mine[m.n] = m


def check_before(
    listed: Listed, critical_rid: bytes, critical_present: list[str], at: str | None, out: Verified
) -> None:
    """The numbering of every device's pushes, and the critical state's versions."""
    _check_numbering(listed, out)
    horizon = listed.pruned.horizon
    bound = at or _LATEST
    versions = listed.versions.get(critical_rid, [])
    name = critical_rid.hex()
    want = max((v for v in versions if v <= bound), default="")
    have = max((v for v in critical_present if v <= bound), default="")
    if want and have < want and not _pruned(want, critical_present, horizon):
        out.findings.append(
            Finding(
                "replay",
                f"the critical state is served at version {have or 'none'}, older than the "
                f"listed {want}",
                name,
                want,
            )
        )
    for v in versions:
        if v not in critical_present and v < have and not _pruned(v, critical_present, horizon):
            out.findings.append(
                Finding("deletion", f"the critical state's version {v} is gone", name, v)
            )
    unlisted = [v for v in critical_present if (critical_rid, v) not in listed.pairs]
    orphans = _orphans({v.rsplit(".", 1)[-1] for v in unlisted}, listed, out)
    unlisted = [v for v in unlisted if v.rsplit(".", 1)[-1] not in orphans]
    if unlisted:
        out.findings.append(
            Finding(
                "damaged",
                f"{len(unlisted)} critical state(s) on the server are listed by no manifest "
                "(injected or relabelled); they are not restored",
            )
        )


def check_after(
    listed: Listed, served: Served, skip: set[bytes], at: str | None, out: Verified
) -> None:
    """The served records against the lines (module docstring)."""
    bound, horizon = at or _LATEST, listed.pruned.horizon
    for rid, versions in sorted(listed.versions.items()):
        if rid in skip:
            continue
        want = max((v for v in versions if v <= bound), default="")
        if not want:
            continue
        have = served.newest.get(rid)
        name = rid.hex()
        if have is None:
            out.findings.append(
                Finding("deletion", f"record {name[:12]}… is gone from the server", name)
            )
        elif have < want and not _pruned(want, [have], horizon):
            out.findings.append(
                Finding(
                    "replay",
                    f"record {name[:12]}… is served at version {have}, older than the listed "
                    f"{want}",
                    name,
                    want,
                )
            )
    if served.late:
        out.findings.append(
            Finding(
                "damaged",
                f"{served.late} record(s) on the server are sealed under an ended key epoch "
                "but were written after its signed rotation (by a removed device or the "
                "server); they are not restored",
            )
        )
    orphans = _orphans(served.writers, listed, out)
    unlisted = sum(n for d, n in served.unlisted.items() if d not in orphans)
    if unlisted:
        out.findings.append(
            Finding(
                "damaged",
                f"{unlisted} record(s) on the server are listed by no manifest "
                "(injected or relabelled rows, or a push whose manifest is gone); they are not "
                "restored",
            )
        )


def _orphans(writers: set[str], listed: Listed, out: Verified) -> set[str]:
    """The vault's devices among `writers` whose rows no manifest or checkpoint lists: every
    push of theirs was dropped, manifests and all (each reported once, as a rollback)."""
    orphans = (writers - listed.listing_devices) & listed.members
    for device in sorted(orphans):
        finding = Finding(
            "rollback",
            f"every push of device {device[:12]}… is gone (its rows are there, but no manifest "
            "or checkpoint lists them)",
        )
        if finding not in out.findings:
            out.findings.append(finding)
    return orphans


def refusal(found: Verified, *, started: bool = False) -> TiermemError | None:
    """The error a restore without --salvage stops with (None: nothing wrong). `started`: the
    critical state is in place already (the memories are checked after it)."""
    for kind in ORDER:
        hits = [f for f in found.findings if f.kind == kind]
        if not hits:
            continue
        more = (
            f" (and {len(found.findings) - 1} more problem(s))" if len(found.findings) > 1 else ""
        )
        done = (
            "the restore stays unfinished (the critical state and the memories that checked "
            "whole on their own are in place; nothing else is)"
            if started
            else "nothing was restored"
        )
        text = (
            f"restore refused: {hits[0].message}{more}; {done}. `tiermem restore --salvage` "
            "restores everything that authenticates and lists what is missing or damaged"
        )
        if kind == "rollback":
            return ServerRollback(text)
        if kind == "replay":
            return RecordReplayed(text)
        if kind == "deletion":
            return RecordDeleted(text)
        return crypto.TamperedData(text)
    return None


def _check_numbering(listed: Listed, out: Verified) -> None:
    """Pushes 1..N per device without a gap (those the checkpoint covers count as there);
    every push another push saw is there, and the checkpoint its writer made."""
    checkpoint = listed.pruned.checkpoint
    covers = checkpoint.covers if checkpoint else {}
    for device, items in sorted(listed.manifests.items()):
        first = covers.get(device, 0) + 1
        gaps = sorted(set(range(first, max(items) + 1)) - set(items))
        if gaps:
            shown = ", ".join(str(n) for n in gaps[:10])
            out.findings.append(
                Finding("rollback", f"push(es) {shown} of device {device[:12]}… are gone")
            )
    held_by = {d: max(covers.get(d, 0), max(ms, default=0)) for d, ms in listed.manifests.items()}
    held_by = {**covers, **held_by, CHECKPOINT_WITNESS: checkpoint.number if checkpoint else 0}
    for device, items in sorted(listed.manifests.items()):
        for m in items.values():
            for other, n in m.seen:
                held = held_by.get(other, 0)
                if held >= n:
                    continue
                if other == CHECKPOINT_WITNESS:
                    message = (
                        f"checkpoint {n} is gone (device {device[:12]}… made it; the server "
                        f"holds {held or 'none'})"
                    )
                else:
                    message = (
                        f"push {n} of device {other[:12]}… is gone (push {m.n} of device "
                        f"{device[:12]}… had applied it; the server holds {held})"
                    )
                out.findings.append(Finding("rollback", message))


def _pruned(version: str, remaining: list[str], horizon: str | None) -> bool:
    """A newer version w with version < w <= horizon explains a missing one (`sync check`)."""
    return horizon is not None and any(version < w <= horizon for w in remaining)
