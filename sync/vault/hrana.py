"""A thin, synchronous client for Turso / libSQL's "Hrana over HTTP" protocol (v2/v3 pipeline).

Every public call is exactly one HTTP request: ``POST {base}/v2/pipeline`` with a fresh stream
(``"baton": null``) and a trailing ``close`` request, so no stream state survives between calls and
any call can be retried as a whole. ``batch`` wraps its statements in ``BEGIN IMMEDIATE`` /
``COMMIT`` with step conditions, which makes it atomic on the server.

Nothing here retries. Whether a failure is worth retrying is decided in one place: the
``retryable`` attribute of each :class:`HranaError`, read through :func:`is_retryable` (suitable
as ``backoff``'s ``giveup=lambda e: not is_retryable(e)``).

The auth token never appears in an exception message, a repr or a log line: errors are built
from redacted strings, and they are raised outside the ``except`` block, so they carry neither a
``__cause__`` nor a ``__context__`` pointing at an httpx object (whose request holds the header).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Literal, TypeAlias

import httpx
import msgspec

from tiermem.core.errors import (
    AuthFailed,
    HranaError,
    InvalidInput,
    ProtocolError,
    RequestRejected,
    ServerUnavailable,
    SqlError,
    StreamExpired,
    TransportFailure,
)
from tiermem.sync.vault.transport import parse_retry_after, require_secure, tls_context

__all__ = [
    "DEFAULT_TIMEOUT",
    "Args",
    "AuthFailed",
    "HranaClient",
    "HranaError",
    "ProtocolError",
    "RequestRejected",
    "ResultSet",
    "ServerUnavailable",
    "SqlError",
    "StreamExpired",
    "TransportFailure",
    "Value",
    "is_retryable",
]

Value: TypeAlias = int | float | str | bytes | None
"""A SQLite value as this client returns it (bool, bytearray and memoryview are accepted too)."""

Args: TypeAlias = Sequence[object] | Mapping[str, object]
"""Positional (a sequence) or named (a mapping; the ``:``/``@``/``$`` prefix is optional)."""

_Json: TypeAlias = dict[str, object]

DEFAULT_TIMEOUT: Final = httpx.Timeout(connect=5.0, read=15.0, write=15.0, pool=5.0)

_I64_MIN: Final = -(2**63)
_I64_MAX: Final = 2**63 - 1
_EXCERPT: Final = 300
_REDACTED: Final = "[REDACTED]"
_INTEGER: Final = re.compile(r"-?[0-9]{1,19}")
_TRANSPORT_KINDS: Final[tuple[tuple[type[httpx.RequestError], str], ...]] = (
    (httpx.ConnectTimeout, "connect timeout"),
    (httpx.ReadTimeout, "read timeout"),
    (httpx.WriteTimeout, "write timeout"),
    (httpx.PoolTimeout, "pool timeout"),
    (httpx.TimeoutException, "timeout"),
    (httpx.ConnectError, "connect"),
    (httpx.ReadError, "read error"),
    (httpx.WriteError, "write error"),
    (httpx.RemoteProtocolError, "dropped"),
)


# --------------------------------------------------------------------------------------------
# Errors


def is_retryable(exc: BaseException) -> bool:
    """The single retry decision: True for transport failures, 5xx/429, busy and stream errors."""
    return isinstance(exc, HranaError) and exc.retryable


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class ResultSet:
    """The result of one statement. ``rows`` hold decoded values, integers exact."""

    columns: tuple[str | None, ...]
    decltypes: tuple[str | None, ...]
    rows: tuple[tuple[Value, ...], ...]
    affected_row_count: int
    last_insert_rowid: int | None


# --------------------------------------------------------------------------------------------
# The client


class HranaClient:
    """One database, one ``httpx.Client``. Calls are independent; the client is reusable.

    ``timeout`` is a number (all phases) or an ``httpx.Timeout`` with per-phase values.
    ``transport`` is handed to ``httpx.Client`` (tests pass ``httpx.MockTransport``).
    ``requests_sent`` counts HTTP requests attempted, so callers can check "1 request per push".
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
        protocol: Literal[2, 3] = 2,
        insecure_http: bool = False,
    ) -> None:
        self.base_url = require_secure(url, insecure_http)
        self._token = token or ""
        if self._token and not (self._token.isascii() and self._token.isprintable()):
            raise InvalidInput("the auth token contains characters not allowed in an HTTP header")
        if any(ch.isspace() for ch in self._token):
            raise InvalidInput("the auth token contains whitespace")
        self._pipeline_url = f"{self.base_url}/v{protocol}/pipeline"
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        # Records are ciphertext (gzip saves little of their base64) and sqld streams gzip in
        # tiny chunks that cost httpx 5-10x the CPU of the plain body: ask for it plain.
        headers["Accept-Encoding"] = "identity"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        self._http = httpx.Client(
            headers=headers,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            transport=transport,
            follow_redirects=False,
            trust_env=False,
            # a plain-HTTP URL (loopback, or insecure_http) never opens TLS, and redirects are
            # not followed: loading the CA store would only cost each process ~15 ms
            verify=urllib.parse.urlsplit(self.base_url).scheme != "http" and tls_context(),
        )
        self.requests_sent = 0

    def __repr__(self) -> str:
        return f"HranaClient({self.base_url!r})"

    def __enter__(self) -> HranaClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- public calls -------------------------------------------------------------------------

    def execute(self, sql: str, args: Args = ()) -> ResultSet:
        """Run one statement in autocommit mode (one HTTP request)."""
        request: _Json = {"type": "execute", "stmt": _stmt(sql, args)}
        (result,) = self._pipeline([request])
        response = self._unwrap(result, "results[0]", "execute")
        return _parse_stmt_result(response.get("result"), "results[0].response.result")

    def batch(self, statements: Sequence[tuple[str, Args]]) -> list[ResultSet]:
        """Run statements atomically (one HTTP request): all commit, or none does.

        Steps: ``BEGIN IMMEDIATE``; statement *i* if step *i-1* was ok; ``COMMIT`` if the last
        statement was ok; ``ROLLBACK`` if the COMMIT was not ok (it was skipped or failed).
        The first step error is raised as :class:`SqlError`. An empty batch sends nothing.
        """
        if not statements:
            return []
        n = len(statements)
        steps: list[_Json] = [{"stmt": {"sql": "BEGIN IMMEDIATE", "want_rows": False}}]
        for i, (sql, args) in enumerate(statements, start=1):
            steps.append({"condition": {"type": "ok", "step": i - 1}, "stmt": _stmt(sql, args)})
        commit = n + 1
        steps.append({"condition": {"type": "ok", "step": n}, "stmt": {"sql": "COMMIT"}})
        steps.append(
            {
                "condition": {"type": "not", "cond": {"type": "ok", "step": commit}},
                "stmt": {"sql": "ROLLBACK", "want_rows": False},
            }
        )
        (result,) = self._pipeline([{"type": "batch", "batch": {"steps": steps}}])
        where = "results[0].response.result"
        response = self._unwrap(result, "results[0]", "batch")
        body = _obj(response.get("result"), where)
        step_results = _list(body.get("step_results"), f"{where}.step_results")
        step_errors = _list(body.get("step_errors"), f"{where}.step_errors")
        if len(step_results) != len(steps) or len(step_errors) != len(steps):
            raise ProtocolError(
                f"malformed pipeline response: {where} has {len(step_results)} results and "
                f"{len(step_errors)} errors for {len(steps)} steps"
            )
        for i, err in enumerate(step_errors):
            if err is not None:
                statement = i - 1 if 1 <= i <= n else None
                raise self._sql_error(err, f"{where}.step_errors[{i}]", statement, n)
        if step_results[commit] is None:
            raise ProtocolError("malformed pipeline response: COMMIT was skipped without an error")
        return [
            _parse_stmt_result(step_results[i], f"{where}.step_results[{i}]")
            for i in range(1, n + 1)
        ]

    # -- internals ------------------------------------------------------------------------------

    def _pipeline(self, requests: list[_Json]) -> list[object]:
        """Send ``requests`` + ``close`` on a new stream; return the results for ``requests``."""
        body = {"baton": None, "requests": [*requests, {"type": "close"}]}
        try:
            payload = msgspec.json.encode(body)  # floats were checked finite by _encode_value
        except ValueError:  # e.g. a lone surrogate in a str cannot be encoded as UTF-8
            raise InvalidInput("a statement argument cannot be encoded as UTF-8 JSON") from None
        self.requests_sent += 1
        failure: HranaError | None = None
        response: httpx.Response | None = None
        try:
            response = self._http.post(self._pipeline_url, content=payload)
        except httpx.RequestError as exc:
            failure = self._transport_failure(exc)
        except httpx.InvalidURL:  # httpx parses a redirect's Location even when not following it
            failure = ProtocolError("the server answered with a redirect to an invalid address")
        # Raised here, outside `except`, so no httpx object (holding the token) is chained.
        if failure is not None:
            raise failure
        assert response is not None
        # httpx 0.28 keeps every response in a reference cycle with its (read, closed) stream,
        # so its body — a restore page is megabytes — would live until a full garbage
        # collection; without the cycle it goes with the response.
        response.stream = httpx.ByteStream(b"")
        if response.status_code != 200:
            raise self._status_error(response)
        doc = _loads(response.content)
        if doc is None:
            raise ProtocolError(
                "malformed pipeline response: the body is not JSON: "
                + self._excerpt(response.content)
            )
        results = _list(_obj(doc, "response").get("results"), "response.results")
        if len(results) != len(requests) + 1:
            raise ProtocolError(
                f"malformed pipeline response: {len(results)} results for "
                f"{len(requests) + 1} requests"
            )
        # The trailing close result is deliberately not checked: the statements already ran.
        return results[: len(requests)]

    def _redact(self, text: str) -> str:
        if self._token:
            text = text.replace(self._token, _REDACTED)
        return text

    def _excerpt(self, raw: bytes | str) -> str:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        # Redact before cutting, so a token straddling the cut cannot leak a prefix.
        text = " ".join(self._redact(text).split())
        if len(text) > _EXCERPT:
            text = text[:_EXCERPT] + "…"
        return text or "(empty)"

    def _transport_failure(self, exc: httpx.RequestError) -> TransportFailure:
        never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
        kind = next((k for cls, k in _TRANSPORT_KINDS if isinstance(exc, cls)), "network")
        detail = self._excerpt(str(exc)) if str(exc) else type(exc).__name__
        host = urllib.parse.urlsplit(self.base_url).netloc
        return TransportFailure(
            f"network error talking to {host} ({kind}): {detail}",
            kind=kind,
            maybe_applied=not never_sent,
        )

    def _status_error(self, response: httpx.Response) -> HranaError:
        status = response.status_code
        message, code = self._server_message(response)
        if status in (401, 403):
            what = "authentication failed" if status == 401 else "permission denied"
            return AuthFailed(f"{what} (HTTP {status}): {message}", status=status)
        if status == 429 or status >= 500:
            retry_after = parse_retry_after(response.headers.get("Retry-After"))
            wait = "" if retry_after is None else f"; retry after {retry_after:g} s"
            return ServerUnavailable(
                f"server unavailable (HTTP {status}): {message}{wait}",
                status=status,
                retry_after=retry_after,
            )
        if status == 400 and (code == "STREAM_EXPIRED" or "baton" in message.lower()):
            return StreamExpired(f"stream error (HTTP 400): {message}", status=status, code=code)
        if 300 <= status < 400:
            target = self._excerpt(response.headers.get("Location", "?"))
            message = f"redirected to {target}; use that URL"
        return RequestRejected(
            f"request rejected (HTTP {status}): {message}", status=status, code=code
        )

    def _server_message(self, response: httpx.Response) -> tuple[str, str | None]:
        """The most useful text of an error body: sqld's ``error``/``message``, else an excerpt."""
        doc = _loads(response.content)
        if isinstance(doc, dict):
            text = doc.get("error", doc.get("message"))
            if isinstance(text, str):
                return self._excerpt(text), self._code(doc.get("code"))
        return self._excerpt(response.content), None

    def _code(self, code: object) -> str | None:
        return self._redact(code)[:64] if isinstance(code, str) else None

    def _unwrap(self, result: object, where: str, expected: str) -> _Json:
        """The ``response`` of an ``ok`` stream result; a ``type: error`` result is a SqlError."""
        res = _obj(result, where)
        kind = res.get("type")
        if kind == "error":
            raise self._sql_error(res.get("error"), f"{where}.error", 0, 1)
        if kind != "ok":
            raise ProtocolError(f"malformed pipeline response: {where}.type is not ok/error")
        response = _obj(res.get("response"), f"{where}.response")
        if response.get("type") != expected:
            raise ProtocolError(
                f"malformed pipeline response: {where}.response.type is not {expected!r}"
            )
        return response

    def _sql_error(self, err: object, where: str, statement: int | None, total: int) -> SqlError:
        if not isinstance(err, dict):
            raise ProtocolError(f"malformed pipeline response: {where}: expected an error object")
        message = err.get("message")
        code = self._code(err.get("code"))
        text = self._excerpt(message) if isinstance(message, str) else "unknown error"
        if statement is None:
            at = " in the transaction's BEGIN/COMMIT"
        elif total == 1:
            at = ""
        else:
            at = f" in statement {statement + 1} of {total}"
        suffix = f" [{code}]" if code else ""
        return SqlError(f"SQL error{at}: {text}{suffix}", code=code, statement=statement)


