"""`tiermem sync check`: is the server's copy of the vault whole and authentic? (like `restic
check`)

Without ``read_data`` the *structure and integrity* are checked: every row and its envelope
are downloaded, but only the manifests and prune records are decrypted:

- every row has a well-formed version written by its own device, and an envelope header and
  length that a sealed record can have (a truncated blob fails here);
- every envelope's SHA-256 equals the digest its manifest line holds (the manifest is sealed
  under the vault key, so a flipped bit, a swapped or a replaced envelope is caught without
  opening the record itself; hashing costs a fraction of decrypting and decoding);
- per device the manifests are numbered 1, 2, 3, … without a gap, and the server is not behind
  what this home already knows (its own confirmed pushes, the highest manifest seen from every
  other device in pulls, the newest critical state applied or pushed): a server that rolled
  back or replays an old state is caught;
- every record line of every manifest is on the server, unless pruning explains its absence
  (below); every record row on the server is listed by a manifest (no row moved in from another
  agent or injected);
- the key wraps (`wrapcheck.check_wraps`) and the signed device roster (`roster_pin.check_roster`);
- no row under an ended key epoch is past its signed rotation's position, and no manifest or
  checkpoint part under one is missing from those the rotation signed (`verify.fenced`).

With ``read_data`` every envelope is also authenticated and decrypted under its epoch's key,
decoded, and matched against its record id (a memory record must carry the memory id its
record id was derived from).

**Pruning rule.** A manifest line ``(rid, v)`` whose row is gone counts as *pruned* iff the
server holds a version ``w`` of the same record with ``v < w <= H``, where ``H`` is the prune
horizon (the highest over all authenticated ``prune`` records, see `restore.prune`). Then every
point in time from ``H`` on sees ``w`` or later, so ``v`` was not needed; anything else missing
is damage.

**Exit codes** (`DAMAGE_EXIT_CODES`): 0 clean; 40 tampered (fails authentication, differs from
its manifest, malformed, or not listed by any manifest); 41 missing (a listed record is gone);
42 gap or rollback (a manifest number is missing, or the server is behind this home); 43 key-wrap
damage; 63 device-roster damage (`roster_pin.check_roster`: an entry that does not verify, or a
device the server lists that the signed roster does not). With several classes found the exit
code is the first in that order: 40, 42, 41, 63, 43.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from tiermem.core.errors import DAMAGE_EXIT_CODES, DamageFound
from tiermem.sync import crypto, hlc, memory_record, records
from tiermem.sync.devices import roster_pin
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.kinds import graph_records
from tiermem.sync.kinds.metrics_records import decode_metrics
from tiermem.sync.manifest import CHECKPOINT_WITNESS, ManifestEntry, decode_manifest
from tiermem.sync.restore import known, wrapcheck
from tiermem.sync.restore.checkpoint import Whole, prune_record_id, read_prune_state
from tiermem.sync.restore.prune import PRUNE_TABLE, decode_prune
from tiermem.sync.restore.results import DEFAULT_PAGE_ROWS
from tiermem.sync.restore.verify import fenced, unbounded_notes
from tiermem.sync.session import Session
from tiermem.sync.spaces import authors
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, HranaClient, ResultSet
from tiermem.sync.vault.retry import RetryPolicy

__all__ = [
    "DAMAGE_EXIT_CODES",
    "CheckReport",
    "DamageFound",
    "Problem",
    "check",
]

Damage = Literal["tampered", "missing", "rollback", "wraps", "roster"]
SEVERITY: Final[tuple[Damage, ...]] = ("tampered", "rollback", "missing", "roster", "wraps")
_OVERHEAD: Final = crypto.ENVELOPE_HEADER_LEN + crypto.TAG_LEN


@dataclass(frozen=True)
class Problem:
    kind: Damage
    message: str
    seq: int | None = None
    record_id: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class CheckReport:
    agent_id: str
    url: str
    read_data: bool
    rows: int
    records: int
    manifests: int
    devices: int
    lines: int
    pruned: int
    decrypted: int
    bytes: int
    horizon: str | None
    problems: tuple[Problem, ...]
    requests: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        for kind in SEVERITY:
            if any(p.kind == kind for p in self.problems):
                return DAMAGE_EXIT_CODES[kind]
        return 0


@dataclass
class _Row:
    seq: int
    record_id: bytes
    version: str
    epoch: int
    device_id: bytes
    length: int
    head: bytes
    envelope: bytes | None


@dataclass
class _Manifest:
    n: int
    version: str
    seq: int
    lines: tuple[ManifestEntry, ...]


CheckProgress = Callable[[int, int], None]


def check(
    engine: Session,
    read_data: bool = False,
    *,
    policy: RetryPolicy | None = None,
    page_rows: int = DEFAULT_PAGE_ROWS,
    progress: CheckProgress | None = None,
) -> CheckReport:
    """Check the remote copy of this agent's vault (see the module docstring)."""
    started = time.perf_counter()
    c = _Checker(engine, read_data, policy or RetryPolicy())
    # Wraps first: they decide which keys the rest can use.
    for w in wrapcheck.check_wraps(engine):
        c.damage("wraps", f"key wraps: {w.message} ({w.kind}, epoch {w.epoch}, {w.subject})")
    for message in roster_pin.check_roster(engine):
        c.damage("roster", f"device roster: {message}")
    c.roster = None if any(p.kind == "roster" for p in c.problems) else roster_pin.verified(engine)
    c.open_keys()
    rows, size = c.read_rows(page_rows, progress)
    seen = c.classify(rows)
    c.check_numbering(seen.manifests)
    c.check_behind(seen)
    lines, pruned = c.check_lines(seen)
    counts: dict[str, int] = {
        kind: sum(1 for p in c.problems if p.kind == kind) for kind in DAMAGE_EXIT_CODES
    }
    return CheckReport(
        agent_id=c.agent,
        url=c.s.url,
        read_data=read_data,
        rows=len(rows),
        records=len(seen.versions),
        manifests=sum(len(v) for v in seen.manifests.values()),
        devices=len(seen.manifests),
        lines=lines,
        pruned=pruned,
        decrypted=seen.decrypted,
        bytes=size,
        horizon=c.horizon,
        problems=tuple(c.problems),
        requests=c.requests,
        seconds=time.perf_counter() - started,
        counts=counts,
        notes=tuple(unbounded_notes(c.roster)),
    )


