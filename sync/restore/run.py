"""The restore orchestrator: open the vault with the recovery key or passphrase (or, for a
vault this device belongs to, its own keys: `member`), write the critical state (step 1,
`home`), stream the memories (step 2, `stream`), swap them in (step 3, `swap`)."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx

from tiermem.core.errors import InvalidInput, PointInTimePruned
from tiermem.core.paths import validate_agent_id
from tiermem.sync import crypto, records
from tiermem.sync.crypto.roster import RosterView
from tiermem.sync.devices import find_vault, roster_pin
from tiermem.sync.devices.enroll import enroll_restored
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.restore import checkpoint_copy
from tiermem.sync.restore.checkpoint import prune_record_id
from tiermem.sync.restore.critical import Critical, critical_candidates, open_critical
from tiermem.sync.restore.home import (
    Marker,
    RestoreKeys,
    Written,
    pending_restore,
    remove_stale_restores,
    usable_home,
    write_home,
)
from tiermem.sync.restore.live import Completion
from tiermem.sync.restore.member import MemberAccess, open_memory
from tiermem.sync.restore.prefetch import Prefetch, plan_windows, warm_records, windows
from tiermem.sync.restore.results import (
    DEFAULT_PAGE_ROWS,
    Progress,
    RestoreProgress,
    RestoreResult,
    Unlock,
)
from tiermem.sync.restore.stream import Streamed, Streaming, stream_memories
from tiermem.sync.restore.swap import Swapped, swap
from tiermem.sync.restore.verify import (
    Listed,
    Served,
    Verified,
    check_after,
    check_before,
    fetch_listing,
    read_listed,
    refusal,
    restore_roster,
    served_before,
)
from tiermem.sync.restore.when import parse_at
from tiermem.sync.state import HomeNotEmpty, NothingToRestore
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT, Args, ResultSet
from tiermem.sync.vault.remote import Remote, allow_insecure_http
from tiermem.sync.vault.retry import RetryPolicy, call_with_retry
from tiermem.sync.vault.transport import to_base_url

# ----------------------------------------------------------------------------- restore

OPENING_THREADS: Final = 6
"""A restore's opening requests at once (roster, prune record, critical state, manifests) and
the two checks waiting on them: on a long round trip they overlap instead of adding up."""


@dataclass(frozen=True)
class _Vault:
    """The vault as the recovery key or passphrase opened it."""

    tag: bytes
    epoch: int
    wraps: dict[str, bytes]
    key: bytes
    unlocked: Unlock
    ring: KeyRing
    critical_rid: bytes
    pruned: Future[checkpoint_copy.Downloaded]
    critical: Future[Critical] | None

    @property
    def read_apart(self) -> set[bytes]:
        """The records read apart from the stream: the critical state and the prune record."""
        return {self.critical_rid, prune_record_id(self.ring)}


@dataclass(frozen=True)
class _Job:
    """What one restore call was asked to do."""

    home: Path
    agent_id: str
    base: str
    at: str | None
    page_rows: int
    token_to_store: str | None
    report: Progress
    driver: str | None
    clock: Callable[[], float]
    started: float
    salvage: bool = False
    member: MemberAccess | None = None


@dataclass(frozen=True)
class _Fetched:
    """Steps 1 and 2 done: the critical state written, the memories staged."""

    written: Written
    version: str
    writer: str
    envelope_len: int
    usable_seconds: float
    totals: tuple[int, int]
    streamed: Streamed
    skipped_critical: tuple[tuple[str, str, str], ...] = ()


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
    salvage: bool = False,
    insecure_http: bool = False,
    member: MemberAccess | None = None,
) -> RestoreResult:
    """Restore everything of `agent_id` into `home`: the critical state first (the home is
    usable when `progress` reports ``usable``), then every memory, swapped in at once.

    `home` must hold no memory of that agent, or be a restore of the same vault with nothing
    left to push, or hold an unfinished restore of the same vault (which this call finishes:
    same `at`, continuing from its last committed page). `at` is a version bound from
    `parse_at`.

    The server's copy is first checked against the vault's manifests (`verify`): a rollback,
    a deleted or a replayed record stops the restore before anything is written. With
    `salvage`, everything that authenticates is restored and the rest listed in
    ``RestoreResult.problems``. `member`: a vault this device belongs to (a shared space's
    scope), opened with its own keys, every record checked by `member.verify`."""
    started = time.perf_counter()
    if member is None:
        agent_id = validate_agent_id(agent_id)
        if (recovery_key is None) == (passphrase is None):
            raise InvalidInput("give exactly one of a recovery key and a passphrase")
    if page_rows < 1:
        raise InvalidInput("page_rows must be at least 1")
    if at is not None:
        at = parse_at(at)
    retry = policy or RetryPolicy()
    base = to_base_url(url)
    report = progress or (lambda p: None)
    job = _Job(
        home,
        agent_id,
        base,
        at,
        page_rows,
        token if store_token else None,
        report,
        driver,
        clock,
        started,
        salvage,
        member,
    )
    pending = pending_restore(home, agent_id, driver)
    with Remote(
        base, token, timeout=timeout, transport=transport, insecure_http=insecure_http
    ) as remote:
        vault, verified, fetched, requests = _remote_steps(
            job, remote, retry, recovery_key, passphrase, pending
        )
    problems = _problems(verified, fetched)
    downloaded = vault.pruned.result()
    whole = downloaded.rows and not (problems or downloaded.state.damaged)
    kept = (vault.tag, downloaded.rows) if whole else None  # the next prune builds on it
    swapped = swap(home, agent_id, driver=driver, clock=clock, checkpoint=kept)
    if insecure_http:
        with open_memory(home, agent_id, driver=driver) as mem:
            allow_insecure_http(mem, True)
    report(_done(fetched, swapped))
    result = _result(job, vault, fetched, swapped, requests, resumed=pending is not None)
    return dataclasses.replace(result, salvage=salvage, problems=problems)


def _remote_steps(
    job: _Job,
    remote: Remote,
    retry: RetryPolicy,
    recovery_key: bytes | None,
    passphrase: str | None,
    pending: dict[str, Any] | None,
) -> tuple[_Vault, Verified, _Fetched, int]:
    """Open, check and fetch the vault, and sign this device onto its roster; also the
    requests sent before that."""

    client = remote.client  # one client for every thread (Remote itself is not thread-safe)

    def select(sql: str, args: Args) -> ResultSet:
        return call_with_retry(functools.partial(client.execute, sql, args), retry)

    opened, unlocked = (
        _open(select, job.base, job.agent_id, recovery_key, passphrase)
        if job.member is None
        else (job.member.opened, job.member.unlocked)
    )
    tag = opened.tag
    with ThreadPoolExecutor(OPENING_THREADS, thread_name_prefix="tiermem-restore") as pool:
        bodies = pool.submit(roster_pin.read_bodies, select, tag)
        roster = pool.submit(
            lambda: (
                job.member.roster
                if job.member
                else restore_roster(job.agent_id, bodies.result(), recovery_key)
            )
        )
        verify = None if job.member is None else job.member.verify  # before any record opens
        vault = _open_vault(
            select, pool, job.agent_id, opened, unlocked, job.at, pending, roster, verify
        )
        listing = pool.submit(fetch_listing, select, vault.ring, tag)
        bounds, totals = windows(select, tag, job.page_rows)
        top = bounds[-1] if bounds else 0
        stored = (top, top) if pending is None else (int(pending["cursor"]), int(pending["top"]))
        apart = sorted(vault.read_apart)
        # The newest page is on its way while the vault is checked, the rest once the lines
        # name the warm records (bounded: `PAGES_IN_FLIGHT` ahead of what is stored).
        with Prefetch(
            lambda after, upto, limit, fetched: select(
                *store.restore_page(tag, (after, upto, job.at, apart), limit, fetched)
            ),
            plan_windows(bounds, *stored),
            job.page_rows,
        ) as prefetch:
            verified = Verified()
            pruned = vault.pruned.result().state  # a rollback it finds is reported first
            listed = read_listed(listing.result(), vault.ring, pruned, verified, roster.result())
            _check_before(job, vault, listed, verified)
            prefetch.first(  # warm before cold: the records the lines say are warm
                lambda ids, outside, after, limit: select(
                    *store.restore_records(ids, tag, job.at, outside, after, limit)
                ),
                warm_records(listed, job.at),
                stored,
                job.page_rows,
            )
            served = Served(roster=roster.result())
            completion = Completion(listed.versions, job.at)
            if stored[0] < stored[1]:  # what an earlier run stored, for the checks
                seen = (served, completion)
                served_before(
                    select,
                    (vault.tag, vault.ring.id_key),
                    vault.read_apart,
                    stored,
                    job.at,
                    listed,
                    seen,
                )
            fetched = _fetch(job, vault, prefetch, pending, listed, (served, completion), totals)
            _check_after(job, vault, listed, served, fetched, verified)
        requests = client.requests_sent
        _enroll(job, remote, recovery_key, retry, bodies.result())
    return vault, verified, fetched, requests


def _enroll(
    job: _Job,
    remote: Remote,
    recovery_key: bytes | None,
    retry: RetryPolicy,
    bodies: list[bytes],
) -> None:
    """This device onto the signed roster, with its epoch floor (never seals under a hidden
    rotation); a member's device is on it already, unless it was restored with the secret."""
    enrol_as = None if job.member is None else job.member.enrol_as
    if job.member is None or enrol_as is not None:
        enroll_restored(
            job.home,
            job.agent_id,
            remote,
            recovery_key,
            retry,
            driver=job.driver,
            bodies=bodies,
            member=enrol_as,
        )


