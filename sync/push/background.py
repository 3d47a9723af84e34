"""The detached pusher that `tiermem.sync.push.kick.kick` starts (`python -m
tiermem.sync.push.background HOME AGENT LOCK_FD`): push what waits, retrying on the backoff schedule
with jitter within the `sync.push_budget_seconds` budget, then exit. When it gives up, the outbox is
left as it is for the next conversation-end, `sync push` or the daemon. Each outcome is recorded for
`sync status` and the home's log (secrets masked); it prints nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

from tiermem.core.engine import Memory
from tiermem.core.errors import StorageError, TiermemError
from tiermem.core.logs import setup_logging
from tiermem.sync.engine import PushResult, SyncEngine
from tiermem.sync.push.kick import pusher_lock_path, record_attempt, take_lock
from tiermem.sync.vault.hrana import HranaError
from tiermem.sync.vault.retry import RetryPolicy, call_with_retry

__all__ = ["main", "push_within_budget", "run"]

log = logging.getLogger(__name__)


def push_within_budget(engine: SyncEngine, budget: float) -> PushResult:
    """One push; transient failures are tried again on the retry schedule (full jitter, caps
    5, 10, 20, 40 s) until `budget` seconds have passed."""

    def waiting(attempt: int, wait: float, exc: HranaError) -> None:
        log.info(
            "background push for agent %s failed (%s); trying again in %.1f s",
            engine.agent_id,
            exc,
            wait,
        )

    return call_with_retry(
        lambda: engine.push(RetryPolicy(max_attempts=1)),
        RetryPolicy(max_attempts=None, max_time=budget),
        waiting,
    )


def _describe(result: PushResult) -> str:
    if not result.pushed:
        return "nothing to push"
    return (
        f"pushed {result.version} ({result.changes} critical change(s), "
        f"{result.memories} memory record(s))"
    )


def _push_once(engine: SyncEngine, root: Path) -> bool:
    """Push within the budget and record the outcome; False if it gave up."""
    mem = engine.mem
    try:
        message, ok = _describe(push_within_budget(engine, mem.cfg.sync.push_budget_seconds)), True
    except TiermemError as exc:
        message, ok = f"gave up: {exc}", False
        log.warning("background push for agent %s %s; the outbox keeps it", mem.agent_id, message)
    record_attempt(root, mem.agent_id, ok, message, "pusher", mem.now())
    return ok


def run(root: Path, agent_id: str, lock_fd: int) -> int:
    """Push while there is work, holding the pusher lock `lock_fd`; 0 if all went through."""
    fd: int | None = lock_fd
    ok = True
    with Memory(root, agent_id) as mem, SyncEngine(mem) as engine:
        try:
            while fd is not None:
                ok = _push_once(engine, root)
                os.close(fd)
                fd = None
                # A conversation-end that found the lock taken left its change to us.
                if ok and engine.has_work():
                    fd = take_lock(pusher_lock_path(root, agent_id))
        finally:
            if fd is not None:
                os.close(fd)
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    root, agent_id, fd = Path(argv[0]), argv[1], int(argv[2])
    with contextlib.suppress(StorageError):
        setup_logging(root)
    try:
        return run(root, agent_id, fd)
    except TiermemError as exc:
        log.warning("background push for agent %s could not start: %s", agent_id, exc)
        return 1
    except Exception:  # detached, stderr is /dev/null: the log is the only place to say it
        log.exception("background push for agent %s failed unexpectedly", agent_id)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
