"""The Hrana HTTP client: unit tests over httpx.MockTransport, then a real sqld (and a fault proxy)."""

from __future__ import annotations

import base64
import gc
import json
import logging
import math
import time
from collections.abc import Callable
from email.utils import formatdate
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.sqld import SqldServer, free_port
from tiermem.core.errors import InvalidInput, TiermemError
from tiermem.sync.vault.hrana import (
    AuthFailed,
    HranaClient,
    HranaError,
    ProtocolError,
    RequestRejected,
    ResultSet,
    ServerUnavailable,
    SqlError,
    StreamExpired,
    TransportFailure,
    is_retryable,
)
from tiermem.sync.vault.transport import parse_retry_after, to_base_url

SENTINEL = "SENTINEL-TOKEN-7f3a9c-do-not-leak"
BASE = "https://db.example.test"

Handler = Callable[[httpx.Request], httpx.Response]


def assert_no_token(exc: BaseException, token: str = SENTINEL) -> None:
    """The token is nowhere in the error: message, repr, args, attributes, chained errors."""
    assert token not in str(exc)
    assert token not in repr(exc)
    assert all(token not in repr(a) for a in exc.args)
    assert all(token not in repr(v) for v in vars(exc).values())
    assert exc.__cause__ is None
    assert exc.__context__ is None


def ok(response: dict[str, Any]) -> dict[str, Any]:
    return {"type": "ok", "response": response}


CLOSE = ok({"type": "close"})


