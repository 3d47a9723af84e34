"""The daemon's eyes on the home: calls `on_change` when one of a few files in one folder is
written, created, moved or removed. If the observer cannot start, `running` is False and the
daemon polls instead."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from tiermem.core.observe import PathObserver

__all__ = ["Watcher"]

log = logging.getLogger(__name__)


class Watcher:
    """Watches the files `names` inside `folder` (a context manager; never raises on start)."""

    def __init__(self, folder: Path, names: Iterable[str], on_change: Callable[[], None]) -> None:
        self.folder = folder
        wanted = frozenset(names)
        self._observer = PathObserver([folder], lambda p: on_change() if p.name in wanted else None)

    @property
    def running(self) -> bool:
        return self._observer.running

    def start(self) -> Watcher:
        try:
            self._observer.start()
        except OSError as exc:  # inotify limits reached, an unsupported file system, …
            log.warning("cannot watch %s (%s); polling instead", self.folder, exc)
        return self

    def stop(self) -> None:
        self._observer.stop()

    def __enter__(self) -> Watcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