@dataclass
class _Seen:
    """The rows sorted by what they are."""

    manifests: dict[str, list[_Manifest]] = field(default_factory=dict)
    present: dict[tuple[bytes, str], _Row] = field(default_factory=dict)
    versions: dict[bytes, list[str]] = field(default_factory=dict)
    decrypted: int = 0


class _Checker:
    """One check: the remote reads (counted), the keys, and the problems found so far."""

    def __init__(self, engine: Session, read_data: bool, policy: RetryPolicy) -> None:
        self.engine = engine
        self.read_data = read_data
        self.policy = policy
        self.s = engine.require_ready()
        self.agent = engine.agent_id
        self.tag = self.s.tag
        self.requests = 0
        self.problems: list[Problem] = []
        self.horizon: str | None = None
        self.checkpoint: Whole | None = None
        self.roster: roster_pin.RosterView | None = None

    def select(self, sql: str, args: Args) -> ResultSet:
        def one(c: HranaClient) -> list[ResultSet]:
            return [c.execute(sql, args)]

        results, n, _ = self.engine.remote(self.s).send(one, self.policy)
        self.requests += n
        return results[0]

    def damage(self, kind: Damage, message: str, row: _Row | None = None) -> None:
        self.problems.append(
            Problem(
                kind,
                message,
                None if row is None else row.seq,
                None if row is None else row.record_id.hex(),
                None if row is None else row.version,
            )
        )

    def open_keys(self) -> None:
        """The key ring, the special record ids, the prune horizon and the devices' manifests."""
        self.ring = KeyRing.of_engine(self.engine)
        self.ring.verify = authors.space_verifier(self.engine)  # a space's: signed by a writer
        self.id_key = self.ring.id_key
        self.critical_rid = records.record_id(self.id_key, records.CRITICAL_TABLE, self.agent)
        self.prune_rid = prune_record_id(self.ring)
        state = read_prune_state(self.select, self.ring, self.tag, self.roster)
        for why in state.damaged:
            self.damage("tampered", why)
        self.horizon, self.checkpoint = state.horizon, state.checkpoint
        known_devices = [
            records.server_blob(r[0]) for r in self.select(*store.device_ids(self.tag)).rows
        ]
        self.manifest_rids = {
            d: records.record_id(self.id_key, records.MANIFEST_TABLE, d.hex())
            for d in known_devices
        }

    def read_rows(self, page_rows: int, progress: CheckProgress | None) -> tuple[list[_Row], int]:
        """Every row with its envelope, in pages; returns the rows and their envelope bytes."""
        total = int(str(self.select(*store.count_records(self.tag)).rows[0][0]))
        rows: list[_Row] = []
        after = 0
        size = 0
        while True:
            result, page_rows = records.fit_page(
                functools.partial(_select_page, self.select, self.tag, after),
                page_rows,
            )
            page = result.rows
            for raw in page:
                row = self._row(raw)
                if row is not None:
                    rows.append(row)
                    size += row.length
            if progress is not None:
                progress(len(rows), max(total, len(rows)))
            if len(page) < page_rows:
                break
            after = records.server_int(page[-1][0])
        return rows, size

    def _row(self, raw: Sequence[object]) -> _Row | None:
        try:
            return _Row(
                records.server_int(raw[0]),
                records.server_blob(raw[1]),
                records.server_str(raw[2]),
                records.server_int(raw[3]),
                records.server_blob(raw[4]),
                records.server_int(raw[5]),
                records.server_blob(raw[6]),
                None if raw[7] is None else records.server_blob(raw[7]),
            )
        except crypto.TamperedData:
            self.damage("tampered", f"row seq {raw[0]!r} is malformed")
            return None

    def classify(self, rows: list[_Row]) -> _Seen:
        """Structural checks; decrypt what must (or, with data, may) be decrypted."""
        seen = _Seen()
        for row in rows:
            if not _structure_ok(row, self.damage):
                continue
            device_hex = row.device_id.hex()
            mrid = self.manifest_rids.get(row.device_id) or records.record_id(
                self.id_key, records.MANIFEST_TABLE, device_hex
            )
            listing = row.record_id in (mrid, self.prune_rid)
            late = (
                None if row.envelope is None else fenced(self.roster, _remote(row), listing=listing)
            )
            if late is not None:  # a removed device or the server wrote it after a rotation
                self.damage("tampered", f"a record is {late}", row)
                continue
            if row.record_id == self.prune_rid:
                seen.decrypted += _open_prune(self.ring, self.agent, row, self.damage)
                continue
            if row.record_id == mrid:
                m = _open_manifest(self.ring, self.agent, row, self.select, self.damage)
                seen.decrypted += 1
                if m is not None:
                    seen.manifests.setdefault(device_hex, []).append(m)
                continue
            seen.present[(row.record_id, row.version)] = row
            seen.versions.setdefault(row.record_id, []).append(row.version)
            if self.read_data:
                seen.decrypted += 1
                table = (
                    records.CRITICAL_TABLE
                    if row.record_id == self.critical_rid
                    else records.METRICS_TABLE
                    if row.record_id
                    == records.record_id(self.id_key, records.METRICS_TABLE, device_hex)
                    else records.MEMORY_TABLE
                )
                _open_record(self.ring, self.agent, table, row, self.damage)
        return seen

    def check_numbering(self, manifests: dict[str, list[_Manifest]]) -> None:
        """Each device's manifests are numbered 1, 2, 3, … with no number twice or missing
        (the pushes the checkpoint covers count as there)."""
        covers = self.checkpoint.covers if self.checkpoint else {}
        for device_hex, items in sorted(manifests.items()):
            numbers = sorted(m.n for m in items)
            if len(set(numbers)) != len(numbers):
                self.damage(
                    "tampered", f"device {device_hex[:12]}… has two manifests with one number"
                )
            first = covers.get(device_hex, 0) + 1
            gaps = sorted(set(range(first, numbers[-1] + 1)) - set(numbers))
            if gaps:
                self.damage(
                    "rollback",
                    f"device {device_hex[:12]}…'s pushes {_ranges(gaps)} are missing "
                    f"(manifests 1..{numbers[-1]} expected)",
                )

    def check_behind(self, seen: _Seen) -> None:
        """The server is not behind what this home knows (pushes, critical state)."""
        confirmed = known.confirmed_counters(self.engine, self.s.device_id.hex())
        covers = self.checkpoint.covers if self.checkpoint else {}
        for device_hex, known_n in confirmed.items():
            if device_hex == CHECKPOINT_WITNESS:
                held = self.checkpoint.number if self.checkpoint else 0
                if held < known_n:
                    self.damage(
                        "rollback",
                        f"the server is behind: this home made checkpoint {known_n}, the "
                        f"server holds {held or 'none'} (a rollback or a replayed old state)",
                    )
                continue
            remote_n = max(
                (m.n for m in seen.manifests.get(device_hex, [])),
                default=covers.get(device_hex, 0),
            )
            if remote_n < known_n:
                self.damage(
                    "rollback",
                    f"the server is behind: device {device_hex[:12]}… pushed {known_n} time(s) "
                    f"as far as this home knows, the server holds {remote_n} (a rollback or a "
                    "replayed old state)",
                )
        newest_critical = max(seen.versions.get(self.critical_rid, []), default="")
        known_critical = known.critical_version(self.engine)
        if known_critical and newest_critical < known_critical:
            self.damage(
                "rollback",
                f"the server's newest critical state ({newest_critical or 'none'}) is older "
                f"than the one this home already has ({known_critical})",
            )

    def check_lines(self, seen: _Seen) -> tuple[int, int]:
        """Every manifest line's record is there (or pruned) and matches; every record is
        listed by a manifest. Returns (lines, lines pruned)."""
        listed: set[tuple[bytes, str]] = set()
        lines = pruned = 0
        if self.checkpoint is not None:
            kept = _Manifest(0, "", 0, self.checkpoint.lines)
            for line in kept.lines:
                lines += 1
                writer = line.version.rsplit(".", 1)[-1]
                pruned += self._check_line(seen, writer, kept, line, listed) == "pruned"
        for device_hex, items in sorted(seen.manifests.items()):
            for m in items:
                for line in m.lines:
                    lines += 1
                    found = self._check_line(seen, device_hex, m, line, listed)
                    pruned += found == "pruned"
        orphans = self._orphaned_writers(seen)
        for key, row in seen.present.items():
            if key not in listed and row.device_id.hex() not in orphans:
                self.damage(
                    "tampered",
                    "a record is not listed by any manifest (moved here from another agent, or "
                    "injected)",
                    row,
                )
        return lines, pruned

    def _orphaned_writers(self, seen: _Seen) -> set[str]:
        """Devices of the vault with rows but no manifest left and no checkpoint covering
        them: their pushes were dropped, manifests and all (a rollback, reported as one)."""
        covered = set(self.checkpoint.covers) if self.checkpoint else set()
        writers = {row.device_id.hex() for row in seen.present.values()}
        orphans = (writers - covered - set(seen.manifests)) & {d.hex() for d in self.manifest_rids}
        for device in sorted(orphans):
            self.damage(
                "rollback",
                f"every push of device {device[:12]}… is gone (its rows are there, but no "
                "manifest or checkpoint lists them)",
            )
        return orphans

    def _check_line(
        self,
        seen: _Seen,
        device_hex: str,
        m: _Manifest,
        line: ManifestEntry,
        listed: set[tuple[bytes, str]],
    ) -> str:
        """One manifest line: 'ok', 'pruned' or 'damage' (recorded)."""
        try:
            rid = bytes.fromhex(line.record_id)
        except ValueError:
            self.damage("tampered", f"manifest {m.n} of {device_hex[:12]}… has a bad line")
            return "damage"
        if (line.table == records.CRITICAL_TABLE) != (rid == self.critical_rid) or (
            line.table == records.MANIFEST_TABLE
        ):
            self.damage(
                "tampered",
                f"manifest {m.n} of {device_hex[:12]}… files a record under the wrong table",
            )
            return "damage"
        listed.add((rid, line.version))
        found = seen.present.get((rid, line.version))
        if found is None:
            if _pruned(line.version, seen.versions.get(rid, []), self.horizon):
                return "pruned"
            self.damage(
                "missing",
                f"record {line.record_id[:12]}… version {line.version} (listed by "
                f"push {m.n} of device {device_hex[:12]}…) is missing",
            )
            return "damage"
        if found.envelope is not None:
            if records.envelope_digest(found.envelope) != line.digest:
                self.damage("tampered", "a record differs from its manifest line", found)
            elif found.device_id.hex() != device_hex:
                self.damage("tampered", "a record names another writer than its push", found)
        return "ok"


