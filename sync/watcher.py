"""The daemon's eyes on the home: a `watchdog` observer that calls `on_change` when one of a few
files in one folder is written, created, moved or removed (opening, reading and closing are not
changes). If the observer cannot start, `running` is False and the daemon polls instead."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

__all__ = ["Watcher"]

CHANGES: Final = frozenset({"modified", "created", "deleted", "moved"})
log = logging.getLogger(__name__)


class _Handler(FileSystemEventHandler):
    def __init__(self, names: frozenset[str], on_change: Callable[[], None]) -> None:
        self.names = names
        self.on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in CHANGES:
            return
        for raw in (event.src_path, event.dest_path):
            text = raw.decode() if isinstance(raw, bytes) else raw
            if text and Path(text).name in self.names:
                self.on_change()
                return


class Watcher:
    """Watches the files `names` inside `folder` (a context manager; never raises on start)."""

    def __init__(self, folder: Path, names: Iterable[str], on_change: Callable[[], None]) -> None:
        self.folder = folder
        self._handler = _Handler(frozenset(names), on_change)
        self._observer: Observer | None = None  # type: ignore[valid-type]

    @property
    def running(self) -> bool:
        return self._observer is not None

    def start(self) -> Watcher:
        observer = Observer()
        try:
            observer.schedule(self._handler, str(self.folder), recursive=False)
            observer.daemon = True
            observer.start()
        except OSError as exc:  # inotify limits reached, an unsupported file system, …
            log.warning("cannot watch %s (%s); polling instead", self.folder, exc)
            return self
        self._observer = observer
        return self

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
