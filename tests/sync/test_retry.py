"""The retry policy with a fake clock: which failures are retried, and how long each wait is."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sync.helpers import FakeSleep
from tiermem.sync.vault.hrana import (
    AuthFailed,
    HranaError,
    ProtocolError,
    RequestRejected,
    ServerUnavailable,
    SqlError,
    StreamExpired,
    TransportFailure,
)
from tiermem.sync.vault.retry import CAPS, RetryPolicy, call_with_retry, wait_caps


def failing(errors: list[Exception], result: str = "ok") -> Callable[[], str]:
    """A call that raises each error in turn, then returns `result`."""
    pending = list(errors)

    def call() -> str:
        if pending:
            raise pending.pop(0)
        return result

    return call


def transport() -> TransportFailure:
    return TransportFailure("network error (read timeout)", kind="read timeout", maybe_applied=True)


def unavailable(status: int = 503, retry_after: float | None = None) -> ServerUnavailable:
    return ServerUnavailable(f"HTTP {status}", status=status, retry_after=retry_after)


def full_caps(cap: float) -> float:
    return cap


def test_the_schedule_is_backoff_expo_capped_at_40() -> None:
    assert list(itertools.islice(wait_caps(), 7)) == [5.0, 10.0, 20.0, 40.0, 40.0, 40.0, 40.0]
    assert CAPS == (5.0, 10.0, 20.0, 40.0)


@pytest.mark.parametrize(
    "error",
    [
        transport(),
        unavailable(500),
        unavailable(502),
        unavailable(503),
        unavailable(429),
        StreamExpired("stream expired", status=400, code="STREAM_EXPIRED"),
        SqlError("busy", code="SQLITE_BUSY"),
    ],
)
def test_transient_failures_are_retried_with_capped_waits(error: HranaError) -> None:
    sleep = FakeSleep()
    policy = RetryPolicy(max_attempts=None, sleep=sleep, jitter=full_caps)
    assert call_with_retry(failing([error] * 6), policy) == "ok"
    assert sleep.waits == [5.0, 10.0, 20.0, 40.0, 40.0, 40.0]
    assert sleep.now == 155.0  # the fake clock moved; nothing really slept


@pytest.mark.parametrize(
    "error",
    [
        AuthFailed("HTTP 401", status=401),
        AuthFailed("HTTP 403", status=403),
        RequestRejected("HTTP 400", status=400),
        RequestRejected("HTTP 404", status=404),
        SqlError("no such table", code="SQLITE_UNKNOWN"),
        SqlError("constraint", code="SQLITE_CONSTRAINT"),
        SqlError("quota", code="BLOCKED"),
        ProtocolError("malformed pipeline response"),
    ],
)
def test_client_and_sql_errors_are_never_retried(error: HranaError) -> None:
    sleep = FakeSleep()
    calls = 0

    def call() -> str:
        nonlocal calls
        calls += 1
        raise error

    with pytest.raises(type(error)):
        call_with_retry(call, RetryPolicy(max_attempts=None, sleep=sleep))
    assert calls == 1 and sleep.waits == []


def test_other_exceptions_pass_through_at_once() -> None:
    sleep = FakeSleep()
    with pytest.raises(KeyError):
        call_with_retry(failing([KeyError("x")]), RetryPolicy(sleep=sleep))
    assert sleep.waits == []


def test_max_attempts_gives_up_with_the_last_error() -> None:
    sleep = FakeSleep()
    errors: list[Exception] = [unavailable(500), unavailable(502), unavailable(503)]
    with pytest.raises(ServerUnavailable) as info:
        call_with_retry(failing(errors), RetryPolicy(max_attempts=3, sleep=sleep))
    assert info.value.status == 503 and len(sleep.waits) == 2
    with pytest.raises(ValueError):
        call_with_retry(failing([]), RetryPolicy(max_attempts=0))


def test_retry_after_is_honoured_as_a_floor_and_capped() -> None:
    sleep = FakeSleep()
    policy = RetryPolicy(max_attempts=None, sleep=sleep, jitter=lambda cap: 0.0)
    errors: list[Exception] = [
        unavailable(429, 12.0),
        unavailable(429, 1.0),
        unavailable(429, 86400.0),
    ]
    call_with_retry(failing(errors), policy)
    assert sleep.waits == [12.0, 1.0, 300.0]


def test_on_retry_sees_every_attempt_and_wait() -> None:
    seen: list[tuple[int, float, str]] = []
    sleep = FakeSleep()
    call_with_retry(
        failing([transport(), unavailable(503)]),
        RetryPolicy(sleep=sleep, jitter=full_caps),
        lambda n, wait, exc: seen.append((n, wait, type(exc).__name__)),
    )
    assert seen == [(1, 5.0, "TransportFailure"), (2, 10.0, "ServerUnavailable")]
    assert sleep.waits == [5.0, 10.0]


@settings(max_examples=50, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), failures=st.integers(1, 12))
def test_full_jitter_stays_within_each_cap(seed: int, failures: int) -> None:
    rng = random.Random(seed)
    sleep = FakeSleep()
    policy = RetryPolicy(max_attempts=None, sleep=sleep, jitter=lambda cap: rng.uniform(0, cap))
    call_with_retry(failing([transport()] * failures), policy)
    caps = list(itertools.islice(wait_caps(), failures))
    assert len(sleep.waits) == failures
    assert all(0.0 <= w <= c for w, c in zip(sleep.waits, caps, strict=True))


def test_the_default_jitter_is_backoffs_full_jitter() -> None:
    sleep = FakeSleep()
    call_with_retry(failing([transport()] * 40), RetryPolicy(max_attempts=None, sleep=sleep))
    caps = list(itertools.islice(wait_caps(), 40))
    assert all(0.0 <= w <= c for w, c in zip(sleep.waits, caps, strict=True))
    assert len(set(sleep.waits)) > 1  # jittered, not the bare caps
    assert sleep.waits != caps


def test_a_time_budget_stops_retrying_and_no_wait_runs_past_it() -> None:
    sleep = FakeSleep()
    policy = RetryPolicy(
        max_attempts=None, max_time=30.0, sleep=sleep, clock=lambda: sleep.now, jitter=full_caps
    )
    with pytest.raises(TransportFailure):
        call_with_retry(failing([transport()] * 10), policy)
    assert sleep.waits == [5.0, 10.0, 15.0]  # the third wait ends at the budget; then it gives up