# ----------------------------------------------------------------------------- helpers


def _structure_ok(row: _Row, damage: Callable[[Damage, str, _Row], None]) -> bool:
    try:
        version = hlc.parse(row.version)
    except ValueError:
        damage("tampered", "a record has a malformed version", row)
        return False
    if version.device != row.device_id.hex():
        damage("tampered", "a record's version names another writer than its row", row)
        return False
    body = row.length - _OVERHEAD
    if body < crypto.MIN_BUCKET or body & (body - 1):
        damage("tampered", f"a record's envelope has an impossible length ({row.length})", row)
        return False
    try:
        header = crypto.parse_envelope(row.head + bytes(crypto.TAG_LEN))
    except crypto.CryptoError as exc:
        damage("tampered", f"a record's envelope header is damaged ({exc})", row)
        return False
    if header.epoch != row.epoch:
        damage("tampered", "a record's epoch column differs from its envelope", row)
        return False
    return True


def _remote(row: _Row) -> records.RemoteRow:
    assert row.envelope is not None
    return records.RemoteRow(
        row.seq, row.record_id, row.version, row.epoch, row.device_id, row.envelope
    )


def _open_record(
    ring: KeyRing,
    agent: str,
    table: str,
    row: _Row,
    damage: Callable[[Damage, str, _Row], None],
) -> None:
    try:
        try:
            plaintext = records.open_row(
                ring.key(row.epoch), agent, table, _remote(row), ring.verify
            )
        except crypto.TamperedData as exc:
            if table != records.MEMORY_TABLE:
                raise
            graph_records.open_or(
                exc, ring.key(row.epoch), agent, ring.id_key, _remote(row), ring.verify
            )
            return
        if table == records.CRITICAL_TABLE:
            records.decode_critical(plaintext, agent)
            return
        if table == records.METRICS_TABLE:
            decode_metrics(plaintext, row.device_id.hex())
            return
        item = memory_record.decode_memory(plaintext)
        if ring.memory_rid(item.id) != row.record_id:
            raise crypto.TamperedData("a memory record holds another memory than its id says")
    except crypto.CryptoError as exc:
        damage("tampered", f"a {table} record fails: {exc}", row)


