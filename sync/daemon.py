"""`tiermem daemon`: sync in the background, both ways.

The loop sleeps until the home's database, its WAL or the wake file (`kick.wake_path`, touched
by every conversation-end) changes, seen through a `watchdog` observer, and then pushes what
changed with the backoff schedule, retrying transient failures for as long as it runs. Only when
the observer cannot start (no inotify watches left, say) does it poll every `poll` seconds
instead. It also pulls what other devices pushed: once at start (right after pushing what was
already waiting) and then every `pull_interval` seconds (30 s by default), so a fact learned on
the phone is recalled on the desktop within one interval. Every `prune_check` seconds (an hour)
it asks the server when the vault was last pruned, by any device, and once that is
`[sync] prune_every_hours` old it prunes it (`restore.prune`: `keep_versions` and `keep_days`,
the manifests compacted into a checkpoint). A failure that needs a person (bad
token, SQL error) is reported and tried again after the longest backoff wait, so fixing the
token is enough. A device removed from the vault (`epochs.DeviceRevoked`) can never sync again:
the daemon reports it and stops with that error instead of retrying. Each push's outcome is
recorded for `sync status` (`kick.record_attempt`).

Stopping (SIGTERM/SIGINT call `stop()`) interrupts a wait at once; a request on the wire
is allowed to finish (its timeouts bound it) so its outcome is recorded. Nothing queued can be
lost either way: an outbox row is only removed in the transaction that records a confirmed push.
One daemon per home and agent: a second one is refused (an OS file lock, released on any exit).
"""

from __future__ import annotations

import contextlib
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
from tiermem.sync.devices import epochs
from tiermem.sync.engine import DEFAULT_BATCH_BYTES, SyncEngine
from tiermem.sync.push.kick import daemon_lock_path, record_attempt, wake_path
from tiermem.sync.restore.prune import prune, prune_due
from tiermem.sync.spaces import vaults
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT
from tiermem.sync.vault.retry import MAX_CAP, RetryPolicy
from tiermem.sync.watcher import Watcher

__all__ = [
    "DEFAULT_POLL",
    "DEFAULT_PRUNE_CHECK",
    "DEFAULT_PULL_INTERVAL",
    "Daemon",
    "DaemonRunning",
]

