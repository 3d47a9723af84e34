"""What a restore fetches, in which order: the vault's windows of rows newest first, and, once
the lines are read, the records they say are warm ahead of the rest (warm before cold on the
wire), several requests in flight, never more than `PAGES_IN_FLIGHT` ahead of what is stored.

The server cannot tell a warm record from a cold one: each manifest and checkpoint line of a
memory version says, inside the encryption, whether it was warm when sealed
(`manifest.ManifestEntry.warm`). The restore reads the lines before it streams, so it asks for
each writer's newest version of those records by id (`store.restore_records`, most recently
written first, in batches of a page), then the remaining windows, which leave out the rows
fetched by id (`store.restore_page`'s `fetched`): nothing crosses the wire twice. A vault
whose lines carry no flags (pushed before them) streams newest first, as before."""

from __future__ import annotations

import concurrent.futures
import functools
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from tiermem.sync import records
from tiermem.sync.restore.verify import Listed
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import Args, ResultSet

__all__ = [
    "EARLY_WINDOWS",
    "PAGES_IN_FLIGHT",
    "Prefetch",
    "Window",
    "plan_windows",
    "warm_records",
    "windows",
]

PAGES_IN_FLIGHT: Final = 4
"""Windows of the vault fetched at once by a restore (each one page of rows, most of the time):
on a link with a long round trip, the round trips overlap instead of adding up."""
EARLY_WINDOWS: Final = 1
"""Windows asked for before the lines are read (the newest): the rest wait for the warm
records, which the lines name."""
MAX_IDS: Final = 500
"""Record ids per request for the warm records (one parameter each)."""

Window = tuple[int, int, "tuple[int, int] | None"]
"""Rows (lo, hi] of the vault, and the stored range (cursor, top) its last page completes."""
Page = list[records.RemoteRow]
FetchWindow = Callable[[int, int, int, Sequence[int]], ResultSet]
"""(after, upto, limit, seqs fetched by id already) → a page of the window."""
FetchRecords = Callable[[Sequence[bytes], Sequence[tuple[int, int]], int, int], ResultSet]
"""(record ids, seq ranges to leave out, after, limit) → a page of those records."""


def windows(
    select: Callable[[str, Args], ResultSet], tag: bytes, every: int
) -> tuple[list[int], tuple[int, int]]:
    """The ends of windows of `every` rows over the whole vault (`store.window_bounds`), and
    its rows and bytes (a progress bar's totals)."""
    rows = select(*store.window_bounds(tag, 0, every)).rows
    totals = (records.server_int(rows[-1][1]), records.server_int(rows[-1][2])) if rows else (0, 0)
    return [records.server_int(r[0]) for r in rows], totals


def plan_windows(bounds: list[int], low: int, top: int) -> list[Window]:
    """The windows a restore streams, newest first, given the window ends `bounds` over the
    whole vault (`store.window_bounds`) and the range (`low`, `top`] an earlier run stored:
    first what was pushed above `top` since, then what lies below `low`. Each window's end
    state is contiguous, so a killed restore resumes from it."""
    newest = bounds[-1] if bounds else top
    above = [top, *(b for b in bounds if b > top)]
    below = [0, *(b for b in bounds if b < low), *([low] if low > 0 else [])]
    planned: list[Window] = []
    for i in range(len(above) - 1, 0, -1):
        planned.append((above[i - 1], above[i], (low, newest) if i == 1 else None))
    for i in range(len(below) - 1, 0, -1):
        planned.append((below[i - 1], below[i], (below[i - 1], newest)))
    return planned


def warm_records(listed: Listed, at: str | None) -> list[bytes]:
    """The memory records whose newest listed version (up to `at`) was warm, the most recently
    written first."""
    checkpoint = listed.pruned.checkpoint
    pushed = (e for ms in listed.manifests.values() for m in ms.values() for e in m.records)
    newest: dict[str, tuple[str, bool]] = {}
    for e in (*(checkpoint.lines if checkpoint else ()), *pushed):
        if e.table != records.MEMORY_TABLE or (at is not None and e.version > at):
            continue
        if e.version > newest.get(e.record_id, ("", False))[0]:
            newest[e.record_id] = (e.version, e.warm)
    ordered = sorted(newest.items(), key=lambda item: item[1][0], reverse=True)
    out = []
    for rid, (_, warm) in ordered:
        try:
            if warm:
                out.append(bytes.fromhex(rid))
        except ValueError:
            continue  # not a record id: nothing to fetch (the checks report the line)
    return out