def _open_prune(
    ring: KeyRing, agent: str, row: _Row, damage: Callable[[Damage, str, _Row], None]
) -> int:
    if row.envelope is None:
        return 0
    try:
        decode_prune(records.open_row(ring.key(row.epoch), agent, PRUNE_TABLE, _remote(row)))
    except crypto.CryptoError as exc:
        damage("tampered", f"a prune record fails: {exc}", row)
    return 1


def _open_manifest(
    ring: KeyRing,
    agent: str,
    row: _Row,
    select: Callable[[str, Args], ResultSet],
    damage: Callable[[Damage, str, _Row], None],
) -> _Manifest | None:
    if row.envelope is None:  # a device missing from the device list: fetch it anyway
        rs = select(*store.envelope_at(row.seq)).rows
        row.envelope = records.server_blob(rs[0][0]) if rs else b""
    try:
        plaintext = records.open_row(
            ring.key(row.epoch), agent, records.MANIFEST_TABLE, _remote(row), ring.verify
        )
        m = decode_manifest(plaintext, row.device_id.hex())
    except crypto.CryptoError as exc:
        damage("tampered", f"a manifest fails: {exc}", row)
        return None
    return _Manifest(m.n, row.version, row.seq, m.records)


def _pruned(version: str, remaining: list[str], horizon: str | None) -> bool:
    """The pruning rule (module docstring): a newer version w with version < w <= horizon."""
    return horizon is not None and any(version < w <= horizon for w in remaining)


def _ranges(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:10])
    return shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


def _select_page(
    select: Callable[[str, Args], ResultSet], tag: bytes, after: int, limit: int
) -> ResultSet:
    return select(*store.with_headers_after(tag, after, limit))