def _done(fetched: _Fetched, swapped: Swapped) -> RestoreProgress:
    streamed = fetched.streamed  # done: every row there was to stream is seen (the totals
    # counted older versions and the records read apart too)
    return RestoreProgress(
        "done",
        streamed.rows_seen,
        streamed.rows_seen,
        streamed.bytes_seen,
        streamed.bytes_seen,
        swapped.memories,
        True,
        swapped.memories,
    )


def _check_before(job: _Job, vault: _Vault, listed: Listed, verified: Verified) -> None:
    """Before anything is written: a point in time older than the prune horizon, the pushes'
    numbering and the critical state (`verify.check_before`); without salvage, damage stops
    here."""
    horizon = listed.pruned.horizon
    if job.at is not None and horizon is not None and job.at < horizon:
        raise PointInTimePruned(
            f"versions before {horizon} were pruned; the oldest point in time that "
            f"restores completely is {horizon}"
        )
    present = [] if vault.critical is None else vault.critical.result().versions
    if vault.critical is not None:
        check_before(listed, vault.critical_rid, present, job.at, verified)
    error = refusal(verified)
    if error is not None and not job.salvage:
        raise error


def _check_after(
    job: _Job,
    vault: _Vault,
    listed: Listed,
    served: Served,
    fetched: _Fetched,
    verified: Verified,
) -> None:
    """After the memories are staged, before they are swapped in: the served records against
    the lines (`verify.check_after`); without salvage, damage stops here."""
    check_after(listed, served, vault.read_apart, job.at, verified)
    error = refusal(verified, started=True)
    if error is None and fetched.streamed.damaged:
        rid, version, why = fetched.streamed.damaged[0]
        error = crypto.TamperedData(
            f"record {rid[:12]}… version {version} fails authentication ({why}); the restore "
            "stays unfinished (only memories that checked whole are in place). `tiermem "
            "restore --salvage` restores everything that authenticates and lists the rest"
        )
    if error is not None and not job.salvage:
        raise error


