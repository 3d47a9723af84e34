"""The watcher: new or edited daily notes and MEMORY.md edits are ingested within seconds.

watchdog reports file events from its own thread; they only mark a path as dirty. The caller's
thread (`run` / `step`) ingests a dirty path once nothing has touched it for `debounce` seconds
and its size and modification time held still while it was read — so a note that is still being
written is never ingested half (if a writer pauses longer than the debounce, the next event
makes the file dirty again and ingestion converges on the final content: it is idempotent).
Editors that save through a temporary file and a rename are seen through the rename.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.core.ingest import DAILY_NAME, FileReport, daily_dir, ingest_note, read_note
from tiermem.core.observe import PathObserver

if TYPE_CHECKING:
    from tiermem.core.engine import Memory
    from tiermem.core.memory_md import MemoryMdReport


@dataclass(frozen=True)
class WatchEvent:
    path: Path
    daily: FileReport | None = None
    memory_md: MemoryMdReport | None = None
    error: str | None = None


class Watcher:
    """Watches the daily-note folder and the agent's MEMORY.md of one `Memory`."""

    def __init__(
        self,
        mem: Memory,
        folder: Path | None = None,
        *,
        debounce: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        mem.require_memory()  # an agent with memory off has nothing to watch for
        self.mem = mem
        self.folder = (folder or daily_dir(mem)).resolve()
        self.memory_md = mem.home.memory_md(mem.agent_id).resolve()
        self.debounce = mem.cfg.ingest.debounce_seconds if debounce is None else debounce
        self._clock = clock
        self._dirty: dict[Path, float] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._observer = PathObserver([self.folder, self.memory_md.parent], self.touch)

    def wanted(self, path: Path) -> bool:
        if path.name.startswith("."):
            return False  # temporary files of atomic writers
        if path == self.memory_md:
            return True
        return path.parent == self.folder and bool(DAILY_NAME.match(path.name))

    def touch(self, path: Path) -> None:
        path = path.resolve()
        if not self.wanted(path):
            return
        with self._lock:
            self._dirty[path] = self._clock()
        self._wake.set()

    def start(self) -> Watcher:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._observer.start()
        return self

    def stop(self) -> None:
        self._observer.stop()

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def scan(self) -> None:
        """Mark every daily note and MEMORY.md dirty (catch up on what changed while away)."""
        if self.folder.is_dir():
            for path in self.folder.iterdir():
                self.touch(path)
        self.touch(self.memory_md)

    def step(self) -> list[WatchEvent]:
        """Ingest the dirty paths that have been quiet for the debounce time."""
        now = self._clock()
        with self._lock:
            due = [p for p, t in self._dirty.items() if now - t >= self.debounce]
            for path in due:
                del self._dirty[path]
        return [event for path in sorted(due) if (event := self._ingest(path)) is not None]

    def wake(self) -> None:
        """Make `run` look at its stop event now (call after setting it)."""
        self._wake.set()

    def run(self, stop: threading.Event, on_event: Callable[[WatchEvent], None]) -> None:
        """Ingest until `stop` is set."""
        while not stop.is_set():
            for event in self.step():
                on_event(event)
            with self._lock:
                pending = list(self._dirty.values())
            wait = min(pending) + self.debounce - self._clock() if pending else 0.5
            self._wake.wait(min(max(wait, 0.01), 0.5))
            self._wake.clear()

    def _ingest(self, path: Path) -> WatchEvent | None:
        before = _signature(path)
        if before is None:
            return None  # deleted: a deleted note changes nothing
        if path == self.memory_md:
            report = self.mem.read_back_memory_md()
            if not report.edited:
                return None
            return WatchEvent(path, memory_md=report)
        try:
            data = read_note(path)
        except OSError as exc:
            return WatchEvent(path, error=f"cannot read ({exc.strerror})")
        if _signature(path) != before:
            self.touch(path)  # written while we read it: not ingested, again once quiet
            return None
        result = ingest_note(self.mem, path, data)
        if result.status == "unchanged":
            return None
        return WatchEvent(path, daily=result)


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns
