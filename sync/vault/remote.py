"""The only way sync sends a request: `Remote`, a vault's Hrana client plus the retry schedule.

Every sync module (push, pull, setup, keys, devices, pairing, check, restore, prune) sends
through `Remote.send` / `execute` / `batch`: transient failures are retried on
`RetryPolicy`'s schedule, the rest raised as they are. A `Remote` given a `Memory` as its
journal records each failure for `sync status` and `sync history`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import httpx

from tiermem.core.engine import Memory
from tiermem.sync import journal
from tiermem.sync.vault.hrana import DEFAULT_TIMEOUT, Args, HranaClient, HranaError, ResultSet
from tiermem.sync.vault.retry import RetryPolicy, call_with_retry

__all__ = ["AUTH_FAILED_EXIT", "Remote", "Sent", "allow_insecure_http", "insecure_http_allowed"]

AUTH_FAILED_EXIT = 21
"""A rejected token: the client is rebuilt (with the token then in place) on the next call."""


class Sent(NamedTuple):
    results: list[ResultSet]
    requests: int
    attempts: int


class Remote:
    """A vault's server: `url`, a token (a value, or a function read each time the client is
    built), retries on the policy's schedule. Not thread-safe."""

    def __init__(
        self,
        url: str,
        token: str | Callable[[], str | None] | None,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        journal_of: Memory | None = None,
        insecure_http: bool = False,
    ) -> None:
        self.url = url
        self._insecure_http = insecure_http
        self._token = token
        self._timeout = timeout
        self._transport = transport
        self._journal = journal_of
        self._client: HranaClient | None = None

    @property
    def client(self) -> HranaClient:
        if self._client is None:
            token = self._token() if callable(self._token) else self._token
            self._client = HranaClient(
                self.url,
                token,
                timeout=self._timeout,
                transport=self._transport,
                insecure_http=self._insecure_http,
            )
        return self._client

    def close(self) -> None:
        """Drop the client (a later call builds a new one)."""
        if self._client is not None:
            self._client.close()
        self._client = None

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(
        self, call: Callable[[HranaClient], list[ResultSet]], policy: RetryPolicy | None = None
    ) -> Sent:
        """Run `call` with retries; returns (results, requests, attempts). Failures are
        recorded in the journal (if any) and raised as they are."""
        client = self.client
        before = client.requests_sent
        attempts = 0

        def attempt() -> list[ResultSet]:
            nonlocal attempts
            attempts += 1
            return call(client)

        try:
            results = call_with_retry(attempt, policy or RetryPolicy(), self._on_retry)
        except HranaError as exc:
            if self._journal is not None:
                journal.record_error(self._journal, str(exc), None)
                journal.log_event(self._journal, "error", None, 0, 0, str(exc))
            if exc.exit_code == AUTH_FAILED_EXIT:
                self.close()  # a new token may be in place by the next attempt
            raise
        return Sent(results, client.requests_sent - before, attempts)

    def execute(self, sql: str, args: Args = (), policy: RetryPolicy | None = None) -> ResultSet:
        """One statement, with retries."""
        return self.send(lambda c: [c.execute(sql, args)], policy).results[0]

    def batch(
        self, statements: Sequence[tuple[str, Args]], policy: RetryPolicy | None = None
    ) -> list[ResultSet]:
        """One atomic batch, with retries."""
        return self.send(lambda c: c.batch(statements), policy).results

    def _on_retry(self, n: int, wait: float, exc: HranaError) -> None:
        if self._journal is not None:
            journal.record_error(self._journal, str(exc), self._journal.now() + wait)


def insecure_http_allowed(mem: Memory) -> bool:
    """The agent's sync was set up with ``--insecure-http`` (plain http:// to another host)."""
    return bool(
        mem.db.scalar(
            "SELECT COALESCE(max(insecure_http), 0) FROM sync_transport WHERE agent_id = ?",
            (mem.agent_id,),
        )
    )


def allow_insecure_http(mem: Memory, allowed: bool) -> None:
    """Remember ``--insecure-http`` for this agent's later commands (and the daemon)."""
    with mem.db.transaction():
        mem.db.execute(
            "INSERT INTO sync_transport (agent_id, insecure_http) VALUES (?, ?) "
            "ON CONFLICT (agent_id) DO UPDATE SET insecure_http = excluded.insecure_http",
            (mem.agent_id, int(allowed)),
        )
