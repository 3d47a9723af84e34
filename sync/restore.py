"""One-command full restore: the critical state first (usable at once), then every warm, cold
and frozen memory streamed in pages, resumable, swapped in atomically; optionally as of a point
in time.

**Three states, never a fourth.** A home being restored is, for the agent, always one of:

1. *old*: what it was before (missing, empty, or holding other agents only);
2. *usable*: the critical state (hot + tree, MEMORY.md) is in place, so `retrieve`, the hot
   editors and MEMORY.md work at once; no memory of the agent is there yet, and a row in
   ``restore_progress`` says that the memories are still on their way (and from which cursor);
3. *complete*: every memory is in place and the progress row is gone.

Step 1→2 is atomic: an empty or missing home is built in a temporary folder beside it and
renamed into place (a home that holds other agents gets one database transaction). Step 2→3
is atomic too: the memories are streamed page by page into the staging table
``restore_staging`` of the same database (one local transaction per page, together with the
cursor, so a killed restore continues from the last committed page and never stores a row
twice), and when the last page is in, one transaction moves them into ``memories`` and drops the
progress row. Nothing partial is ever visible in ``memories``, the hot state or the tree. A rerun
of the same command finishes an interrupted restore.

**Streaming with bounded memory.** Pages of `page_rows` remote rows are read in the server's
commit order (``seq``); the next page is fetched while the current one is decrypted and stored,
so a high-latency link costs about one round trip per page. Every row is authenticated; a
memory record must also carry the memory id its record id was derived from (no swapped rows).
Per memory id the highest version wins (a tombstone wins like any version and is not restored).

**Point in time.** ``at`` (an HLC version, see `parse_at`) restores, for every record, the
newest version not newer than ``at``. Versions older than the prune horizon (see `prune`) may be
gone; a point in time before it is refused (`PointInTimePruned`), never restored incomplete.

**Pruning** (`prune`) deletes, per record, all but the newest `keep` versions; it never deletes a
record's newest version, a manifest, or a prune record, and it writes the new horizon (a
``prune`` record) in the same atomic batch as its deletes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

import httpx

from tiermem.core import rows, snapshot
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, PointInTimePruned, StorageError, TiermemError
from tiermem.core.paths import Home, validate_agent_id
from tiermem.core.warm import MemoryStore
from tiermem.sync import crypto, hlc, keys, merge, records
from tiermem.sync.hrana import DEFAULT_TIMEOUT, Args, HranaClient, ResultSet, SqlError, to_base_url
from tiermem.sync.retry import RetryPolicy, call_with_retry
from tiermem.sync.secrets import SecretStore
from tiermem.sync.session import Session
from tiermem.sync.state import (
    HomeNotEmpty,
    NothingToRestore,
    Settings,
    agent_tag,
    insert_settings,
    read_settings,
    save_secrets,
    state_digest,
    wrap_id,
)

__all__ = [
    "DEFAULT_KEEP_VERSIONS",
    "DEFAULT_PAGE_ROWS",
    "PRUNE_TABLE",
    "PointInTimePruned",
    "PruneResult",
    "RestoreProgress",
    "RestoreResult",
    "parse_at",
    "prune",
    "prune_horizon",
    "restore",
    "restore_pending",
]

DEFAULT_PAGE_ROWS: Final = 1000
DEFAULT_KEEP_VERSIONS: Final = 10
PRUNE_TABLE: Final = "prune"
PRUNE_KEY: Final = "horizon"
_MAX_DEVICE: Final = "f" * 32


# ------------------------------------------------------------------------------ results


Phase = Literal["critical", "memories", "swap", "done"]


@dataclass(frozen=True)
class RestoreProgress:
    """What a progress bar shows. ``rows``/``total_rows`` count remote rows read (every
    version of every record), ``bytes``/``total_bytes`` their envelopes; totals are measured
    when the restore (or its resumption) starts."""

    phase: Phase
    rows: int
    total_rows: int
    bytes: int
    total_bytes: int
    memories: int
    usable: bool


@dataclass(frozen=True)
class RestoreResult:
    home: Path
    agent_id: str
    url: str
    version: str
    written_by: str
    device_id: str
    unlocked_with: str
    bytes: int
    hot_bytes: int
    lessons: int
    tree_nodes: int
    memory_md: Path
    refreshed: bool
    requests: int
    seconds: float
    at: str | None = None
    resumed: bool = False
    memories: int = 0
    tombstones: int = 0
    kept_local: int = 0
    rows: int = 0
    pages: int = 0
    memory_bytes: int = 0
    usable_seconds: float = 0.0


Progress = Callable[[RestoreProgress], None]
Unlock = Literal["recovery-key", "passphrase"]


# ------------------------------------------------------------------------- point in time


def parse_at(text: str) -> str:
    """A point in time as an inclusive upper bound on versions: an HLC version as is, or a
    time — Unix seconds, or ISO 8601 (``2026-11-20``, ``2026-11-20T14:30``, with or without a
    zone; without one it is local time) — as the last version of that millisecond."""
    text = text.strip()
    try:
        hlc.parse(text)
        return text
    except ValueError:
        pass
    seconds: float
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = datetime.fromisoformat(text).timestamp()
        except ValueError:
            raise InvalidInput(
                f"--at {text!r}: give a version (from `sync status`/`restore`), Unix seconds "
                "or an ISO date/time such as 2026-11-20T14:30"
            ) from None
    if seconds < 0:
        raise InvalidInput("--at must not be before 1970")
    return f"{round(seconds * 1000):018d}.999999.{_MAX_DEVICE}"


# --------------------------------------------------------------------------------- keys


class _KeyRing:
    """Vault keys by epoch and the id key (epoch 1's key: record ids never change).

    `key_for` gives the key of an epoch: in a restore, the newest epoch's key comes from the
    recovery key or passphrase and older ones from the chain wraps a key rotation leaves
    (`keys.unlock_chain`); in a set-up home, from `keys.epoch_key`."""

    def __init__(self, agent_id: str, key_for: Callable[[int], bytes]) -> None:
        self.agent_id = agent_id
        self._key_for = key_for
        self._keys: dict[int, bytes] = {}
        self._memory_mac: hmac.HMAC | Literal[False] | None = None

    def key(self, epoch: int) -> bytes:
        found = self._keys.get(epoch)
        if found is None:
            found = self._keys[epoch] = self._key_for(epoch)
        return found

    @property
    def id_key(self) -> bytes:
        return self.key(keys.ID_EPOCH)

    def memory_rid(self, memory_id: str) -> bytes:
        """`records.record_id(id_key, "memory", memory_id)`, with the HMAC key derived once
        (deriving it is most of the cost of `crypto.record_id`, paid per row otherwise)."""
        if self._memory_mac is None:
            index_key = crypto._hkdf(self.id_key, None, crypto._INFO_RECORD_ID)
            mac = hmac.new(index_key, records.MEMORY_TABLE.encode() + b"\x00", hashlib.sha256)
            probe = "0123456789abcdef"
            fast = mac.copy()
            fast.update(probe.encode())
            expected = records.record_id(self.id_key, records.MEMORY_TABLE, probe)
            self._memory_mac = mac if fast.digest()[:16] == expected else False
        if self._memory_mac is False:  # the id scheme changed: take the slow, sure path
            return records.record_id(self.id_key, records.MEMORY_TABLE, memory_id)
        h = self._memory_mac.copy()
        h.update(memory_id.encode())
        return h.digest()[: crypto.RECORD_ID_LEN]

    @classmethod
    def unlocked(
        cls,
        agent_id: str,
        epoch: int,
        key: bytes,
        select: Callable[[str, Args], ResultSet],
        tag: bytes,
    ) -> _KeyRing:
        chains: dict[int, bytes] = {}

        def key_for(wanted: int) -> bytes:
            if wanted == epoch:
                return key
            if not keys.ID_EPOCH <= wanted < epoch:
                raise crypto.TamperedData(
                    f"a record names key epoch {wanted}, but this vault's newest is {epoch}"
                )
            if not chains:
                rows = select(
                    "SELECT epoch, blob FROM key_wraps WHERE agent_tag = ? AND kind = 'chain'",
                    (tag,),
                ).rows
                chains.update({records.server_int(e): records.server_blob(b) for e, b in rows})
            return keys.unlock_chain(agent_id, epoch, key, chains, wanted)[wanted]

        return cls(agent_id, key_for)

    @classmethod
    def of_engine(cls, engine: Session) -> _KeyRing:
        return cls(engine.agent_id, lambda epoch: keys.epoch_key(engine, epoch))


# ----------------------------------------------------------------------------- restore


def restore(
    home: Path,
    agent_id: str,
    url: str,
    token: str | None,
    *,
    recovery_key: bytes | None = None,
    passphrase: str | None = None,
    store_token: bool = True,
    at: str | None = None,
    progress: Progress | None = None,
    page_rows: int = DEFAULT_PAGE_ROWS,
    timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
    policy: RetryPolicy | None = None,
    driver: str | None = None,
    clock: Callable[[], float] = time.time,
) -> RestoreResult:
    """Restore everything of `agent_id` into `home`: the critical state first (the home is
    usable when `progress` reports ``usable``), then every memory, swapped in at once.

    `home` must hold no memory of that agent, or be a restore of the same vault with nothing
    left to push, or hold an unfinished restore of the same vault (which this call finishes:
    same `at`, continuing from its last committed page). `at` is a version bound from
    `parse_at`."""
    started = time.perf_counter()
    agent_id = validate_agent_id(agent_id)
    if (recovery_key is None) == (passphrase is None):
        raise InvalidInput("give exactly one of a recovery key and a passphrase")
    if page_rows < 1:
        raise InvalidInput("page_rows must be at least 1")
    if at is not None:
        at = parse_at(at)
    policy = policy or RetryPolicy()
    base = to_base_url(url)
    tag = agent_tag(agent_id)
    report = progress or (lambda p: None)
    with HranaClient(base, token, timeout=timeout, transport=transport) as client:

        def select(sql: str, args: Args) -> ResultSet:
            return call_with_retry(lambda: client.execute(sql, args), policy)

        try:
            wraps = select(
                "SELECT epoch, kind, blob FROM key_wraps WHERE agent_tag = ? "
                "AND kind IN ('recovery', 'passphrase') ORDER BY epoch DESC",
                (tag,),
            ).rows
        except SqlError as exc:
            if "no such table" not in str(exc):
                raise
            raise NothingToRestore(
                f"{base} holds no tiermem vault (run `sync init` first)"
            ) from None
        if not wraps:
            raise NothingToRestore(f"{base} holds no vault for agent {agent_id!r}")
        epoch, by_kind, vault_key, unlocked = _unlock(wraps, agent_id, recovery_key, passphrase)
        ring = _KeyRing.unlocked(agent_id, epoch, vault_key, select, tag)
        critical_rid = records.record_id(ring.id_key, records.CRITICAL_TABLE, agent_id)
        if at is not None:
            horizon = prune_horizon(select, ring, tag)
            if horizon is not None and at < horizon:
                raise PointInTimePruned(
                    f"versions before {horizon} were pruned; the oldest point in time that "
                    f"restores completely is {horizon}"
                )
        check = critical_rid.hex()
        pending = _pending_restore(home, agent_id, driver)
        resumed = pending is not None
        # The totals and the first page are fetched while the critical state is written.
        prefetch = _Prefetch(
            lambda after, limit: select(records.SELECT_PAGE, (tag, after, limit)),
            lambda: select(
                "SELECT count(*), COALESCE(sum(length(envelope)), 0) FROM records "
                "WHERE agent_tag = ?",
                (tag,),
            ),
            0 if pending is None else int(pending["cursor"]),
            page_rows,
        )
        with prefetch:
            written, version, writer, envelope_len = _step_one(
                home,
                agent_id,
                pending,
                select,
                ring,
                critical_rid,
                at,
                _RestoreKeys(base, epoch, vault_key, by_kind, "", token if store_token else None),
                _Marker(base, check, at, "", clock()),
                driver=driver,
                clock=clock,
            )
            usable_seconds = time.perf_counter() - started
            total_rows, total_bytes = prefetch.totals()
            report(RestoreProgress("critical", 0, total_rows, 0, total_bytes, 0, True))
            streamed = _stream_memories(
                home,
                agent_id,
                ring,
                prefetch,
                at,
                {critical_rid, _prune_rid(ring)},
                (total_rows, total_bytes),
                report,
                driver=driver,
            )
        requests = client.requests_sent
    swapped = _swap(home, agent_id, driver=driver, clock=clock)
    report(
        RestoreProgress(
            "done",
            streamed.rows_seen,
            max(total_rows, streamed.rows_seen),
            streamed.bytes_seen,
            max(total_bytes, streamed.bytes_seen),
            swapped.memories,
            True,
        )
    )
    return RestoreResult(
        home=home,
        agent_id=agent_id,
        url=base,
        version=version,
        written_by=writer,
        device_id=written.device_id,
        unlocked_with=unlocked,
        bytes=envelope_len,
        hot_bytes=written.hot_bytes,
        lessons=written.lessons,
        tree_nodes=written.tree_nodes,
        memory_md=home / written.memory_md.name,
        refreshed=written.refreshed,
        requests=requests,
        seconds=time.perf_counter() - started,
        at=at,
        resumed=resumed,
        memories=swapped.memories,
        tombstones=swapped.tombstones,
        kept_local=swapped.kept_local,
        rows=streamed.rows,
        pages=streamed.pages,
        memory_bytes=streamed.bytes,
        usable_seconds=usable_seconds,
    )


def _step_one(
    home: Path,
    agent_id: str,
    pending: dict[str, Any] | None,
    select: Callable[[str, Args], ResultSet],
    ring: _KeyRing,
    critical_rid: bytes,
    at: str | None,
    vault: _RestoreKeys,
    marker: _Marker,
    *,
    driver: str | None,
    clock: Callable[[], float],
) -> tuple[_Written, str, str, int]:
    """The critical state into the home (or, resuming, the one already there): the written
    home, the critical version, its writer and its envelope size."""
    agent = agent_id
    if pending is not None:
        if pending["vault_check"] != marker.vault_check:
            raise HomeNotEmpty(
                f"{home} holds an unfinished restore of agent {agent!r} from another "
                "vault; restore into an empty home (--home DIR)"
            )
        if pending["at"] != at:
            raise HomeNotEmpty(
                f"{home} holds an unfinished restore of agent {agent!r} "
                f"{'as of ' + str(pending['at']) if pending['at'] else 'of the newest state'}; "
                "rerun it with the same --at to finish it"
            )
        _remove_stale_restores(home.absolute())
        return _usable_home(home, agent, driver), str(pending["version"]), "", 0
    version, writer, envelope = _newest_critical(select, ring, critical_rid, at)
    plaintext = records.open_row(
        ring.key(epoch_of(envelope)),
        agent,
        records.CRITICAL_TABLE,
        records.RemoteRow(0, critical_rid, version, epoch_of(envelope), writer, envelope),
    )
    state = records.decode_critical(plaintext, agent)
    written = _write_home(
        home,
        agent,
        state,
        dataclasses.replace(vault, version=version),
        dataclasses.replace(marker, version=version),
        driver=driver,
        clock=clock,
    )
    return written, version, writer.hex(), len(envelope)


def epoch_of(envelope: bytes) -> int:
    return crypto.parse_envelope(envelope).epoch


def _newest_critical(
    select: Callable[[str, Args], ResultSet], ring: _KeyRing, rid: bytes, at: str | None
) -> tuple[str, bytes, bytes]:
    """(version, writer, envelope) of the newest critical state (not newer than `at`)."""
    bound = "" if at is None else "AND version <= ? "
    args: tuple[object, ...] = (rid,) if at is None else (rid, at)
    rows = select(
        "SELECT version, epoch, device_id, envelope FROM records WHERE record_id = ? "
        f"{bound}ORDER BY version DESC LIMIT 1",
        args,
    ).rows
    if not rows:
        when = "" if at is None else f" as of {at}"
        raise NothingToRestore(
            f"the vault of agent {ring.agent_id!r} holds no critical state{when} "
            "(nothing was pushed)"
        )
    version, row_epoch, writer, envelope = (
        str(rows[0][0]),
        records.server_int(rows[0][1]),
        records.server_blob(rows[0][2]),
        records.server_blob(rows[0][3]),
    )
    try:
        hlc.parse(version)
    except ValueError:
        raise crypto.TamperedData("the newest record has a malformed version") from None
    if epoch_of(envelope) != row_epoch:
        raise crypto.TamperedData("the newest record belongs to another key epoch")
    return version, writer, envelope


def _unlock(
    wraps: Sequence[Sequence[object]],
    agent_id: str,
    recovery_key: bytes | None,
    passphrase: str | None,
) -> tuple[int, dict[str, bytes], bytes, Unlock]:
    """The newest epoch, its wraps by kind, and its vault key unwrapped with the given secret."""
    epoch = records.server_int(wraps[0][0])
    by_kind = {
        str(kind): records.server_blob(blob)
        for e, kind, blob in wraps
        if records.server_int(e) == epoch
    }
    if "recovery" not in by_kind:
        raise NothingToRestore(f"the vault of agent {agent_id!r} has no recovery key wrap")
    if recovery_key is not None:
        context = crypto.WrapContext(agent_id, epoch, wrap_id(agent_id, epoch, "recovery"))
        key = crypto.unwrap_with_recovery_key(by_kind["recovery"], recovery_key, context)
        return epoch, by_kind, key, "recovery-key"
    assert passphrase is not None
    if "passphrase" not in by_kind:
        raise NothingToRestore(
            f"the vault of agent {agent_id!r} has no passphrase; use the recovery key"
        )
    context = crypto.WrapContext(agent_id, epoch, wrap_id(agent_id, epoch, "passphrase"))
    key = crypto.unwrap_with_passphrase(by_kind["passphrase"], passphrase, context)
    return epoch, by_kind, key, "passphrase"


# ------------------------------------------------------------------- step 1: critical state


@dataclass(frozen=True)
class _RestoreKeys:
    url: str
    epoch: int
    vault_key: bytes
    wraps: dict[str, bytes]
    version: str
    token: str | None


@dataclass(frozen=True)
class _Marker:
    """The progress row written with the critical state: "memories still on their way"."""

    url: str
    vault_check: str
    at: str | None
    version: str
    started_at: float


@dataclass(frozen=True)
class _Written:
    device_id: str
    hot_bytes: int
    lessons: int
    tree_nodes: int
    memory_md: Path
    refreshed: bool


def restore_pending(home: Path, agent_id: str, driver: str | None = None) -> bool:
    """Whether `home` holds an unfinished restore of `agent_id` (its memories are missing)."""
    return _pending_restore(home, agent_id, driver) is not None


def _pending_restore(home: Path, agent_id: str, driver: str | None) -> dict[str, Any] | None:
    if not Home(home).db_path.is_file():
        return None  # never create a home just to look
    with Memory(home, agent_id, driver=driver) as mem:
        row = mem.db.query_one(
            "SELECT vault_check, at, version, cursor FROM restore_progress WHERE agent_id = ?",
            (agent_id,),
        )
    if row is None:
        return None
    return {"vault_check": row[0], "at": row[1], "version": row[2], "cursor": row[3]}


def _usable_home(home: Path, agent_id: str, driver: str | None) -> _Written:
    with Memory(home, agent_id, driver=driver) as mem:
        s = read_settings(mem.db, agent_id)
        return _written(mem, "" if s is None else s.device_id.hex(), refreshed=False)


def _written(mem: Memory, device_hex: str, *, refreshed: bool) -> _Written:
    return _Written(
        device_id=device_hex,
        hot_bytes=mem.hot_size_bytes(),
        lessons=len(mem.hot().critical_lessons),
        tree_nodes=len(mem.trees.load().nodes),
        memory_md=mem.home.memory_md(mem.agent_id),
        refreshed=refreshed,
    )


def _write_home(
    home: Path,
    agent_id: str,
    state: dict[str, Any],
    vault: _RestoreKeys,
    marker: _Marker,
    *,
    driver: str | None,
    clock: Callable[[], float],
) -> _Written:
    fresh = not home.exists() or (home.is_dir() and not any(home.iterdir()))
    if not fresh:
        return _restore_into(home, agent_id, state, vault, marker, driver=driver, clock=clock)
    parent = home.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_restores(home.absolute())
        tmp = Path(tempfile.mkdtemp(prefix=f".{home.name}.restore-", dir=parent))
    except OSError as exc:
        raise StorageError(f"cannot create a folder beside {home} ({exc.strerror})") from None
    try:
        written = _restore_into(tmp, agent_id, state, vault, marker, driver=driver, clock=clock)
        _fsync_tree(tmp)
        try:
            os.rename(tmp, home)  # atomic; replaces a missing or empty folder
        except OSError as exc:
            raise StorageError(
                f"cannot move the restored home into {home} ({exc.strerror})"
            ) from None
        _fsync_path(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


def _remove_stale_restores(home: Path) -> None:
    """Temporary folders of restores that were killed: they hold secrets, so they go."""
    for stale in home.parent.glob(f".{home.name}.restore-*"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """Every file of the new home and the folder itself reach the disk before the rename, so
    after a power loss the renamed home is whole (SQLite already synced its own commits)."""
    for path in root.rglob("*"):
        if path.is_file():
            _fsync_path(path)
    _fsync_path(root)


def _restore_into(
    root: Path,
    agent_id: str,
    state: dict[str, Any],
    vault: _RestoreKeys,
    marker: _Marker,
    *,
    driver: str | None,
    clock: Callable[[], float],
) -> _Written:
    with Memory(root, agent_id, clock=clock, driver=driver) as mem:
        current = read_settings(mem.db, agent_id)
        refreshed = current is not None
        if current is not None:
            _check_same_vault(mem, current, vault)
        else:
            _check_no_memory(mem)
        created_store: SecretStore | None = None
        if current is None:
            device_key = crypto.generate_device_key()
            device_id = os.urandom(16)
            ref = uuid.uuid4().hex
            created_store, _ = save_secrets(mem.home.root, ref, device_key, vault.token)
            settings = Settings(
                agent_id=agent_id,
                status="ready",
                url=vault.url,
                device_id=device_id,
                epoch=vault.epoch,
                secret_ref=ref,
                secret_store=created_store.kind,
                device_wrap=crypto.wrap_for_device(
                    vault.vault_key,
                    device_key.public_key(),
                    crypto.WrapContext(
                        agent_id, vault.epoch, wrap_id(agent_id, vault.epoch, "device", device_id)
                    ),
                ),
                recovery_wrap=vault.wraps["recovery"],
                passphrase_wrap=vault.wraps.get("passphrase"),
                hlc=vault.version,
                last_push_version=vault.version,
                created_at=mem.now(),
            )
        try:
            with mem.db.transaction():
                device_hex = (settings if current is None else current).device_id.hex()
                digest = _load_critical(mem, state, device_hex)
                if current is None:
                    insert_settings(mem.db, settings)
                last = hlc.parse(vault.version)
                if current is not None and current.hlc:
                    last = max(last, hlc.parse(current.hlc))
                mem.db.execute(
                    "UPDATE sync_state SET hlc = ?, last_digest = ?, last_push_version = ? "
                    "WHERE agent_id = ?",
                    (str(last), digest, vault.version, agent_id),
                )
                mem.db.execute("DELETE FROM restore_staging WHERE agent_id = ?", (agent_id,))
                mem.db.execute(
                    "INSERT OR REPLACE INTO restore_progress (agent_id, url, vault_check, at, "
                    "version, started_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        agent_id,
                        marker.url,
                        marker.vault_check,
                        marker.at,
                        marker.version,
                        marker.started_at,
                    ),
                )
        except BaseException:
            if created_store is not None:
                created_store.delete_all()
            raise
        mem.write_memory_md()
        return _written(mem, device_hex, refreshed=refreshed)


def _load_critical(mem: Memory, state: dict[str, Any], device_hex: str) -> str:
    """Write the critical state (inside the caller's transaction) and return the digest a
    push compares with (so the restored state is not pushed back). Through the per-item merge,
    so the per-item clocks of the payload are kept for later merges."""
    merge.merge_remote(mem, state, device_hex)
    document = merge.critical_document(mem, device_hex)
    return state_digest(records.encode_critical(document))


def _check_no_memory(mem: Memory) -> None:
    if rows.holds_memory(mem.db, mem.agent_id):
        raise HomeNotEmpty(
            f"{mem.home.root} already holds memory for agent {mem.agent_id!r}; restore into an "
            "empty home (--home DIR) so nothing local is overwritten"
        )


def _check_same_vault(mem: Memory, current: Settings, vault: _RestoreKeys) -> None:
    """Restoring again over an earlier restore (or init) of the same vault is allowed when
    nothing local is waiting to be pushed: it only brings the newest state."""
    with Session(mem) as engine:
        try:
            same = current.status == "ready" and current.epoch == vault.epoch
            same = same and engine.vault_key(current) == vault.vault_key
        except TiermemError:
            same = False
    if not same:
        raise HomeNotEmpty(
            f"{mem.home.root} is set up to sync agent {mem.agent_id!r} with another vault; "
            "restore into an empty home (--home DIR)"
        )
    unpushed = mem.db.scalar(
        "SELECT EXISTS (SELECT 1 FROM sync_dirty WHERE agent_id = ?) "
        "OR EXISTS (SELECT 1 FROM sync_batches WHERE agent_id = ?)",
        (mem.agent_id, mem.agent_id),
    )
    if snapshot.pending(mem.db, mem.agent_id) or current.inflight is not None or unpushed:
        raise HomeNotEmpty(
            f"{mem.home.root} has changes for agent {mem.agent_id!r} that are not pushed yet; "
            "run `tiermem sync push` first, or restore into an empty home (--home DIR)"
        )


# ------------------------------------------------------------------ step 2: the memories


@dataclass(frozen=True)
class _Streamed:
    rows: int  # rows read by this call
    pages: int
    bytes: int
    rows_seen: int  # including earlier, interrupted runs
    bytes_seen: int


_STAGED_NAMES: Final = rows.NAMES[1:]
_STAGE: Final = (
    f"INSERT INTO restore_staging (agent_id, id, version, deleted, "
    f"{rows.column_list(_STAGED_NAMES)}) VALUES ({', '.join('?' * (4 + len(_STAGED_NAMES)))}) "
    "ON CONFLICT (agent_id, id) DO UPDATE SET version = excluded.version, "
    "deleted = excluded.deleted, "
    + ", ".join(f"{name} = excluded.{name}" for name in _STAGED_NAMES)
    + " WHERE excluded.version > restore_staging.version"
)


class _Prefetch:
    """Remote pages in commit order, each fetched while the caller works on the one before (a
    high-latency link then costs about one round trip per page, not two). Started before the
    critical state is written, with the totals for the progress bar first."""

    def __init__(
        self,
        fetch: Callable[[int, int], ResultSet],
        totals: Callable[[], ResultSet],
        after: int,
        limit: int,
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tiermem-restore")
        self._fetch = fetch
        self._limit = limit
        self.after = after
        self._totals: Future[ResultSet] = self._pool.submit(totals)
        self._next: Future[tuple[ResultSet, int]] | None = self._pool.submit(self._page, after)

    def _page(self, after: int) -> tuple[ResultSet, int]:
        return records.fit_page(lambda n: self._fetch(after, n), self._limit)

    def totals(self) -> tuple[int, int]:
        row = self._totals.result().rows[0]
        return int(str(row[0])), int(str(row[1]))

    def pages(self) -> Iterator[list[records.RemoteRow]]:
        while self._next is not None:
            result, self._limit = self._next.result()
            page = [records.remote_row(tuple(r)) for r in result.rows]
            more = len(page) == self._limit
            self._next = self._pool.submit(self._page, page[-1].seq) if more else None
            if page:
                yield page

    def __enter__(self) -> _Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._next is not None:
            self._next.cancel()
        self._pool.shutdown(wait=True)


def _stream_memories(
    home: Path,
    agent_id: str,
    ring: _KeyRing,
    prefetch: _Prefetch,
    at: str | None,
    skip: set[bytes],
    totals: tuple[int, int],
    report: Progress,
    *,
    driver: str | None,
) -> _Streamed:
    """Stream every remote row after the saved cursor into the staging table, one local
    transaction per page (rows + cursor together)."""
    with Memory(home, agent_id, driver=driver) as mem:
        db = mem.db
        row = db.query_one(
            "SELECT cursor, rows, bytes FROM restore_progress WHERE agent_id = ?", (agent_id,)
        )
        if row is None:
            raise StorageError(f"the restore of agent {agent_id!r} lost its progress row")
        cursor, rows_before, bytes_before = int(row[0]), int(row[1]), int(row[2])
        rows = pages = size = 0
        manifest_rids: dict[bytes, bytes] = {}
        staged = int(
            db.scalar("SELECT count(*) FROM restore_staging WHERE agent_id = ?", (agent_id,))
        )
        if cursor != prefetch.after:
            raise StorageError(f"the restore of agent {agent_id!r} changed its cursor meanwhile")
        for page in prefetch.pages():
            batch: list[tuple[object, ...]] = []
            peers: list[tuple[object, ...]] = []
            for r in page:
                size += len(r.envelope)
                if r.record_id in skip:
                    continue
                if r.device_id not in manifest_rids:
                    manifest_rids[r.device_id] = records.record_id(
                        ring.id_key, records.MANIFEST_TABLE, r.device_id.hex()
                    )
                if r.record_id == manifest_rids[r.device_id]:
                    peers.append(_peer_params(ring, agent_id, r))
                    continue
                if at is not None and r.version > at:
                    continue
                batch.append(_memory_params(ring, agent_id, r))
            rows += len(page)
            pages += 1
            with db.transaction():
                if batch:
                    db.executemany(_STAGE, batch)
                if peers:
                    db.executemany(_PEER, peers)
                db.execute(
                    "UPDATE restore_progress SET cursor = ?, rows = rows + ?, bytes = bytes + ?, "
                    "pages = pages + 1 WHERE agent_id = ?",
                    (page[-1].seq, len(page), sum(len(r.envelope) for r in page), agent_id),
                )
            staged += len(batch)
            report(
                RestoreProgress(
                    "memories",
                    rows_before + rows,
                    max(totals[0], rows_before + rows),
                    bytes_before + size,
                    max(totals[1], bytes_before + size),
                    staged,
                    True,
                )
            )
    return _Streamed(rows, pages, size, rows_before + rows, bytes_before + size)


_PEER: Final = (
    "INSERT INTO sync_peers (agent_id, device_id, last_n, last_version) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (agent_id, device_id) DO UPDATE SET last_n = excluded.last_n, "
    "last_version = excluded.last_version WHERE excluded.last_n > sync_peers.last_n"
)


def _peer_params(ring: _KeyRing, agent_id: str, r: records.RemoteRow) -> tuple[object, ...]:
    """A device's manifest: the highest push counter seen per device (what a later `sync
    check` compares the server with, to see a rollback)."""
    plaintext = records.open_row(ring.key(r.epoch), agent_id, records.MANIFEST_TABLE, r)
    manifest = records.decode_manifest(plaintext, r.device_id.hex())
    return (agent_id, manifest.device, manifest.n, r.version)


def _memory_params(ring: _KeyRing, agent_id: str, r: records.RemoteRow) -> tuple[object, ...]:
    """Authenticate and decode one memory record into staging-table parameters."""
    try:
        hlc.parse(r.version)
    except ValueError:
        raise crypto.TamperedData("a record has a malformed version") from None
    plaintext = records.open_row(ring.key(r.epoch), agent_id, records.MEMORY_TABLE, r)
    item = records.decode_memory(plaintext)
    if ring.memory_rid(item.id) != r.record_id:
        raise crypto.TamperedData("a memory record was moved to another record id")
    if isinstance(item, records.Tombstone):
        return (agent_id, item.id, r.version, 1, *([None] * len(_STAGED_NAMES)))
    return (agent_id, item.id, r.version, 0, *item.columns())


# ----------------------------------------------------------------------- step 3: the swap


@dataclass(frozen=True)
class _Swapped:
    memories: int
    tombstones: int
    kept_local: int


def _swap(home: Path, agent_id: str, *, driver: str | None, clock: Callable[[], float]) -> _Swapped:
    """Move every staged memory into `memories` in one transaction and drop the progress row.

    A memory written locally while the restore ran (the home was usable) is newer than the
    restored one and is kept; tombstones are not restored."""
    with Memory(home, agent_id, clock=clock, driver=driver) as mem:
        db = mem.db
        store = MemoryStore(db, agent_id)
        with db.transaction():
            if (
                db.query_one("SELECT 1 FROM restore_progress WHERE agent_id = ?", (agent_id,))
                is None
            ):
                return _Swapped(0, 0, 0)  # finished by an earlier run
            counts = db.query_one(
                "SELECT count(*) FILTER (WHERE deleted = 1), count(*) FILTER (WHERE deleted = 0 "
                "AND EXISTS (SELECT 1 FROM memories m WHERE m.agent_id = s.agent_id "
                "AND m.id = s.id)) FROM restore_staging s WHERE agent_id = ?",
                (agent_id,),
            )
            assert counts is not None
            tombstones, kept_local = int(counts[0]), int(counts[1])
            dirty_before = int(db.scalar("SELECT COALESCE(MAX(seq), 0) FROM sync_dirty"))
            restored = rows.insert_staged(store, "restore_staging")
            _adopt(db, agent_id, dirty_before)
            db.execute("DELETE FROM restore_staging WHERE agent_id = ?", (agent_id,))
            db.execute("DELETE FROM restore_progress WHERE agent_id = ?", (agent_id,))
        return _Swapped(restored, tombstones, kept_local)


def _adopt(db: Database, agent_id: str, dirty_before: int) -> None:
    """Tell incremental sync (helper 6A's tables) that the restored rows are in sync: their
    dirty marks (made by the insert triggers just now) go, their versions are known, and the
    pull continues after the last row streamed. Marks of memories written locally while the
    restore ran are older than `dirty_before` and stay, so those get pushed."""
    db.execute("DELETE FROM sync_dirty WHERE agent_id = ? AND seq > ?", (agent_id, dirty_before))
    db.execute(
        "INSERT INTO sync_versions (agent_id, id, version) SELECT agent_id, id, version "
        "FROM restore_staging WHERE agent_id = ? ON CONFLICT (agent_id, id) DO UPDATE "
        "SET version = excluded.version WHERE excluded.version > sync_versions.version",
        (agent_id,),
    )
    db.execute(
        "INSERT INTO sync_progress (agent_id, pull_cursor, critical_version) "
        "SELECT agent_id, cursor, version FROM restore_progress WHERE agent_id = ? "
        "ON CONFLICT (agent_id) DO UPDATE SET pull_cursor = max(pull_cursor, "
        "excluded.pull_cursor), critical_version = max(critical_version, "
        "excluded.critical_version)",
        (agent_id,),
    )


# ------------------------------------------------------------------------------- pruning


def _prune_rid(ring: _KeyRing) -> bytes:
    return crypto.record_id(ring.id_key, PRUNE_TABLE, PRUNE_KEY)


def prune_horizon(
    select: Callable[[str, Args], ResultSet], ring: _KeyRing, tag: bytes
) -> str | None:
    """The newest authenticated prune horizon of the vault (None: never pruned). Every
    version of the prune record is read, so deleting the newest one cannot lower it."""
    rid = _prune_rid(ring)
    rows = select(
        "SELECT 0, record_id, version, epoch, device_id, envelope FROM records "
        "WHERE record_id = ? AND agent_tag = ?",
        (rid, tag),
    ).rows
    best: str | None = None
    for raw in rows:
        row = records.remote_row(tuple(raw))
        plaintext = records.open_row(ring.key(row.epoch), ring.agent_id, PRUNE_TABLE, row)
        horizon = decode_prune(plaintext)
        best = horizon if best is None else max(best, horizon)
    return best


def encode_prune(horizon: str, keep: int) -> bytes:
    return records.canonical({"format": records.FORMAT, "horizon": horizon, "keep": keep})


def decode_prune(plaintext: bytes) -> str:
    try:
        data = json.loads(plaintext)
        horizon = data["horizon"]
        hlc.parse(horizon)
    except (ValueError, KeyError, TypeError):
        raise crypto.TamperedData("a prune record is malformed") from None
    if not isinstance(horizon, str):
        raise crypto.TamperedData("a prune record is malformed")
    return horizon


@dataclass(frozen=True)
class PruneResult:
    keep: int
    records: int  # distinct records looked at
    deleted: int  # versions deleted
    kept: int  # versions kept
    horizon: str | None  # points in time from here on restore completely
    requests: int
    seconds: float


def prune(
    engine: Session,
    keep_versions: int = DEFAULT_KEEP_VERSIONS,
    *,
    policy: RetryPolicy | None = None,
    batch_rows: int = 500,
) -> PruneResult:
    """Delete, per record, all versions but the newest `keep_versions` (never the newest one;
    manifests and prune records are never deleted).

    The horizon H written with the deletes is the highest "oldest kept version" over the
    records that lost versions: for any point in time ≥ H every record's version as of then is
    still there. `sync check` uses H to tell a pruned version from a deleted one."""
    started = time.perf_counter()
    if keep_versions < 1:
        raise InvalidInput("keep at least one version of each record")
    policy = policy or RetryPolicy()
    s = engine.require_ready()
    tag = agent_tag(engine.agent_id)
    requests = 0

    def call(fn: Callable[[HranaClient], list[ResultSet]]) -> list[ResultSet]:
        nonlocal requests
        results, n, _ = engine.remote(s).send(fn, policy)
        requests += n
        return results

    def select(sql: str, args: Args) -> ResultSet:
        return call(lambda c: [c.execute(sql, args)])[0]

    ring = _KeyRing.of_engine(engine)
    id_key = ring.id_key
    protected = {_prune_rid(ring)}
    versions: dict[bytes, list[tuple[str, int]]] = {}
    after = 0
    while True:
        page = select(
            "SELECT seq, record_id, version, device_id FROM records WHERE agent_tag = ? "
            "AND seq > ? ORDER BY seq LIMIT 5000",
            (tag, after),
        ).rows
        for seq, rid, version, device in page:
            assert isinstance(seq, int) and isinstance(rid, bytes)
            assert isinstance(version, str) and isinstance(device, bytes)
            after = seq
            if rid in protected:
                continue
            if rid == records.record_id(id_key, records.MANIFEST_TABLE, device.hex()):
                protected.add(rid)
                versions.pop(rid, None)
                continue
            versions.setdefault(rid, []).append((version, seq))
        if len(page) < 5000:
            break
    doomed: list[int] = []
    horizon: str | None = None
    kept = 0
    for rid, items in versions.items():
        if rid in protected:
            continue
        items.sort(reverse=True)
        kept += min(len(items), keep_versions)
        if len(items) > keep_versions:
            doomed += [seq for _, seq in items[keep_versions:]]
            oldest_kept = items[keep_versions - 1][0]
            horizon = oldest_kept if horizon is None else max(horizon, oldest_kept)
    if doomed:
        assert horizon is not None
        previous = prune_horizon(select, ring, tag)
        if previous is not None:
            horizon = max(horizon, previous)
        seal_key = ring.key(s.epoch)
        version = str(
            hlc.tick(
                hlc.parse(s.hlc) if s.hlc else None, int(engine.mem.now() * 1000), s.device_id.hex()
            )
        )
        rid = _prune_rid(ring)
        envelope = crypto.seal_record(
            seal_key,
            s.epoch,
            crypto.RecordContext(engine.agent_id, PRUNE_TABLE, rid, version, s.device_id),
            encode_prune(horizon, keep_versions),
        )
        with engine.db.transaction():
            engine.db.execute(
                "UPDATE sync_state SET hlc = ? WHERE agent_id = ? AND hlc < ?",
                (version, engine.agent_id, version),
            )
        for start in range(0, len(doomed), batch_rows):
            chunk = doomed[start : start + batch_rows]
            statements: list[tuple[str, Args]] = [
                (
                    "DELETE FROM records WHERE agent_tag = ? AND seq IN "
                    f"({', '.join('?' * len(chunk))})",
                    (tag, *chunk),
                )
            ]
            if start == 0:  # the horizon lands with the first deletes, atomically
                statements.insert(
                    0,
                    (
                        "INSERT INTO records (agent_tag, record_id, version, epoch, device_id, "
                        "envelope) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                        (tag, rid, version, s.epoch, s.device_id, envelope),
                    ),
                )
            call(lambda c, st=statements: c.batch(st))  # type: ignore[misc]
    else:
        horizon = prune_horizon(select, ring, tag)
    return PruneResult(
        keep=keep_versions,
        records=len(versions),
        deleted=len(doomed),
        kept=kept,
        horizon=horizon,
        requests=requests,
        seconds=time.perf_counter() - started,
    )
