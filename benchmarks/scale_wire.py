"""What the sync-scale benchmark measures with: a transport that counts every request and its
bytes (optionally adding a round trip), and the server's rows sorted by kind.

The transport wraps httpx's own (`SyncEngine` and `restore` take one), so the figures are what
crosses the wire: Hrana's JSON with the envelopes in base64, request and response bodies."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx

from tests.sync.sqld import SqldServer
from tiermem.sync import records
from tiermem.sync.state import CRITICAL_TABLE
from tiermem.sync.vault.hrana import HranaClient

_WRITES = (b'"INSERT ', b'"UPDATE ', b'"DELETE ')


@dataclass
class Counts:
    requests: int = 0
    up: int = 0
    down: int = 0
    writes: int = 0  # requests carrying an INSERT, UPDATE or DELETE

    def minus(self, before: Counts) -> Counts:
        return Counts(
            self.requests - before.requests,
            self.up - before.up,
            self.down - before.down,
            self.writes - before.writes,
        )


class Wire(httpx.BaseTransport):
    """Counts requests and body bytes; `rtt` seconds are added to every request (sleeping in
    the caller's thread, so requests in flight together overlap their round trips)."""

    def __init__(self, rtt: float = 0.0) -> None:
        self.inner = httpx.HTTPTransport()
        self.rtt = rtt
        self.counts = Counts()
        self._lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        if self.rtt:
            time.sleep(self.rtt)
        response = self.inner.handle_request(request)
        content = response.read()
        with self._lock:
            self.counts.requests += 1
            self.counts.up += len(body)
            self.counts.down += len(content)
            self.counts.writes += any(w in body for w in _WRITES)
        return httpx.Response(
            response.status_code, headers=response.headers, content=content, request=request
        )

    def snapshot(self) -> Counts:
        with self._lock:
            return Counts(**vars(self.counts))

    def close(self) -> None:
        self.inner.close()


@dataclass
class Storage:
    """The vault's rows by kind: rows and envelope bytes, current (newest) and old versions."""

    rows: int = 0
    envelope_bytes: int = 0
    kinds: dict[str, list[int]] = field(default_factory=dict)  # kind -> [rows, bytes]

    def add(self, kind: str, n: int, size: int) -> None:
        got = self.kinds.setdefault(kind, [0, 0])
        got[0] += n
        got[1] += size

    def bytes_of(self, kind: str) -> int:
        return sum(v[1] for k, v in self.kinds.items() if k.split(":")[0] == kind)


def storage(server: SqldServer, tag: bytes, id_key: bytes, agent: str) -> Storage:
    """Every row of the vault (metadata and length only), sorted into memories, manifests,
    critical state, metrics and the prune record."""
    rows: list[tuple[int, bytes, str, bytes, int]] = []
    with HranaClient(server.url, server.token, timeout=120.0) as c:
        after = 0
        while True:
            page = c.execute(
                "SELECT seq, record_id, version, device_id, length(envelope) FROM records "
                "WHERE agent_tag = ? AND seq > ? ORDER BY seq LIMIT 20000",
                (tag, after),
            ).rows
            rows += [
                (
                    records.server_int(r[0]),
                    records.server_blob(r[1]),
                    records.server_str(r[2]),
                    records.server_blob(r[3]),
                    records.server_int(r[4]),
                )
                for r in page
            ]
            if len(page) < 20000:
                break
            after = rows[-1][0]
    critical = records.record_id(id_key, CRITICAL_TABLE, agent)
    devices = {r[3].hex() for r in rows}
    manifests = {records.record_id(id_key, records.MANIFEST_TABLE, d) for d in devices}
    metrics = {records.record_id(id_key, records.METRICS_TABLE, d) for d in devices}
    prune = records.record_id(id_key, records.PRUNE_TABLE, records.PRUNE_KEY)
    by_id: dict[bytes, list[tuple[str, int]]] = {}
    for _seq, rid, version, _device, size in rows:
        by_id.setdefault(rid, []).append((version, size))
    out = Storage(rows=len(rows), envelope_bytes=sum(r[4] for r in rows))
    for rid, versions in by_id.items():
        kind = (
            "critical"
            if rid == critical
            else "manifest"
            if rid in manifests
            else "metrics"
            if rid in metrics
            else "prune"
            if rid == prune
            else "memory"
        )
        versions.sort(reverse=True)
        out.add(f"{kind}:current", 1, versions[0][1])
        if len(versions) > 1:
            out.add(f"{kind}:old", len(versions) - 1, sum(v[1] for v in versions[1:]))
    return out