def _problems(verified: Verified, fetched: _Fetched) -> tuple[dict[str, str], ...]:
    """What a salvage left out or found stale, one entry per problem."""
    found = [
        {
            "kind": f.kind,
            "message": f.message,
            "record_id": f.record_id or "",
            "version": f.version or "",
        }
        for f in verified.findings
    ]
    found += [
        {
            "kind": "damaged",
            "message": f"fails authentication: {why}",
            "record_id": rid,
            "version": v,
        }
        for rid, v, why in fetched.streamed.damaged + fetched.skipped_critical
    ]
    return tuple(found)


def _fetch(
    job: _Job,
    vault: _Vault,
    prefetch: Prefetch,
    pending: dict[str, Any] | None,
    listed: Listed,
    seen: tuple[Served, Completion],
    totals: tuple[int, int],
) -> _Fetched:
    """Step 1 (the critical state) while the first pages arrive, then step 2 (the memories
    into the staging table)."""
    written, version, writer, envelope_len, skipped = _step_one(
        job.home,
        job.agent_id,
        pending,
        vault.critical,
        vault.critical_rid,
        job.at,
        RestoreKeys(
            job.base, vault.epoch, vault.key, vault.wraps, "", job.token_to_store, vault.tag
        ),
        Marker(job.base, vault.critical_rid.hex(), job.at, "", job.clock(), prefetch.top),
        ring=vault.ring,
        driver=job.driver,
        clock=job.clock,
        salvage=job.salvage,
        listed=listed.pairs,
    )
    usable_seconds = time.perf_counter() - job.started
    job.report(RestoreProgress("critical", 0, totals[0], 0, totals[1], 0, True))
    streaming = Streaming(
        vault.ring,
        job.at,
        vault.read_apart,
        listed.pairs,
        *seen,
        salvage=job.salvage,
        stored=None if job.member is None else job.member.stored,
    )
    streamed = stream_memories(
        job.home,
        job.agent_id,
        prefetch,
        streaming,
        totals,
        job.report,
        driver=job.driver,
    )
    return _Fetched(
        written, version, writer, envelope_len, usable_seconds, totals, streamed, skipped
    )