# --------------------------------------------------------------------------------------------
# Encoding and decoding


def _stmt(sql: str, args: Args) -> _Json:
    if not isinstance(sql, str):
        raise InvalidInput("SQL must be a string")
    stmt: _Json = {"sql": sql}
    if isinstance(args, Mapping):
        stmt["named_args"] = [
            {"name": str(name), "value": _encode_value(value)} for name, value in args.items()
        ]
    elif isinstance(args, str | bytes):
        raise InvalidInput("statement arguments must be a sequence or a mapping, not a string")
    else:
        stmt["args"] = [_encode_value(value) for value in args]
    return stmt


def _encode_value(value: object) -> _Json:
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "integer", "value": "1" if value else "0"}
    if isinstance(value, int):
        if not _I64_MIN <= value <= _I64_MAX:
            raise InvalidInput("an integer argument is outside SQLite's signed 64-bit range")
        return {"type": "integer", "value": str(value)}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput("a float argument is NaN or infinite, which SQLite cannot store")
        return {"type": "float", "value": value}
    if isinstance(value, str):
        return {"type": "text", "value": value}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"type": "blob", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    raise InvalidInput(f"cannot send a {type(value).__name__} as a SQL value")


def _decode_value(raw: object, where: str) -> Value:
    obj = _obj(raw, where)
    kind = obj.get("type")
    if kind == "null":
        return None
    if kind == "integer":
        v = obj.get("value")
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        parsed = _parse_i64(v)
        if parsed is not None:
            return parsed
    elif kind == "float":
        v = obj.get("value")
        if isinstance(v, int | float) and not isinstance(v, bool):
            return float(v)
    elif kind == "text":
        v = obj.get("value")
        if isinstance(v, str):
            return v
    elif kind == "blob":
        v = obj.get("base64")
        if isinstance(v, str):
            try:
                # sqld sends unpadded base64; restore the padding before decoding.
                return base64.b64decode(v + "=" * (-len(v) % 4), validate=True)
            except (binascii.Error, ValueError):
                pass
    raise ProtocolError(f"malformed pipeline response: {where} is not a valid SQL value")


