"""One watchdog observer over a few folders that reports the path of every file written,
created, moved (both names) or removed in them; opening, reading and closing are not changes.
The daemon's wake-up and `tiermem watch` both build on it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

CHANGES: Final = frozenset({"modified", "created", "deleted", "moved"})


class _Handler(FileSystemEventHandler):
    def __init__(self, on_path: Callable[[Path], None]) -> None:
        self.on_path = on_path

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in CHANGES:
            return
        for raw in (event.src_path, event.dest_path):
            if raw:
                self.on_path(Path(raw.decode() if isinstance(raw, bytes) else raw))


class PathObserver:
    """Watches `folders` (not recursively) from watchdog's own thread; a context manager."""

    def __init__(self, folders: Iterable[Path], on_path: Callable[[Path], None]) -> None:
        self.folders = list(dict.fromkeys(folders))
        self._handler = _Handler(on_path)
        self._observer: Observer | None = None  # type: ignore[valid-type]

    @property
    def running(self) -> bool:
        return self._observer is not None

    def start(self) -> PathObserver:
        """Start watching; raises OSError when the system cannot (inotify limits, …)."""
        observer = Observer()
        for folder in self.folders:
            observer.schedule(self._handler, str(folder), recursive=False)
        observer.daemon = True
        observer.start()
        self._observer = observer
        return self

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None

    def __enter__(self) -> PathObserver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