def _result(
    job: _Job, vault: _Vault, fetched: _Fetched, swapped: Swapped, requests: int, *, resumed: bool
) -> RestoreResult:
    written, streamed = fetched.written, fetched.streamed
    return RestoreResult(
        home=job.home,
        agent_id=job.agent_id,
        url=job.base,
        version=fetched.version,
        written_by=fetched.writer,
        device_id=written.device_id,
        unlocked_with=vault.unlocked,
        bytes=fetched.envelope_len,
        hot_bytes=written.hot_bytes,
        lessons=written.lessons,
        tree_nodes=written.tree_nodes,
        memory_md=job.home / written.memory_md.name,
        refreshed=written.refreshed,
        requests=requests,
        seconds=time.perf_counter() - job.started,
        at=job.at,
        resumed=resumed,
        memories=swapped.memories,
        tombstones=swapped.tombstones,
        kept_local=swapped.kept_local,
        rows=streamed.rows,
        pages=streamed.pages,
        memory_bytes=streamed.bytes,
        usable_seconds=fetched.usable_seconds,
    )


def _open(
    select: Callable[[str, Args], ResultSet],
    base: str,
    agent_id: str,
    recovery_key: bytes | None,
    passphrase: str | None,
) -> tuple[find_vault.Opened, Unlock]:
    """Find the vault and unlock its newest epoch key (`find_vault`), and say with what."""
    if recovery_key is not None:
        return find_vault.open_with_recovery_key(
            select, base, agent_id, recovery_key
        ), "recovery-key"
    assert passphrase is not None
    return find_vault.open_with_passphrase(select, base, agent_id, passphrase), "passphrase"


def _open_vault(
    select: Callable[[str, Args], ResultSet],
    pool: ThreadPoolExecutor,
    agent_id: str,
    opened: find_vault.Opened,
    unlocked: Unlock,
    at: str | None,
    pending: dict[str, Any] | None,
    roster: Future[RosterView | None],
    verify: records.Verifier | None = None,
) -> _Vault:
    """The opened vault's key ring; the prune record and (unless resuming) the critical
    states are asked for at once, the prune record checked once the roster is in."""
    tag, epoch, by_kind, vault_key = opened.tag, opened.epoch, opened.wraps, opened.key
    ring = KeyRing.unlocked(agent_id, epoch, vault_key, select, tag)
    ring.verify = verify  # a space's prune record and critical state: signed by a writer
    critical_rid = records.record_id(ring.id_key, records.CRITICAL_TABLE, agent_id)
    downloaded = pool.submit(checkpoint_copy.download, select, ring, tag)
    pruned = pool.submit(checkpoint_copy.read_checked, downloaded, ring, roster)
    critical = (
        None
        if pending is not None
        else pool.submit(critical_candidates, select, ring, tag, critical_rid, at)
    )
    return _Vault(tag, epoch, by_kind, vault_key, unlocked, ring, critical_rid, pruned, critical)


def _step_one(
    home: Path,
    agent_id: str,
    pending: dict[str, Any] | None,
    candidates: Future[Critical] | None,
    critical_rid: bytes,
    at: str | None,
    vault: RestoreKeys,
    marker: Marker,
    *,
    ring: KeyRing,
    driver: str | None,
    clock: Callable[[], float],
    salvage: bool,
    listed: set[tuple[bytes, str]],
) -> tuple[Written, str, str, int, tuple[tuple[str, str, str], ...]]:
    """The critical state into the home (or, resuming, the one already there): the written
    home, the critical version, its writer, its envelope size and (salvage) the newer critical
    states that failed authentication."""
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
        remove_stale_restores(home.absolute())
        return usable_home(home, agent, driver), str(pending["version"]), "", 0, ()
    skipped: list[tuple[str, str, str]] = []
    assert candidates is not None  # read whenever no restore is pending
    for version, writer, envelope in candidates.result().newest:
        if (critical_rid, version) not in listed:
            continue
        try:
            state = open_critical(ring, agent, critical_rid, version, writer, envelope)
        except crypto.CryptoError as exc:
            if not salvage:
                raise crypto.TamperedData(
                    f"the critical state fails authentication ({exc}); `tiermem restore "
                    "--salvage` restores the newest one that authenticates"
                ) from None
            skipped.append((critical_rid.hex(), version, str(exc)))
            continue
        written = write_home(
            home,
            agent,
            state,
            dataclasses.replace(vault, version=version),
            dataclasses.replace(marker, version=version),
            driver=driver,
            clock=clock,
        )
        return written, version, writer.hex(), len(envelope), tuple(skipped)
    when = "" if at is None else f" as of {at}"
    raise NothingToRestore(
        f"the vault of agent {agent!r} holds no critical state{when} that authenticates "
        "(nothing was pushed, or every copy is damaged)"
    )