def _parse_stmt_result(raw: object, where: str) -> ResultSet:
    res = _obj(raw, where)
    cols = [_obj(c, f"{where}.cols[{i}]") for i, c in enumerate(_list(res.get("cols"), where))]
    columns = tuple(_opt_str(c.get("name"), f"{where}.cols[{i}].name") for i, c in enumerate(cols))
    decltypes = tuple(
        _opt_str(c.get("decltype"), f"{where}.cols[{i}].decltype") for i, c in enumerate(cols)
    )
    rows: list[tuple[Value, ...]] = []
    for r, raw_row in enumerate(_list(res.get("rows"), f"{where}.rows")):
        row = _list(raw_row, f"{where}.rows[{r}]")
        if len(row) != len(columns):
            raise ProtocolError(
                f"malformed pipeline response: {where}.rows[{r}] has {len(row)} values for "
                f"{len(columns)} columns"
            )
        rows.append(tuple(_decode_value(v, f"{where}.rows[{r}][{c}]") for c, v in enumerate(row)))
    affected = res.get("affected_row_count", 0)
    if not isinstance(affected, int) or isinstance(affected, bool) or affected < 0:
        raise ProtocolError(f"malformed pipeline response: {where}.affected_row_count")
    rowid_raw = _opt_str(res.get("last_insert_rowid"), f"{where}.last_insert_rowid")
    rowid = None if rowid_raw is None else _parse_i64(rowid_raw)
    if rowid_raw is not None and rowid is None:
        raise ProtocolError(f"malformed pipeline response: {where}.last_insert_rowid")
    return ResultSet(columns, decltypes, tuple(rows), affected, rowid)


def _parse_i64(value: object) -> int | None:
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        number = int(value)
        if _I64_MIN <= number <= _I64_MAX:
            return number
    return None


def _loads(raw: bytes) -> object:
    """Parsed JSON, or None when the bytes are not JSON (or absurdly nested)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _obj(value: object, where: str) -> _Json:
    if not isinstance(value, dict):
        raise ProtocolError(f"malformed pipeline response: {where}: expected an object")
    return value


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise ProtocolError(f"malformed pipeline response: {where}: expected a list")
    return value


def _opt_str(value: object, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ProtocolError(f"malformed pipeline response: {where}: expected a string or null")
