"""Before a restore writes anything: does the server hold the whole vault its own manifests
describe? Every row's metadata is read (not the envelopes) with every manifest (decrypted).

- *rollback*: a device's pushes are numbered with a gap, a push that another device's push
  saw (its manifest's ``seen``) is gone, or rows of a push are there without their manifest;
- *deletion*: a record the manifests list has no version left on the server, or a listed
  version is gone that pruning does not explain;
- *replay*: the newest version of a record (or of the critical state) on the server is older
  than the newest one the manifests list: the restore would bring back a stale state;
- *damaged*: a manifest that fails authentication, or rows no manifest lists (injected or
  relabelled, or a push whose manifest is gone).

Rows that no manifest lists are never restored. A fresh home has no anchor of its own, so a
server that drops the newest pushes of every device at once is not seen (as with restic); a
push that any later push saw is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from tiermem.core.errors import RecordDeleted, RecordReplayed, ServerRollback, TiermemError
from tiermem.sync import crypto, records
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.manifest import CHECKPOINT_WITNESS, Manifest, decode_manifest
from tiermem.sync.restore.checkpoint import PruneState
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, ResultSet

__all__ = ["Finding", "Listing", "Verified", "read_listing", "refusal", "verify"]

Kind = Literal["rollback", "replay", "deletion", "damaged"]
ORDER: Final[tuple[Kind, ...]] = ("damaged", "rollback", "replay", "deletion")
_LATEST: Final = "~"  # sorts after every version
_INDEX_PAGE: Final = 20_000
"""Rows per request of the index (about 100 bytes each: one round trip per 20,000 rows keeps
the check from delaying the usable home on a slow link)."""


@dataclass(frozen=True)
class Finding:
    kind: Kind
    message: str
    record_id: str | None = None
    version: str | None = None


@dataclass
class Verified:
    """What the check found, and the rows a restore must not take (no manifest lists them)."""

    findings: list[Finding] = field(default_factory=list)
    unlisted: set[tuple[bytes, str]] = field(default_factory=set)
    rows: int = 0


@dataclass
class _Index:
    present: dict[bytes, list[str]] = field(default_factory=dict)
    writer: dict[tuple[bytes, str], bytes] = field(default_factory=dict)
    manifests: dict[str, dict[int, Manifest]] = field(default_factory=dict)
    manifest_versions: set[tuple[bytes, str]] = field(default_factory=set)
    pruned: PruneState = field(default_factory=PruneState)


Select = Callable[[str, Args], ResultSet]


@dataclass
class Listing:
    """Every row of the vault as the server lists it: the versions of each record id and the
    writer of each version (`verify` takes these over), read while the manifests are fetched,
    with the totals a progress bar shows."""

    present: dict[bytes, list[str]] = field(default_factory=dict)
    writer: dict[tuple[bytes, str], bytes] = field(default_factory=dict)
    total_rows: int = 0
    total_bytes: int = 0


def read_listing(select: Select, tag: bytes, page_rows: int) -> Listing:
    """Every row's metadata, in large pages (it needs no key, so it runs beside the other
    early reads). One object per distinct version and writer: a push gives its rows one."""
    out = Listing()
    versions: dict[str, str] = {}
    devices: dict[bytes, bytes] = {}
    after, limit = 0, max(page_rows, _INDEX_PAGE)
    while True:
        result, limit = records.fit_page(
            functools.partial(_page, select, store.index_after, tag, after), limit
        )
        for _seq, rid, version, device, length in result.rows:
            rid_b = records.server_blob(rid)
            text = records.server_str(version)
            v = versions.setdefault(text, text)
            out.present.setdefault(rid_b, []).append(v)
            d = records.server_blob(device)
            out.writer[(rid_b, v)] = devices.setdefault(d, d)
            out.total_bytes += records.server_int(length)
        out.total_rows += len(result.rows)
        if len(result.rows) < limit:
            return out
        after = records.server_int(result.rows[-1][0])


def verify(
    select: Select,
    ring: KeyRing,
    tag: bytes,
    listing: Listing,
    skip: set[bytes],
    at: str | None,
    pruned: Callable[[], PruneState],
    page_rows: int,
) -> Verified:
    """Check the server's copy of the vault (`listing`, taken over) against its manifests and
    checkpoint (module docstring). `skip`: record ids that are not records of a push (the prune
    record); `pruned` gives the prune record's state (read meanwhile, needed after the
    manifests): the horizon and the checkpoint that stands for the manifests it covers."""
    out = Verified()
    index = _read_index(listing, skip, out)
    _read_manifests(select, ring, tag, index, page_rows, out)
    index.pruned = pruned()
    out.findings += [Finding("damaged", why) for why in index.pruned.damaged]
    _check_numbering(index, out)
    listed = _check_lines(index, at or _LATEST, index.pruned.horizon, out)
    for key in index.writer:
        if key not in listed and key not in index.manifest_versions:
            out.unlisted.add(key)
    orphans = _orphaned_writers(index)
    if orphans:  # only then is the device list read (a request a clean vault never needs)
        orphans &= {records.server_blob(r[0]).hex() for r in select(*store.device_ids(tag)).rows}
    for device in sorted(orphans):
        out.findings.append(
            Finding(
                "rollback",
                f"every push of device {device[:12]}… is gone (its rows are there, but no "
                "manifest or checkpoint lists them)",
            )
        )
    if any(index.writer[key].hex() not in orphans for key in out.unlisted):
        out.findings.append(
            Finding(
                "damaged",
                f"{len(out.unlisted)} record(s) on the server are listed by no manifest "
                "(injected or relabelled rows, or a push whose manifest is gone); they are not "
                "restored",
            )
        )
    return out


def _orphaned_writers(index: _Index) -> set[str]:
    """Writers whose rows are on the server with no manifest left and no checkpoint covering
    them: for a device of the vault, its pushes were dropped, manifests and all (a row of
    another vault's device is an injected one)."""
    checkpoint = index.pruned.checkpoint
    covered = set(checkpoint.covers) if checkpoint else set()
    writers = {d.hex() for d in index.writer.values()}
    return writers - covered - set(index.manifests)


def refusal(found: Verified) -> TiermemError | None:
    """The error a restore without --salvage stops with (None: nothing wrong)."""
    for kind in ORDER:
        hits = [f for f in found.findings if f.kind == kind]
        if not hits:
            continue
        more = (
            f" (and {len(found.findings) - 1} more problem(s))" if len(found.findings) > 1 else ""
        )
        text = (
            f"restore refused: {hits[0].message}{more}; nothing was restored. "
            "`tiermem restore --salvage` restores everything that authenticates and lists "
            "what is missing or damaged"
        )
        if kind == "rollback":
            return ServerRollback(text)
        if kind == "replay":
            return RecordReplayed(text)
        if kind == "deletion":
            return RecordDeleted(text)
        return crypto.TamperedData(text)
    return None


def _read_index(listing: Listing, skip: set[bytes], out: Verified) -> _Index:
    """The listing without the `skip` record ids (taken over, not copied)."""
    index = _Index(listing.present, listing.writer)
    out.rows = listing.total_rows
    for rid in skip:
        for version in index.present.pop(rid, []):
            index.writer.pop((rid, version), None)
            out.rows -= 1
    return index


def _read_manifests(
    select: Select, ring: KeyRing, tag: bytes, index: _Index, page_rows: int, out: Verified
) -> None:
    """Every device's manifests, decrypted (a device is every writer of a row)."""
    by_rid = {
        records.record_id(ring.id_key, records.MANIFEST_TABLE, d.hex()): d
        for d in set(index.writer.values())
    }
    rids = sorted(by_rid)
    for i in range(0, len(rids), 50):
        chunk = rids[i : i + 50]
        after = 0
        while True:
            result, page_rows = records.fit_page(
                functools.partial(_page, select, store.manifests_after, tag, chunk, after),
                page_rows,
            )
            for raw in result.rows:
                _add_manifest(ring, records.remote_row(tuple(raw)), index, out)
            if len(result.rows) < page_rows:
                break
            after = records.server_int(result.rows[-1][0])


def _page(select: Select, build: Callable[..., store.Statement], *args: object) -> ResultSet:
    """`select` the statement `build(*args)` makes (`fit_page` passes the limit last)."""
    return select(*build(*args))


def _add_manifest(ring: KeyRing, row: records.RemoteRow, index: _Index, out: Verified) -> None:
    index.manifest_versions.add((row.record_id, row.version))
    device = row.device_id.hex()
    try:
        plaintext = records.open_row(
            ring.key(row.epoch), ring.agent_id, records.MANIFEST_TABLE, row
        )
        m = decode_manifest(plaintext, device)
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
    mine = index.manifests.setdefault(device, {})
    if m.n in mine:
        out.findings.append(
            Finding("damaged", f"device {device[:12]}… has two manifests numbered {m.n}")
        )
    mine[m.n] = m


def _check_numbering(index: _Index, out: Verified) -> None:
    """Pushes 1..N per device without a gap (those a checkpoint covers count as there);
    every push another push saw is there, and the checkpoint its writer made."""
    checkpoint = index.pruned.checkpoint
    covers = checkpoint.covers if checkpoint else {}
    for device, items in sorted(index.manifests.items()):
        first = covers.get(device, 0) + 1
        gaps = sorted(set(range(first, max(items) + 1)) - set(items))
        if gaps:
            shown = ", ".join(str(n) for n in gaps[:10])
            out.findings.append(
                Finding("rollback", f"push(es) {shown} of device {device[:12]}… are gone")
            )
    held_by = {d: max(covers.get(d, 0), max(ms, default=0)) for d, ms in index.manifests.items()}
    held_by = {**covers, **held_by, CHECKPOINT_WITNESS: checkpoint.number if checkpoint else 0}
    for device, items in sorted(index.manifests.items()):
        for m in items.values():
            for other, n in m.seen:
                held = held_by.get(other, 0)
                if other == CHECKPOINT_WITNESS and held < n:
                    out.findings.append(
                        Finding(
                            "rollback",
                            f"checkpoint {n} is gone (device {device[:12]}… made it; the "
                            f"server holds {held or 'none'})",
                        )
                    )
                elif held < n:
                    out.findings.append(
                        Finding(
                            "rollback",
                            f"push {n} of device {other[:12]}… is gone (push {m.n} of device "
                            f"{device[:12]}… had applied it; the server holds {held})",
                        )
                    )


def _check_lines(
    index: _Index, at: str, horizon: str | None, out: Verified
) -> set[tuple[bytes, str]]:
    """Every listed record is there as new as listed (up to `at`). Returns the listed rows."""
    listed: dict[bytes, list[str]] = {}
    checkpoint = index.pruned.checkpoint
    pushed = [e for ms in index.manifests.values() for m in ms.values() for e in m.records]
    for line in (*(checkpoint.lines if checkpoint else ()), *pushed):
        try:
            rid = bytes.fromhex(line.record_id)
        except ValueError:
            continue
        listed.setdefault(rid, []).append(line.version)
    for rid, versions in sorted(listed.items()):
        present = index.present.get(rid, [])
        name = rid.hex()
        if not present:
            out.findings.append(
                Finding("deletion", f"record {name[:12]}… is gone from the server", name)
            )
            continue
        want = max((v for v in versions if v <= at), default="")
        have = max((v for v in present if v <= at), default="")
        if want and have < want and not _pruned(want, present, horizon):
            out.findings.append(
                Finding(
                    "replay",
                    f"record {name[:12]}… is served at version {have or 'none'}, older than "
                    f"the listed {want}",
                    name,
                    want,
                )
            )
            continue
        for v in versions:
            if v not in present and v < have and not _pruned(v, present, horizon):
                out.findings.append(
                    Finding("deletion", f"record {name[:12]}… version {v} is gone", name, v)
                )
    return {(rid, v) for rid, versions in listed.items() for v in versions}


def _pruned(version: str, remaining: list[str], horizon: str | None) -> bool:
    """A newer version w with version < w <= horizon explains a missing one (`sync check`)."""
    return horizon is not None and any(version < w <= horizon for w in remaining)
