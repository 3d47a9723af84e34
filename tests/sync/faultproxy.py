"""A fault-injecting HTTP proxy on loopback, in front of a real sqld.

``latency`` (seconds) is added to every request, half before it is forwarded and half before
the answer is relayed, like a network round trip; it also widens the window in which a client
can be killed after the server committed but before it heard back.

Each incoming request gets one :class:`Fault`: the next scripted one (``proxy.script(...)``), or
else one drawn from ``weights`` with a seeded RNG (so a failing run replays), or else PASS.
``proxy.log`` records what each request got; ``proxy.errors`` collects anything that went wrong
inside the proxy itself (tests should assert it stays empty).

Stdlib ``http.server`` threads plus one ``httpx.Client`` for forwarding; ``stop()`` releases any
held request, joins every handler thread and closes every socket. :class:`ChildProxy` runs one in
a child process, for a test that measures its own process's memory.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import random
import socket
import struct
import sys
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from typing import Literal

import httpx

FaultKind = Literal["pass", "status", "hold", "reset", "drop_after_commit", "truncate"]


@dataclass(frozen=True)
class Fault:
    """What happens to one request.

    - ``pass``: forward to sqld and relay its answer.
    - ``status``: answer ``status`` (500/502/503/429...) without forwarding; ``retry_after`` is
      sent as the ``Retry-After`` header when set.
    - ``hold``: hold the connection for ``hold`` seconds (or until the proxy stops), then close it
      unanswered; with a client read timeout below ``hold`` this is a read timeout.
    - ``reset``: close the connection with a TCP RST (SO_LINGER 0) without answering.
    - ``drop_after_commit``: forward to sqld (so it commits), then close without answering.
    - ``truncate``: forward, then send the headers and only half of the body.

    ``forward=True`` makes ``hold`` and ``reset`` forward to sqld first (the write lands).
    """

    kind: FaultKind
    status: int = 0
    retry_after: str | None = None
    hold: float = 30.0
    forward: bool = False


PASS = Fault("pass")
RESET = Fault("reset")
DROP_AFTER_COMMIT = Fault("drop_after_commit")
TRUNCATE = Fault("truncate")


def status(code: int, retry_after: str | None = None) -> Fault:
    return Fault("status", status=code, retry_after=retry_after)


def hold(seconds: float = 30.0, *, forward: bool = False) -> Fault:
    return Fault("hold", hold=seconds, forward=forward)


@dataclass(frozen=True)
class LogEntry:
    method: str
    path: str
    fault: Fault


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close(), so stop() leaves no thread behind
    block_on_close = True

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        self.proxy.errors.append(repr(sys.exc_info()[1]))


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 10.0  # a stuck client cannot keep a handler thread forever

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        pass  # quiet: tests read proxy.log instead

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        proxy = self.server.proxy
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        fault = proxy.next_fault(self.command, self.path)
        self.close_connection = True
        # OSError: the client went away first (it timed out, or we reset it): expected.
        with contextlib.suppress(OSError):
            self._apply(fault, body)

    def _apply(self, fault: Fault, body: bytes) -> None:
        proxy = self.server.proxy
        proxy.delay()
        if fault.kind == "status":
            headers = {"Content-Type": "application/json"}
            if fault.retry_after is not None:
                headers["Retry-After"] = fault.retry_after
            message = f'{{"error":"injected HTTP {fault.status}"}}'.encode()
            self._respond(fault.status, headers, message)
            return
        forward = fault.kind in ("pass", "drop_after_commit", "truncate") or fault.forward
        upstream = self._forward(body) if forward else None
        proxy.delay()
        if fault.kind == "hold":
            proxy.released.wait(fault.hold)
            return  # closed unanswered
        if fault.kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()  # the real close (an RST) happens when rfile/wfile close
            return
        if fault.kind == "drop_after_commit" or upstream is None:
            return  # sqld has answered (and committed); the client never hears of it
        headers = {"Content-Type": upstream.headers.get("Content-Type", "application/json")}
        if "Retry-After" in upstream.headers:
            headers["Retry-After"] = upstream.headers["Retry-After"]
        if fault.kind == "truncate":
            headers["Content-Length"] = str(len(upstream.content))
            self._respond(
                upstream.status_code, headers, upstream.content[: len(upstream.content) // 2]
            )
            return
        self._respond(upstream.status_code, headers, upstream.content)

    def _forward(self, body: bytes) -> httpx.Response:
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() in ("authorization", "content-type", "accept", "accept-encoding")
        }
        # Without the client's Accept-Encoding (identity), httpx would ask sqld for gzip, which
        # sqld sends in tiny chunks that cost many times the CPU to decode: under load the
        # proxy's threads then pile up on its connection pool (seen in the soak: 2 GB RSS).
        headers.setdefault("Accept-Encoding", "identity")
        return self.server.proxy.upstream.request(
            self.command, self.path, content=body, headers=headers
        )

    def _respond(self, code: int, headers: Mapping[str, str], body: bytes) -> None:
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


class FaultProxy:
    """``with FaultProxy(upstream_url, seed=1) as proxy: ... proxy.url ...``"""

    def __init__(
        self,
        upstream: str,
        *,
        seed: int = 0,
        weights: Mapping[Fault, float] | None = None,
        latency: float = 0.0,
    ) -> None:
        self.upstream = httpx.Client(base_url=upstream, timeout=10.0, trust_env=False)
        self.rng = random.Random(seed)
        self.weights = dict(weights or {})
        self.latency = latency
        self.log: list[LogEntry] = []
        self.errors: list[str] = []
        self.released = threading.Event()
        self._scripted: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, *faults: Fault) -> None:
        """Queue faults for the next requests, in order (before any random draw)."""
        with self._lock:
            self._scripted.extend(faults)

    def next_fault(self, method: str, path: str) -> Fault:
        with self._lock:
            if self._scripted:
                fault = self._scripted.popleft()
            elif self.weights:
                faults = list(self.weights)
                fault = self.rng.choices(faults, weights=[self.weights[f] for f in faults])[0]
            else:
                fault = PASS
            self.log.append(LogEntry(method, path, fault))
            return fault

    def delay(self) -> None:
        """Half of the injected round trip (cut short when the proxy stops)."""
        if self.latency > 0:
            self.released.wait(self.latency / 2)

    def stop(self) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
        self.upstream.close()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ChildProxy:
    """A `FaultProxy` with random faults in a child process; `log` and `errors` arrive at `stop()`.

    A test that samples its own RSS must not host the proxy: its thread per request relays
    answers of up to a megabyte (restore pages), and glibc keeps what those threads freed
    resident in their own malloc arenas (`malloc_trim` does not shrink a thread arena's top),
    so RSS would climb at every restore while the test's own live memory stays flat.
    """

    def __init__(
        self, upstream: str, *, seed: int = 0, weights: Mapping[Fault, float] | None = None
    ) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self._pipe, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(child, upstream, seed, dict(weights or {})), daemon=True
        )
        self._process.start()
        child.close()
        self.url: str = self._pipe.recv()
        self.log: list[LogEntry] = []
        self.errors: list[str] = []

    def stop(self) -> None:
        with contextlib.suppress(OSError, EOFError):  # the child is gone already
            self._pipe.send(None)
            self.log, self.errors = self._pipe.recv()
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._pipe.close()

    def __enter__(self) -> ChildProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _serve(pipe: Connection, upstream: str, seed: int, weights: dict[Fault, float]) -> None:
    """The child of a `ChildProxy`: serve until told to stop, then send back log and errors."""
    with FaultProxy(upstream, seed=seed, weights=weights) as proxy:
        pipe.send(proxy.url)
        pipe.recv()
    pipe.send((proxy.log, proxy.errors))
