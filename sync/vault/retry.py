"""The retry policy of every remote call: exponential backoff with full jitter.

Retried: transport failures, HTTP 5xx and 429, busy/expired streams (`hrana.is_retryable`).
Never retried: 400/401/403 and SQL errors, which need a person (a new token, a fixed URL).
Waits are drawn uniformly from ``[0, cap]`` (full jitter) with caps 5, 10, 20, 40 s and then
40 s for ever, from ``backoff.expo``; a ``Retry-After`` from the server is a floor for the wait
(itself capped, so a hostile server cannot stall a client for hours).

A time budget (``max_time``, the detached pusher's ``sync.push_budget_seconds``) follows
``backoff.on_exception``'s ``max_time``: no new attempt once the budget has passed, and no wait
past its end.

This is the one retry loop of sync. It is written out here rather than taken from
``backoff.on_exception`` because that decorator sleeps with ``time.sleep`` and measures with
``datetime.now``, neither of which can be passed in, and tests and the daemon need their own
sleep: a fake clock in tests, a sleep that SIGTERM interrupts in the daemon. The schedule and the
jitter are backoff's own (`backoff.expo`, `backoff.full_jitter`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, TypeVar

from tiermem.sync.vault.hrana import HranaError, ServerUnavailable, is_retryable

__all__ = ["CAPS", "RetryPolicy", "call_with_retry", "wait_caps"]

T = TypeVar("T")

FIRST_CAP: Final = 5.0
MAX_CAP: Final = 40.0
CAPS: Final = (5.0, 10.0, 20.0, 40.0)
RETRY_AFTER_CAP: Final = 300.0


def wait_caps(first: float = FIRST_CAP, maximum: float = MAX_CAP) -> Iterator[float]:
    """5, 10, 20, 40, 40, ... (backoff.expo with factor `first`, capped at `maximum`)."""
    import backoff  # loaded at the first retry schedule: a command that never calls the server skips it

    gen = backoff.expo(base=2, factor=first, max_value=maximum)
    next(gen)  # backoff's generators are primed with one send(None)
    return gen


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try. ``max_attempts=None`` tries for ever (the daemon).

    ``max_time`` is a budget in seconds from the first attempt (``None``: no budget).
    ``sleep``, ``clock`` and ``jitter`` are injectable: tests pass a fake clock's sleep and see
    every wait without sleeping; the daemon passes a sleep that returns early (raising) on SIGTERM.
    """

    max_attempts: int | None = 5
    max_time: float | None = None
    first_cap: float = FIRST_CAP
    max_cap: float = MAX_CAP
    retry_after_cap: float = RETRY_AFTER_CAP
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    jitter: Callable[[float], float] = lambda cap: _full_jitter(cap)

    def wait_for(self, cap: float, exc: HranaError) -> float:
        """The wait before the next attempt: jittered cap, at least the server's Retry-After."""
        wait = min(max(self.jitter(cap), 0.0), cap)
        if isinstance(exc, ServerUnavailable) and exc.retry_after is not None:
            wait = max(wait, min(exc.retry_after, self.retry_after_cap))
        return wait


def _full_jitter(cap: float) -> float:
    """A wait drawn between 0 and `cap` (backoff's full jitter)."""
    import backoff  # loaded at the first wait: a call that succeeds at once skips it

    return float(backoff.full_jitter(cap))


def call_with_retry(
    call: Callable[[], T],
    policy: RetryPolicy,
    on_retry: Callable[[int, float, HranaError], None] | None = None,
) -> T:
    """``call()`` until it succeeds, fails for good, or runs out of attempts.

    ``on_retry(attempt, wait, error)`` runs before each wait (attempt counts from 1). The last
    error is raised as it is (a `HranaError`); anything else `call` raises is not retried.
    """
    if policy.max_attempts is not None and policy.max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    caps: Iterator[float] | None = None  # made at the first retry: most calls need none
    start = policy.clock() if policy.max_time is not None else 0.0
    attempt = 0
    while True:
        attempt += 1
        elapsed = policy.clock() - start if policy.max_time is not None else 0.0
        try:
            return call()
        except HranaError as exc:
            if not is_retryable(exc):
                raise
            if policy.max_attempts is not None and attempt >= policy.max_attempts:
                raise
            if policy.max_time is not None and elapsed >= policy.max_time:
                raise
            if caps is None:
                caps = wait_caps(policy.first_cap, policy.max_cap)
            wait = policy.wait_for(next(caps), exc)
            if policy.max_time is not None:
                wait = min(wait, policy.max_time - elapsed)
            if on_retry is not None:
                on_retry(attempt, wait, exc)
            policy.sleep(wait)