def stmt_result(
    cols: list[str] | None = None, rows: list[list[Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "cols": [{"name": c, "decltype": None} for c in cols or []],
        "rows": rows or [],
        "affected_row_count": 0,
        "last_insert_rowid": None,
        **extra,
    }


def pipeline_body(*results: dict[str, Any]) -> dict[str, Any]:
    return {"baton": None, "base_url": None, "results": [*results, CLOSE]}


def mock_client(handler: Handler, token: str | None = SENTINEL, **kw: Any) -> HranaClient:
    return HranaClient(BASE, token, transport=httpx.MockTransport(handler), **kw)


@pytest.fixture
def captured() -> list[httpx.Request]:
    return []


def replying(captured: list[httpx.Request], response: httpx.Response | dict[str, Any]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        if isinstance(response, httpx.Response):
            return response
        return httpx.Response(200, json=response)

    return handler


# ---------------------------------------------------------------------------------------------
# URLs, request format, value encoding


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("libsql://db-org.turso.io", "https://db-org.turso.io"),
        ("libsql://db-org.turso.io/", "https://db-org.turso.io"),
        ("LIBSQL://Db.Example:8443", "https://db.example:8443"),
        ("libsql://127.0.0.1:8080?tls=0", "http://127.0.0.1:8080"),
        ("https://db.example/", "https://db.example"),
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("https://db.example/base/?authToken=" + SENTINEL, "https://db.example/base"),
        ("http://[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_url_mapping(url: str, base: str) -> None:
    assert to_base_url(url) == base


@pytest.mark.parametrize("url", ["ftp://db.example", "db.example", "libsql://", "http://h:99999"])
def test_bad_urls_are_invalid_input(url: str) -> None:
    with pytest.raises(InvalidInput):
        to_base_url(url)


def test_an_answer_is_freed_once_read_not_at_the_next_garbage_collection() -> None:
    """A restore reads pages of megabytes: no answer may wait for the cyclic collector."""
    big = [[{"type": "text", "value": "x" * 100_000}]]
    body = pipeline_body(ok({"type": "execute", "result": stmt_result(["x"], big)}))
    with mock_client(replying([], body)) as client:
        gc.collect()
        gc.disable()
        try:
            for _ in range(3):
                assert client.execute("SELECT x").rows[0][0] == "x" * 100_000
            alive = [o for o in gc.get_objects() if type(o) is httpx.Response]
        finally:
            gc.enable()
    assert alive == []


def test_execute_sends_one_typed_pipeline_request(captured: list[httpx.Request]) -> None:
    body = pipeline_body(ok({"type": "execute", "result": stmt_result()}))
    with mock_client(replying(captured, body)) as client:
        client.execute(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?)",
            [None, 2**62 + 1, -(2**63), 0.5, "héllo ✓", b"\x00\x01\xff", True],
        )
        assert client.requests_sent == 1
    (request,) = captured
    assert request.method == "POST"
    assert str(request.url) == f"{BASE}/v2/pipeline"
    assert request.headers["authorization"] == f"Bearer {SENTINEL}"
    assert request.headers["content-type"] == "application/json"
    sent = json.loads(request.content)
    assert sent["baton"] is None
    assert [r["type"] for r in sent["requests"]] == ["execute", "close"]
    assert sent["requests"][0]["stmt"]["args"] == [
        {"type": "null"},
        {"type": "integer", "value": "4611686018427387905"},
        {"type": "integer", "value": "-9223372036854775808"},
        {"type": "float", "value": 0.5},
        {"type": "text", "value": "héllo ✓"},
        {"type": "blob", "base64": base64.b64encode(b"\x00\x01\xff").decode()},
        {"type": "integer", "value": "1"},
    ]


def test_named_args_and_protocol_v3(captured: list[httpx.Request]) -> None:
    body = pipeline_body(ok({"type": "execute", "result": stmt_result()}))
    with mock_client(replying(captured, body), protocol=3) as client:
        client.execute("SELECT :a", {"a": 1})
    assert captured[0].url.path == "/v3/pipeline"
    stmt = json.loads(captured[0].content)["requests"][0]["stmt"]
    assert stmt["named_args"] == [{"name": "a", "value": {"type": "integer", "value": "1"}}]


def test_no_token_sends_no_authorization(captured: list[httpx.Request]) -> None:
    body = pipeline_body(ok({"type": "execute", "result": stmt_result()}))
    with mock_client(replying(captured, body), token=None) as client:
        client.execute("SELECT 1")
    assert "authorization" not in captured[0].headers


def test_batch_request_is_begin_conditioned_steps_commit_rollback_close(
    captured: list[httpx.Request],
) -> None:
    steps = [stmt_result()] * 4 + [None]
    body = pipeline_body(
        ok({"type": "batch", "result": {"step_results": steps, "step_errors": [None] * 5}})
    )
    with mock_client(replying(captured, body)) as client:
        results = client.batch(
            [("INSERT INTO t VALUES (?)", [1]), ("INSERT INTO t VALUES (2)", ())]
        )
        assert client.requests_sent == 1
    assert len(results) == 2
    sent = json.loads(captured[0].content)
    assert sent["baton"] is None
    assert [r["type"] for r in sent["requests"]] == ["batch", "close"]
    got = sent["requests"][0]["batch"]["steps"]
    assert [s["stmt"]["sql"] for s in got] == [
        "BEGIN IMMEDIATE",
        "INSERT INTO t VALUES (?)",
        "INSERT INTO t VALUES (2)",
        "COMMIT",
        "ROLLBACK",
    ]
    assert "condition" not in got[0]
    assert got[1]["condition"] == {"type": "ok", "step": 0}
    assert got[2]["condition"] == {"type": "ok", "step": 1}
    assert got[3]["condition"] == {"type": "ok", "step": 2}
    assert got[4]["condition"] == {"type": "not", "cond": {"type": "ok", "step": 3}}


def test_empty_batch_sends_nothing(captured: list[httpx.Request]) -> None:
    with mock_client(replying(captured, {})) as client:
        assert client.batch([]) == []
        assert client.requests_sent == 0
    assert captured == []


@pytest.mark.parametrize(
    "args",
    [[2**63], [-(2**63) - 1], [math.nan], [math.inf], [object()], "abc", [{"a": 1}], ["\ud800"]],
)
def test_unencodable_args_are_invalid_input_before_sending(
    captured: list[httpx.Request], args: Any
) -> None:
    with mock_client(replying(captured, {})) as client:
        with pytest.raises(InvalidInput):
            client.execute("SELECT ?", args)
        assert client.requests_sent == 0
    assert captured == []


@pytest.mark.parametrize("token", ["tok en", "tok\nen", "tökén"])
def test_bad_token_characters_are_rejected_without_echo(token: str) -> None:
    with pytest.raises(InvalidInput) as info:
        HranaClient(BASE, token)
    assert token not in str(info.value)


def test_decodes_every_value_type(captured: list[httpx.Request]) -> None:
    row = [
        {"type": "null"},
        {"type": "integer", "value": "9223372036854775807"},
        {"type": "integer", "value": "-9223372036854775808"},
        {"type": "float", "value": 0.1},
        {"type": "float", "value": 3},
        {"type": "text", "value": "𝄞"},
        {"type": "blob", "base64": "AQ"},  # sqld sends unpadded base64
        {"type": "blob", "base64": "AQI="},
        {"type": "blob", "base64": ""},
    ]
    cols = [f"c{i}" for i in range(len(row))]
    result = stmt_result(cols, [row], last_insert_rowid="42", replication_index="7")
    body = pipeline_body(ok({"type": "execute", "result": result}))
    with mock_client(replying(captured, body)) as client:
        rs = client.execute("SELECT ...")
    assert rs.rows == ((None, 2**63 - 1, -(2**63), 0.1, 3.0, "𝄞", b"\x01", b"\x01\x02", b""),)
    assert isinstance(rs.rows[0][4], float)
    assert rs.columns == tuple(cols)
    assert rs.last_insert_rowid == 42


# ---------------------------------------------------------------------------------------------
# Malformed responses: always a ProtocolError with a clear message, never a KeyError


def _exec(result: Any) -> dict[str, Any]:
    return pipeline_body(ok({"type": "execute", "result": result}))


def _value(value: Any) -> dict[str, Any]:
    return _exec(stmt_result(["x"], [[value]]))


MALFORMED: dict[str, bytes | dict[str, Any] | list[Any]] = {
    "not json": b"<html>502 Bad Gateway</html>",
    "empty body": b"",
    "not utf-8": b"\xff\xfe\x00garbage",
    "json list": [1, 2],
    "no results": {"baton": None},
    "results not a list": {"results": {"0": CLOSE}},
    "too few results": {"results": [CLOSE]},
    "too many results": {"results": [CLOSE, CLOSE, CLOSE]},
    "result not an object": {"results": ["ok", CLOSE]},
    "unknown result type": {"results": [{"type": "maybe"}, CLOSE]},
    "ok without response": {"results": [{"type": "ok"}, CLOSE]},
    "wrong response type": pipeline_body(ok({"type": "batch", "result": stmt_result()})),
    "error without error object": {"results": [{"type": "error"}, CLOSE]},
    "missing result": pipeline_body(ok({"type": "execute"})),
    "missing cols": _exec({"rows": [], "affected_row_count": 0}),
    "missing rows": _exec({"cols": [], "affected_row_count": 0}),
    "col not object": _exec({"cols": ["x"], "rows": []}),
    "col name not string": _exec({"cols": [{"name": 5}], "rows": []}),
    "row too short": _exec(stmt_result(["a", "b"], [[{"type": "null"}]])),
    "row not list": _exec({**stmt_result(["a"]), "rows": [{"type": "null"}]}),
    "value without type": _value({"value": "1"}),
    "unknown value type": _value({"type": "decimal", "value": "1.5"}),
    "integer not numeric": _value({"type": "integer", "value": "12a"}),
    "integer double minus": _value({"type": "integer", "value": "--5"}),
    "integer too big": _value({"type": "integer", "value": "9223372036854775808"}),
    "integer huge": _value({"type": "integer", "value": "9" * 5000}),
    "integer missing": _value({"type": "integer"}),
    "float as string": _value({"type": "float", "value": "0.5"}),
    "float as bool": _value({"type": "float", "value": True}),
    "text not string": _value({"type": "text", "value": 5}),
    "blob bad base64": _value({"type": "blob", "base64": "!!!"}),
    "blob missing": _value({"type": "blob"}),
    "affected not int": _exec({**stmt_result(), "affected_row_count": "3"}),
    "rowid not numeric": _exec({**stmt_result(), "last_insert_rowid": "x"}),
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_execute_response_is_protocol_error(
    captured: list[httpx.Request], name: str
) -> None:
    raw = MALFORMED[name]
    content = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
    response = httpx.Response(200, content=content)
    with mock_client(replying(captured, response)) as client, pytest.raises(ProtocolError) as info:
        client.execute("SELECT 1")
    err = info.value
    assert str(err).startswith("malformed pipeline response")
    assert not err.retryable
    assert_no_token(err)


def _batch_body(step_results: Any, step_errors: Any) -> dict[str, Any]:
    return pipeline_body(
        ok({"type": "batch", "result": {"step_results": step_results, "step_errors": step_errors}})
    )


@pytest.mark.parametrize(
    "body",
    [
        _batch_body([stmt_result()] * 3, [None] * 3),  # 4 steps expected
        _batch_body(None, [None] * 4),
        _batch_body([stmt_result()] * 4, None),
        _batch_body([stmt_result(), stmt_result(), None, stmt_result()], [None] * 4),  # no COMMIT
        _batch_body([stmt_result()] * 4, [None, "boom", None, None]),  # error not an object
        pipeline_body(ok({"type": "batch"})),
    ],
)
def test_malformed_batch_response_is_protocol_error(
    captured: list[httpx.Request], body: dict[str, Any]
) -> None:
    with mock_client(replying(captured, body)) as client, pytest.raises(ProtocolError):
        client.batch([("INSERT INTO t VALUES (1)", ())])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "value",
                    "results",
                    "response",
                    "result",
                    "cols",
                    "rows",
                    "error",
                    "message",
                    "code",
                    "base64",
                    "name",
                    "step_results",
                    "step_errors",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


FUZZ_WRAPPERS: list[Callable[[Any], Any]] = [
    lambda doc: doc,
    lambda doc: {"results": [doc, CLOSE]},
    lambda doc: pipeline_body(ok({"type": "execute", "result": doc})),
    lambda doc: pipeline_body(ok({"type": "batch", "result": doc})),
    lambda doc: pipeline_body(ok({"type": "execute", "result": stmt_result(["x"], [[doc]])})),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=json_values, wrap=st.sampled_from(FUZZ_WRAPPERS))
def test_fuzzed_responses_raise_only_declared_errors(doc: Any, wrap: Callable[[Any], Any]) -> None:
    """Arbitrary JSON from the server yields a result or a HranaError, nothing else."""
    content = json.dumps(wrap(doc)).encode()  # may hold NaN/Infinity, as a sloppy server might

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=content)

    with mock_client(handler) as client:
        for call in (lambda: client.execute("SELECT 1"), lambda: client.batch([("X", ())])):
            try:
                call()
            except HranaError as exc:
                assert_no_token(exc)


# ---------------------------------------------------------------------------------------------
# HTTP status and transport error mapping


@pytest.mark.parametrize(
    ("status", "headers", "content", "cls", "retryable"),
    [
        (500, {}, b"internal", ServerUnavailable, True),
        (502, {}, b"<html>bad gateway</html>", ServerUnavailable, True),
        (503, {"Retry-After": "3"}, b"", ServerUnavailable, True),
        (504, {}, b"", ServerUnavailable, True),
        (429, {"Retry-After": "7"}, b'{"error":"TooManyRequests"}', ServerUnavailable, True),
        (401, {}, b'{"error":"Unauthorized: `The JWT is invalid`"}', AuthFailed, False),
        (403, {}, b'{"error":"Authorization forbidden"}', AuthFailed, False),
        (400, {}, b"Cannot deserialize client message from JSON", RequestRejected, False),
        (404, {}, b"", RequestRejected, False),
        (405, {}, b"", RequestRejected, False),
        (301, {"Location": "https://elsewhere/v2/pipeline"}, b"", RequestRejected, False),
        (
            400,
            {"Content-Type": "application/json"},
            b'{"message":"The stream has expired due to inactivity","code":"STREAM_EXPIRED"}',
            StreamExpired,
            True,
        ),
        (400, {}, b"Received an invalid baton", StreamExpired, True),
    ],
)
def test_status_mapping(
    captured: list[httpx.Request],
    status: int,
    headers: dict[str, str],
    content: bytes,
    cls: type[HranaError],
    retryable: bool,
) -> None:
    response = httpx.Response(status, headers=headers, content=content)
    with mock_client(replying(captured, response)) as client, pytest.raises(cls) as info:
        client.execute("SELECT 1")
    err = info.value
    assert type(err) is cls
    assert is_retryable(err) is retryable
    assert str(status) in str(err)
    assert isinstance(err, TiermemError)
    assert_no_token(err)


def test_auth_failed_message_carries_server_reason(captured: list[httpx.Request]) -> None:
    response = httpx.Response(401, json={"error": "Unauthorized: `The JWT has expired`"})
    with mock_client(replying(captured, response)) as client, pytest.raises(AuthFailed) as info:
        client.execute("SELECT 1")
    assert "The JWT has expired" in str(info.value)
    assert info.value.status == 401
    assert info.value.exit_code != 1


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", 7.0), ("0", 0.0), (" 12 ", 12.0), ("soon", None), ("-3", None), ("1.5", None)],
)
def test_parse_retry_after_seconds(header: str, expected: float | None) -> None:
    assert parse_retry_after(header) == expected


def test_parse_retry_after_http_date() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30.0)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after(None) is None


def test_429_with_http_date_retry_after(captured: list[httpx.Request]) -> None:
    date = formatdate(time.time() + 120, usegmt=True)
    response = httpx.Response(429, headers={"Retry-After": date})
    with (
        mock_client(replying(captured, response)) as client,
        pytest.raises(ServerUnavailable) as info,
    ):
        client.execute("SELECT 1")
    assert info.value.retry_after is not None
    assert 100 < info.value.retry_after <= 120


@pytest.mark.parametrize(
    ("exc", "kind", "maybe_applied"),
    [
        (httpx.ConnectError, "connect", False),
        (httpx.ConnectTimeout, "connect timeout", False),
        (httpx.PoolTimeout, "pool timeout", False),
        (httpx.ReadTimeout, "read timeout", True),
        (httpx.WriteTimeout, "write timeout", True),
        (httpx.ReadError, "read error", True),
        (httpx.WriteError, "write error", True),
        (httpx.CloseError, "network", True),
        (httpx.RemoteProtocolError, "dropped", True),
    ],
)
def test_transport_errors_are_retryable_and_never_leak_the_token(
    exc: type[httpx.TransportError], kind: str, maybe_applied: bool
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        # httpx errors carry the request (with its Authorization header); make the message
        # itself contain the token too, as a worst case.
        raise exc(f"failed with {request.headers['authorization']}", request=request)

    with mock_client(handler) as client, pytest.raises(TransportFailure) as info:
        client.execute("SELECT 1")
    err = info.value
    assert is_retryable(err)
    assert err.kind == kind
    assert err.maybe_applied is maybe_applied
    assert "[REDACTED]" in str(err)
    assert_no_token(err)


def test_sql_error_results(captured: list[httpx.Request]) -> None:
    error = {"message": f"no such table: {SENTINEL}", "code": "SQLITE_UNKNOWN"}
    body = pipeline_body({"type": "error", "error": error})
    with mock_client(replying(captured, body)) as client, pytest.raises(SqlError) as info:
        client.execute("SELECT * FROM nope")
    assert info.value.code == "SQLITE_UNKNOWN"
    assert "no such table" in str(info.value)
    assert not is_retryable(info.value)
    assert_no_token(info.value)


def test_busy_sql_error_is_retryable(captured: list[httpx.Request]) -> None:
    errors = [{"message": "database is locked", "code": "SQLITE_BUSY"}, None, None, None]
    body = _batch_body([None, None, None, stmt_result()], errors)
    with mock_client(replying(captured, body)) as client, pytest.raises(SqlError) as info:
        client.batch([("INSERT INTO t VALUES (1)", ())])
    assert info.value.statement is None  # it was the BEGIN
    assert is_retryable(info.value)


def test_is_retryable_only_for_hrana_errors() -> None:
    assert not is_retryable(ValueError("x"))
    assert not is_retryable(InvalidInput("x"))
    assert not is_retryable(httpx.ReadTimeout("x"))


def test_token_never_in_logs_or_repr(
    captured: list[httpx.Request], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = pipeline_body(ok({"type": "execute", "result": stmt_result()}))
    with mock_client(replying(captured, body)) as client:
        client.execute("SELECT 1")
        assert SENTINEL not in repr(client)
        assert SENTINEL not in repr(vars(client).get("_http"))
    assert caplog.records, "expected httpx to log the request"
    assert all(SENTINEL not in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------------------------
# Against a real sqld


def count(client: HranaClient, table: str) -> int:
    (row,) = client.execute(f"SELECT count(*) FROM {table}").rows
    assert isinstance(row[0], int)
    return row[0]


TYPED_ROWS: list[list[Any]] = [
    [1, None, None, None, None],
    [2, 2**62 + 1, 0.1, "héllo ✓ 𝄞 — ünïcode", b"\x00\x01\xfe\xff"],
    [3, -(2**63), -1.5e300, "", b""],
    [4, 2**63 - 1, 1 / 3, "a\u200bb\ttab\nnewline", bytes(range(256))],
    [5, 1_732_250_000_123, 5e-324, "'; DROP TABLE x; --", b"\x01"],
]


def test_typed_values_round_trip_exactly(client: HranaClient, table_name: str) -> None:
    client.execute(f"CREATE TABLE {table_name} (id INTEGER PRIMARY KEY, i, f, t, b)")
    for row in TYPED_ROWS:
        rs = client.execute(f"INSERT INTO {table_name} VALUES (?, ?, ?, ?, ?)", row)
        assert rs.affected_row_count == 1
        assert rs.last_insert_rowid == row[0]
    rs = client.execute(
        f"SELECT id, i, f, t, b, typeof(i), typeof(f), typeof(t), typeof(b) "
        f"FROM {table_name} ORDER BY id"
    )
    assert rs.columns[:5] == ("id", "i", "f", "t", "b")
    assert rs.decltypes[0] == "INTEGER"
    assert [list(r[:5]) for r in rs.rows] == TYPED_ROWS
    for got, expected in zip(rs.rows, TYPED_ROWS, strict=True):
        assert [type(v) for v in got[:5]] == [type(v) for v in expected]
    assert rs.rows[1][5:] == ("integer", "real", "text", "blob")
    assert rs.rows[0][5:] == ("null", "null", "null", "null")


def test_named_args_and_v3_against_sqld(sqld: SqldServer, table_name: str) -> None:
    with HranaClient(sqld.url, sqld.token, protocol=3) as client:
        client.execute(f"CREATE TABLE {table_name} (k TEXT, v INTEGER)")
        client.execute(f"INSERT INTO {table_name} VALUES (:k, @v)", {"k": "a", "v": 2**62 + 1})
        rs = client.execute(f"SELECT v FROM {table_name} WHERE k = $k", {"$k": "a"})
    assert rs.rows == ((2**62 + 1,),)


def test_batch_commits_all_in_one_request(
    sqld: SqldServer, fault_proxy: FaultProxy, table_name: str
) -> None:
    with HranaClient(fault_proxy.url, sqld.token) as client:
        client.execute(f"CREATE TABLE {table_name} (id INTEGER PRIMARY KEY, v TEXT)")
        before, logged = client.requests_sent, len(fault_proxy.log)
        results = client.batch(
            [
                (f"INSERT INTO {table_name} VALUES (?, ?)", [1, "a"]),
                (f"INSERT INTO {table_name} VALUES (?, ?)", [2, "b"]),
                (f"SELECT v FROM {table_name} ORDER BY id", ()),
            ]
        )
        assert client.requests_sent - before == 1
        assert len(fault_proxy.log) - logged == 1
        assert fault_proxy.log[-1].path == "/v2/pipeline"
    assert [r.affected_row_count for r in results[:2]] == [1, 1]
    assert results[2].rows == (("a",), ("b",))


def test_batch_is_atomic(client: HranaClient, table_name: str) -> None:
    client.execute(f"CREATE TABLE {table_name} (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    client.execute(f"INSERT INTO {table_name} VALUES (1, 'kept')")
    sent = client.requests_sent
    with pytest.raises(SqlError) as info:
        client.batch(
            [
                (f"INSERT INTO {table_name} VALUES (2, 'new')", ()),
                (f"UPDATE {table_name} SET v = 'changed' WHERE id = 1", ()),
                (f"INSERT INTO {table_name} VALUES (1, 'duplicate')", ()),  # fails
                (f"INSERT INTO {table_name} VALUES (3, 'after')", ()),
            ]
        )
    assert client.requests_sent - sent == 1
    err = info.value
    assert err.code == "SQLITE_CONSTRAINT"
    assert err.statement == 2
    assert "statement 3 of 4" in str(err)
    assert not is_retryable(err)
    rs = client.execute(f"SELECT id, v FROM {table_name} ORDER BY id")
    assert rs.rows == ((1, "kept"),)
    # The stream was closed and nothing is left open: the next write works at once.
    client.batch([(f"INSERT INTO {table_name} VALUES (2, 'ok')", ())])
    assert count(client, table_name) == 2


def test_sql_errors_from_sqld(client: HranaClient) -> None:
    with pytest.raises(SqlError) as info:
        client.execute("SELECT * FROM no_such_table_here")
    assert info.value.code == "SQLITE_UNKNOWN"
    assert "no such table" in str(info.value)
    with pytest.raises(SqlError) as info:
        client.execute("SELEC 1")
    assert info.value.code == "SQL_PARSE_ERROR"


def test_bad_token_is_auth_failed(sqld: SqldServer) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from tests.sync.sqld import mint_jwt

    forged = mint_jwt(Ed25519PrivateKey.generate())  # signed by a key sqld does not know
    expired = sqld.mint({"a": "rw", "exp": int(time.time()) - 3600})
    for token in (forged, expired, SENTINEL, None):
        with HranaClient(sqld.url, token) as client, pytest.raises(AuthFailed) as info:
            client.execute("SELECT 1")
        assert info.value.status == 401
        assert not is_retryable(info.value)
        assert client.requests_sent == 1
        if token:
            assert_no_token(info.value, token)


def test_read_only_token_write_is_auth_failed_403(sqld: SqldServer, table_name: str) -> None:
    ro = sqld.mint({"a": "ro"})
    with HranaClient(sqld.url, ro) as client:
        assert client.execute("SELECT 1").rows == ((1,),)
        with pytest.raises(AuthFailed) as info:
            client.execute(f"CREATE TABLE {table_name} (x)")
    assert info.value.status == 403
    assert not is_retryable(info.value)
    assert_no_token(info.value, ro)


def test_connection_refused_is_retryable_and_not_applied() -> None:
    with (
        HranaClient(f"http://127.0.0.1:{free_port()}", SENTINEL, timeout=2.0) as client,
        pytest.raises(TransportFailure) as info,
    ):
        client.execute("SELECT 1")
    assert is_retryable(info.value)
    assert info.value.maybe_applied is False
    assert_no_token(info.value)


# ---------------------------------------------------------------------------------------------
# Through the fault proxy


@pytest.mark.parametrize("code", [500, 502, 503])
def test_proxy_5xx_is_server_unavailable(
    sqld: SqldServer, fault_proxy: FaultProxy, table_name: str, code: int
) -> None:
    fault_proxy.script(faultproxy.status(code))
    with (
        HranaClient(fault_proxy.url, sqld.token) as client,
        pytest.raises(ServerUnavailable) as info,
    ):
        client.execute(f"CREATE TABLE {table_name} (x)")
        assert info.value.status == code
        assert info.value.retry_after is None
        assert is_retryable(info.value)
        assert_no_token(info.value, sqld.token)
        client.execute(f"CREATE TABLE {table_name} (x)")  # the retry passes through


def test_proxy_429_retry_after(sqld: SqldServer, fault_proxy: FaultProxy) -> None:
    fault_proxy.script(faultproxy.status(429, retry_after="7"))
    with (
        HranaClient(fault_proxy.url, sqld.token) as client,
        pytest.raises(ServerUnavailable) as info,
    ):
        client.execute("SELECT 1")
    assert info.value.status == 429
    assert info.value.retry_after == 7.0
    assert "retry after 7 s" in str(info.value)
    assert is_retryable(info.value)


def test_proxy_read_timeout(sqld: SqldServer, fault_proxy: FaultProxy, table_name: str) -> None:
    fault_proxy.script(faultproxy.hold(30.0))
    timeout = httpx.Timeout(connect=2.0, read=0.3, write=2.0, pool=2.0)
    with HranaClient(fault_proxy.url, sqld.token, timeout=timeout) as client:
        started = time.monotonic()
        with pytest.raises(TransportFailure) as info:
            client.execute(f"CREATE TABLE {table_name} (x)")
        assert time.monotonic() - started < 5.0
        assert info.value.kind == "read timeout"
        assert info.value.maybe_applied
        assert is_retryable(info.value)
        assert_no_token(info.value, sqld.token)
        client.execute(f"CREATE TABLE {table_name} (x)")  # held request was never forwarded


@pytest.mark.parametrize("fault", [faultproxy.RESET, faultproxy.TRUNCATE])
def test_proxy_reset_and_truncated_body(
    sqld: SqldServer, fault_proxy: FaultProxy, fault: faultproxy.Fault
) -> None:
    fault_proxy.script(fault)
    with (
        HranaClient(fault_proxy.url, sqld.token) as client,
        pytest.raises(TransportFailure) as info,
    ):
        client.execute("SELECT 1")
    assert is_retryable(info.value)
    assert info.value.maybe_applied
    assert_no_token(info.value, sqld.token)


def test_dropped_after_commit_is_retryable_but_the_row_landed(
    sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient, table_name: str
) -> None:
    """The case idempotent inserts exist for: the write committed, the client saw a failure."""
    client.execute(
        f"CREATE TABLE {table_name} (record_id BLOB, version TEXT, envelope BLOB, "
        "PRIMARY KEY (record_id, version))"
    )
    push = [
        (
            f"INSERT INTO {table_name} VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [b"\x01" * 16, "0000000001", b"sealed"],
        )
    ]
    fault_proxy.script(faultproxy.DROP_AFTER_COMMIT)
    with (
        HranaClient(fault_proxy.url, sqld.token) as through_proxy,
        pytest.raises(TransportFailure) as info,
    ):
        through_proxy.batch(push)
        assert is_retryable(info.value)
        assert info.value.maybe_applied
        assert info.value.kind == "dropped"
        assert_no_token(info.value, sqld.token)
        assert count(client, table_name) == 1  # it IS in the database
        through_proxy.batch(push)  # the retry is a no-op
        assert through_proxy.requests_sent == 2
    assert count(client, table_name) == 1


def test_seeded_fault_storm_converges(
    sqld: SqldServer, client: HranaClient, table_name: str
) -> None:
    """Random faults (seeded), naive retry on is_retryable: every row lands exactly once."""
    client.execute(f"CREATE TABLE {table_name} (id INTEGER PRIMARY KEY, v TEXT)")
    weights = {
        faultproxy.PASS: 5.0,
        faultproxy.status(503): 1.0,
        faultproxy.status(429, retry_after="0"): 1.0,
        faultproxy.RESET: 1.0,
        faultproxy.Fault("reset", forward=True): 1.0,
        faultproxy.DROP_AFTER_COMMIT: 1.0,
        faultproxy.TRUNCATE: 1.0,
        faultproxy.hold(0.5, forward=True): 0.5,
    }
    timeout = httpx.Timeout(connect=2.0, read=0.2, write=2.0, pool=2.0)
    with (
        FaultProxy(sqld.url, seed=7, weights=weights) as proxy,
        HranaClient(proxy.url, sqld.token, timeout=timeout) as flaky,
    ):
        for i in range(30):
            stmt = f"INSERT INTO {table_name} VALUES (?, ?) ON CONFLICT DO NOTHING"
            for _attempt in range(50):
                try:
                    flaky.batch([(stmt, [i, f"v{i}"])])
                    break
                except HranaError as exc:
                    assert is_retryable(exc), exc
                    assert_no_token(exc, sqld.token)
            else:
                pytest.fail("50 attempts did not get through")
        kinds = {entry.fault.kind for entry in proxy.log}
        assert {"pass", "status", "reset", "drop_after_commit", "truncate"} <= kinds
        assert proxy.errors == []
    rs = client.execute(f"SELECT id, v FROM {table_name} ORDER BY id")
    assert rs.rows == tuple((i, f"v{i}") for i in range(30))


def test_result_set_is_plain_data() -> None:
    rs = ResultSet(("a",), (None,), ((1,),), 0, None)
    assert rs == ResultSet(("a",), (None,), ((1,),), 0, None)


def test_token_straddling_the_excerpt_cut_does_not_leak(captured: list[httpx.Request]) -> None:
    response = httpx.Response(500, content=("x" * 295 + SENTINEL + "y" * 50).encode())
    with (
        mock_client(replying(captured, response)) as client,
        pytest.raises(ServerUnavailable) as info,
    ):
        client.execute("SELECT 1")
    assert SENTINEL[:6] not in str(info.value)
    assert_no_token(info.value)


@pytest.mark.parametrize("location", ["A:0", "http://[::1", "https://example.invalid/x"])
def test_redirects_are_never_followed_and_a_bad_location_is_a_declared_error(
    captured: list[httpx.Request], location: str
) -> None:
    response = httpx.Response(302, headers={"Location": location}, content=b"{}")
    with mock_client(replying(captured, response)) as client, pytest.raises(HranaError) as info:
        client.execute("SELECT 1")
    assert len(captured) == 1  # the redirect was not followed
    assert_no_token(info.value)