@dataclass(frozen=True)
class _Job:
    """Pages of one window, or of a batch of records fetched by id (`ids`)."""

    lo: int
    hi: int
    done: tuple[int, int] | None
    ids: tuple[bytes, ...] = ()


class Prefetch:
    """Remote pages in order: the windows `plan_windows` gives (newest first) with, once
    `first` names them, the warm records ahead of the windows not requested yet (only the
    newest `EARLY_WINDOWS` are asked for before). Each page
    holds rows in commit order, each writer's newest version of each record only. `ahead`
    requests run at once on a pool of threads and are handed over in order, never more than
    `ahead` ahead of what the caller stored (memory stays flat however large the vault).
    Started as soon as the vault is opened, so the newest page is on its way while the vault
    is checked; `first` (always called, with no ids for a vault without warm flags) starts
    the rest."""

    def __init__(
        self, fetch: FetchWindow, planned: list[Window], limit: int, ahead: int = PAGES_IN_FLIGHT
    ) -> None:
        self._fetch, self._limit, self._ahead = fetch, limit, ahead
        self._by_id: FetchRecords | None = None
        self._outside: list[tuple[int, int]] = []
        self.top = max((w[1] for w in planned), default=0)  # the newest row it streams
        self._todo = deque(_Job(*w) for w in planned)
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(ahead, thread_name_prefix="tiermem-restore")
        self._jobs: deque[tuple[_Job, Future[list[Page]]]] = deque()
        self._requested: list[tuple[int, int]] = []  # windows asked for before `first`
        self._warm: list[Future[list[Page]]] = []
        self._fetched: set[int] = set()  # seqs fetched by id: the windows leave them out
        for _ in range(min(ahead, EARLY_WINDOWS)):
            self._submit()

    def first(
        self, fetch: FetchRecords, ids: list[bytes], stored: tuple[int, int], batch: int
    ) -> None:
        """Fetch the records `ids` (in batches of `batch`) before the windows not asked for
        yet, leaving out the windows asked for already and the range `stored` an earlier run
        stored; those windows then leave out the rows fetched here."""
        self._by_id = fetch
        outside = [*self._requested, *([stored] if stored[0] < stored[1] else [])]
        step = max(1, min(batch, MAX_IDS))
        jobs = [_Job(0, 0, None, tuple(ids[i : i + step])) for i in range(0, len(ids), step)]
        self._outside = outside
        self._todo.extendleft(reversed(jobs))
        for _ in range(self._ahead - len(self._jobs)):
            self._submit()

    def _submit(self) -> None:
        if not self._todo or self._stop.is_set():
            return
        job = self._todo.popleft()
        if job.ids:
            future = self._pool.submit(self._records, job.ids)
            self._warm.append(future)
        else:
            if self._by_id is None:
                self._requested.append((job.lo, job.hi))
            future = self._pool.submit(self._window, job.lo, job.hi, tuple(self._warm))
        self._jobs.append((job, future))

    def _window(self, lo: int, hi: int, after_warm: tuple[Future[list[Page]], ...]) -> list[Page]:
        """The rows of one window, as pages (more than one only when the server refuses a
        page as too large), once the warm records asked for before it are in."""
        concurrent.futures.wait(after_warm)
        fetched = sorted(s for s in self._fetched if lo < s <= hi)
        return self._paged(lambda after, limit: self._fetch(after, hi, limit, fetched), lo, hi)

    def _records(self, ids: tuple[bytes, ...]) -> list[Page]:
        by_id, outside = self._by_id, self._outside
        assert by_id is not None
        pages = self._paged(lambda after, limit: by_id(ids, outside, after, limit), 0, None)
        self._fetched.update(r.seq for page in pages for r in page)
        return pages

    def _paged(
        self, fetch: Callable[[int, int], ResultSet], after: int, hi: int | None
    ) -> list[Page]:
        """(after, limit) → a page, from seq `after` until a short page or seq `hi`."""
        pages: list[Page] = []
        limit = self._limit
        while not self._stop.is_set():
            result, limit = records.fit_page(functools.partial(fetch, after), limit)
            page = [records.remote_row(tuple(r)) for r in result.rows]
            if page:
                pages.append(page)
            if len(page) < limit or (hi is not None and page[-1].seq >= hi):
                break
            after = page[-1].seq
        return pages

    def pages(self) -> Iterator[tuple[Page, tuple[int, int] | None]]:
        """Each page with the stored range its window ends in, on the window's last page (an
        empty page when a window holds no row to restore)."""
        while self._jobs:
            job, future = self._jobs.popleft()
            pages = future.result()
            self._submit()
            for i, page in enumerate(pages or [[]]):
                yield page, job.done if i == len(pages or [[]]) - 1 else None

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