DEFAULT_POLL: Final = 0.25
DEFAULT_PULL_INTERVAL: Final = 30.0
DEFAULT_PRUNE_CHECK: Final = 3600.0

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
        watch: bool = True,
        prune_check: float = DEFAULT_PRUNE_CHECK,
    ) -> None:
        if poll <= 0:
            raise ValueError("poll must be positive")
        if pull_interval <= 0:
            raise ValueError("pull_interval must be positive")
        self.mem = mem
        self.poll = poll
        self.pull_interval = pull_interval
        self.prune_check = prune_check
        self.error_pause = error_pause
        self._report = report or (lambda event: None)
        self.watch = watch
        self._stop = threading.Event()
        self._wake = threading.Event()  # set on a change, and by stop()
        self._engine = SyncEngine(
            mem, timeout=timeout, transport=transport, batch_bytes=batch_bytes
        )
        self.pushes = 0
        self.pulls = 0
        self.prunes = 0

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
        self._wake.set()

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
        root, agent_id = self.mem.home.root, self.mem.agent_id
        try:
            engine.require_ready()
            watcher = Watcher(root, self._watched(), self._wake.set)
            # watch=False polls every `poll` seconds, as when the observer cannot start
            watching = watcher if self.watch else contextlib.nullcontext(watcher)
            with _single_instance(root, agent_id), watching:
                mode = "watchdog" if watcher.running else "polling"
                self._emit({"event": "started", "agent_id": agent_id, "watch": mode})
                self._loop(watcher.running)
                self._emit({"event": "stopped", "pushes": self.pushes, "pulls": self.pulls})
        finally:
            engine.close()

    def _watched(self) -> list[str]:
        db = self.mem.home.db_path
        return [db.name, f"{db.name}-wal", wake_path(db.parent, self.mem.agent_id).name]

    def _idle(self, until: float, watching: bool) -> None:
        """Sleep until a change (or, without a watcher, one poll) or `until`, whichever first."""
        timeout = max(until - time.monotonic(), 0)
        self._wake.wait(timeout if watching else min(self.poll, timeout))
        self._wake.clear()  # cleared before has_work() looks again, so no change is missed

    def _loop(self, watching: bool) -> None:
        engine = self._engine
        policy = RetryPolicy(max_attempts=None, sleep=self._backoff_wait)
        next_pull = next_prune = time.monotonic()  # pull at once on start (then see to prune) …
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
                if time.monotonic() >= next_prune:
                    next_prune = time.monotonic() + self.prune_check
                    self._prune(policy)
                    continue
                if not engine.has_work():
                    self._idle(min(next_pull, next_prune), watching)
                    continue
                self._push(policy)
            except _Stopped:
                break
            except epochs.DeviceRevoked:
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
                self._emit({"event": "error", "error": str(exc), "retry_in": self.error_pause})
                try:
                    self._wait(self.error_pause)
                except _Stopped:
                    break

    def _pull(self, policy: RetryPolicy) -> None:
        result = self._engine.pull(policy)
        self._spaces(policy)
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

    def _prune(self, policy: RetryPolicy) -> None:
        """Prune the vault when its last prune is `[sync] prune_every_hours` old."""
        cfg = self.mem.cfg.sync
        if not prune_due(self._engine, cfg.prune_every_hours, policy):
            return
        result = prune(self._engine, cfg.keep_versions, keep_days=cfg.keep_days, policy=policy)
        self.prunes += int(not result.raced)
        self._emit(
            {
                "event": "pruned",
                "deleted": result.deleted,
                "compacted": result.compacted,
                "checkpoint": result.checkpoint,
                "raced": result.raced,
                "previous": result.previous,
                "downloaded_because": result.downloaded_because,
                "damaged": list(result.damaged),
            }
        )
        if result.damaged:  # rows the server holds that no signed listing vouches for
            self._record(False, f"prune found {len(result.damaged)} damaged row(s): run sync check")

    def _push(self, policy: RetryPolicy) -> None:
        try:
            result = self._engine.push(policy)
            self._spaces(policy, pull=False)
        except TiermemError as exc:
            self._record(False, f"failed: {exc}")
            raise
        self.pushes += int(result.pushed)
        if result.pushed:
            self._record(
                True,
                f"pushed {result.version} ({result.changes} critical change(s), "
                f"{result.memories} memory record(s))",
            )
        self._emit(
            {
                "event": "pushed" if result.pushed else "up-to-date",
                "version": result.version,
                "changes": result.changes,
                "memories": result.memories,
                "requests": result.requests,
            }
        )

    def _spaces(self, policy: RetryPolicy, *, pull: bool = True, push: bool = True) -> None:
        """The shared spaces the agent includes move with its own vault (`sync.spaces`): both
        ways at every pull, pushed with every push. A space that fails (its member removed,
        say) is reported and leaves the agent's own sync and the other spaces going."""

        def failed(space: str, exc: TiermemError) -> None:
            self._emit({"event": "space-error", "space": space, "error": str(exc)})

        found = vaults.sync_included(self.mem, policy, pull=pull, push=push, on_error=failed)
        for done in found:
            got = 0 if done.pulled is None else done.pulled.memories
            sent = 0 if done.pushed is None else done.pushed.memories
            if got or sent:
                self._emit({"event": "space", "space": done.space, "pulled": got, "pushed": sent})

    def _record(self, ok: bool, message: str) -> None:
        record_attempt(self.mem.home.root, self.mem.agent_id, ok, message, "daemon", self.mem.now())


@contextmanager
def _single_instance(root: Path, agent_id: str) -> Iterator[None]:
    path = daemon_lock_path(root, agent_id)
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
