"""`tiermem daemon`: sync in the background, both ways.

The loop checks for local changes (the critical-state outbox and changed memory rows) every
`poll` seconds (0.25 s by default, so a `conversation-end` is pushed well within a second) and
pushes with the backoff schedule, retrying transient failures for as long as it runs. It also
pulls what other devices pushed: once at start (right after pushing what was already waiting)
and then every `pull_interval` seconds (30 s by default), so a fact learned on the phone is
recalled on the desktop within one interval. A failure that needs a person (bad token, SQL
error) is reported and tried again after the longest backoff wait, so fixing the token is
enough. A device removed from the vault (`keys.DeviceRevoked`) can never sync again: the daemon
reports it and stops with that error instead of retrying.

Stopping (SIGTERM/SIGINT call `stop()`) interrupts a backoff wait at once; a request on the wire
is allowed to finish (its timeouts bound it) so its outcome is recorded. Nothing queued can be
lost either way: an outbox row is only removed in the transaction that records a confirmed push.
One daemon per home and agent: a second one is refused (an OS file lock, released on any exit).
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import httpx

from tiermem.core.engine import Memory
from tiermem.core.errors import DaemonRunning, StorageError, TiermemError
from tiermem.sync import keys
from tiermem.sync.engine import DEFAULT_BATCH_BYTES, SyncEngine
from tiermem.sync.hrana import DEFAULT_TIMEOUT
from tiermem.sync.retry import MAX_CAP, RetryPolicy

__all__ = ["DEFAULT_POLL", "DEFAULT_PULL_INTERVAL", "Daemon", "DaemonRunning"]

DEFAULT_POLL: Final = 0.25
DEFAULT_PULL_INTERVAL: Final = 30.0

Report = Callable[[dict[str, Any]], None]
log = logging.getLogger(__name__)
_LEVELS: Final = {"up-to-date": logging.DEBUG, "retry": logging.WARNING, "error": logging.WARNING}


class _Stopped(Exception):
    """Raised out of a backoff wait when the daemon is asked to stop."""


class Daemon:
    def __init__(
        self,
        mem: Memory,
        *,
        poll: float = DEFAULT_POLL,
        report: Report | None = None,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        error_pause: float = MAX_CAP,
        pull_interval: float = DEFAULT_PULL_INTERVAL,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> None:
        if poll <= 0:
            raise ValueError("poll must be positive")
        if pull_interval <= 0:
            raise ValueError("pull_interval must be positive")
        self.mem = mem
        self.poll = poll
        self.pull_interval = pull_interval
        self.error_pause = error_pause
        self._report = report or (lambda event: None)
        self._stop = threading.Event()
        self._engine = SyncEngine(
            mem, timeout=timeout, transport=transport, batch_bytes=batch_bytes
        )
        self.pushes = 0
        self.pulls = 0

    def _emit(self, event: dict[str, Any]) -> None:
        """Log the event (revocation as an error) and hand it to the report callback."""
        kind = event["event"]
        level = (
            logging.ERROR if event.get("reason") == "revoked" else _LEVELS.get(kind, logging.INFO)
        )
        details = " ".join(
            f"{key}={value}" for key, value in event.items() if key not in ("event", "agent_id")
        )
        log.log(level, "daemon %s for agent %s: %s", kind, self.mem.agent_id, details)
        self._report(event)

    def stop(self) -> None:
        """Ask the loop to end (safe from a signal handler or another thread)."""
        self._stop.set()

    def _wait(self, seconds: float) -> None:
        if self._stop.wait(seconds):
            raise _Stopped

    def _backoff_wait(self, seconds: float) -> None:
        status = self._engine.status()
        self._emit({"event": "retry", "wait": round(seconds, 3), "error": status.last_error})
        self._wait(seconds)

    def run(self) -> None:
        """Pull and push until stopped. Raises `NotInitialised` at once if sync is not set up."""
        engine = self._engine
        try:
            engine.require_ready()
            with _single_instance(self.mem.home.root, self.mem.agent_id):
                self._emit({"event": "started", "agent_id": self.mem.agent_id})
                policy = RetryPolicy(max_attempts=None, sleep=self._backoff_wait)
                next_pull = time.monotonic()  # pull at once on start …
                push_first = True  # … after pushing what waits here (a kill may have left it)
                while not self._stop.is_set():
                    try:
                        if push_first:
                            push_first = False
                            if engine.has_work():
                                self._push(policy)
                                continue
                        if time.monotonic() >= next_pull:
                            # Set first: a failing pull must not hold pushes back.
                            next_pull = time.monotonic() + self.pull_interval
                            self._pull(policy)
                            continue
                        if not engine.has_work():
                            self._stop.wait(min(self.poll, max(next_pull - time.monotonic(), 0)))
                            continue
                        self._push(policy)
                    except _Stopped:
                        break
                    except keys.DeviceRevoked:
                        self._emit(
                            {
                                "event": "stopped",
                                "pushes": self.pushes,
                                "pulls": self.pulls,
                                "reason": "revoked",
                            }
                        )
                        raise
                    except TiermemError as exc:
                        self._emit(
                            {"event": "error", "error": str(exc), "retry_in": self.error_pause}
                        )
                        try:
                            self._wait(self.error_pause)
                        except _Stopped:
                            break
                self._emit({"event": "stopped", "pushes": self.pushes, "pulls": self.pulls})
        finally:
            engine.close()

    def _pull(self, policy: RetryPolicy) -> None:
        result = self._engine.pull(policy)
        self.pulls += 1
        if result.applied or result.rejected:
            self._emit(
                {
                    "event": "pulled",
                    "applied": result.applied,
                    "memories": result.memories,
                    "critical": result.critical,
                    "conflicts": result.conflicts,
                    "rejected": result.rejected,
                }
            )

    def _push(self, policy: RetryPolicy) -> None:
        result = self._engine.push(policy)
        self.pushes += int(result.pushed)
        self._emit(
            {
                "event": "pushed" if result.pushed else "up-to-date",
                "version": result.version,
                "changes": result.changes,
                "memories": result.memories,
                "requests": result.requests,
            }
        )


@contextmanager
def _single_instance(root: Path, agent_id: str) -> Iterator[None]:
    path = root / f".daemon-{agent_id}.lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot open {path} ({exc.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise DaemonRunning(
                f"a daemon already syncs agent {agent_id!r} from this home (pid {other})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
