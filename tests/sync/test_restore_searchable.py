"""A restore makes memories searchable as it streams them, warm before cold, on a real sqld with
JWT auth: another process's `tiermem retrieve` finds a warm memory while the rest is still on
its way; cold memories wait for the last page; a memory the server replays or tampers with is
never searchable; a restore killed with SIGKILL mid-stream resumes to the whole home.

The stream is held by a proxy in front of sqld that keeps the restore's request for the vault's
oldest window until the test opens it (no sleeps decide anything here)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.sync.helpers import init_engine, policy
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.paths import Home
from tiermem.core.warm import NewFact
from tiermem.sync import crypto, records
from tiermem.sync.engine import SyncEngine
from tiermem.sync.vault.hrana import HranaClient

PAGE_ROWS = 10
PATIENCE = 90.0
COLUMNS = "id, text, category, importance, created_at, tier, urls"


class GateProxy:
    """Forwards every request to sqld, except that a request `hold` picks (by default a
    restore's page request for the vault's oldest window, rows after seq 0) waits until
    `release()`. Keeps every (request, response) body."""

    def __init__(self, upstream: str, hold: Callable[[bytes], bool] | None = None) -> None:
        self.released = threading.Event()
        self.held = threading.Event()
        self.exchanges: list[tuple[bytes, bytes]] = []
        held = hold or oldest_window
        forward = httpx.Client(base_url=upstream, timeout=PATIENCE)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                self._relay(b"")

            def do_POST(self) -> None:
                self._relay(self.rfile.read(int(self.headers.get("Content-Length", 0))))

            def _relay(self, body: bytes) -> None:
                if held(body) and not proxy.released.is_set():
                    proxy.held.set()
                    proxy.released.wait(PATIENCE)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                answer = forward.request(self.command, self.path, content=body, headers=headers)
                proxy.exchanges.append((body, answer.content))
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("content-type", ""))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self._forward = forward

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def release(self) -> None:
        self.released.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._forward.close()


def oldest_window(body: bytes) -> bool:
    """A restore page (each writer's newest version, envelopes included) after seq 0."""
    try:
        requests = json.loads(body or b"{}").get("requests", [])
    except ValueError:
        return False
    for request in requests:
        stmt = request.get("stmt") or {}
        sql, args = str(stmt.get("sql", "")), stmt.get("args", [])
        page = sql.startswith("SELECT seq, record_id, version, epoch") and "AS n" in sql
        if page and len(args) > 1 and args[1].get("value") == "0":
            return True
    return False


@pytest.fixture
def gate(sqld: SqldServer) -> Iterator[GateProxy]:
    proxy = GateProxy(sqld.url)
    yield proxy
    proxy.close()


class Vault:
    """A pushed agent: an archive moved to cold, then working (warm) notes, the newest few
    of them moved to cold last (so cold memories are among the newest rows too)."""

    def __init__(self, root: Path, agent_id: str, sqld: SqldServer) -> None:
        self.agent_id = agent_id
        self.mem = Memory(root / "laptop", agent_id)
        archive = self._store("archive entry {} about the quarry ledger", 40)
        self.mem.memories.move(archive, "cold", self.mem.now())
        self.engine: SyncEngine
        self.engine, self.key = init_engine(self.mem, sqld.url, sqld.token)
        self.push()
        self.warm = self._store("working note {} about the harbour crane", 20)
        self.push()
        self.late_cold = self.warm[-5:]
        self.mem.memories.move(self.late_cold, "cold", self.mem.now())
        self.push()

    def _store(self, text: str, n: int) -> list[str]:
        facts = [NewFact(text=text.format(i), category="work/notes") for i in range(n)]
        return [o.id for o in self.mem.store_many(facts)]

    def push(self) -> None:
        assert self.engine.push(policy()).pushed

    def rows(self) -> set[tuple[Any, ...]]:
        return rows_of(self.mem)

    def env(self, token: str) -> dict[str, str]:
        return {
            **os.environ,
            "TIERMEM_SECRET_STORE": "file",
            "TIERMEM_SYNC_TOKEN": token,
            "TIERMEM_RECOVERY_KEY": crypto.format_recovery_key(self.key),
        }

    def close(self) -> None:
        self.engine.close()
        self.mem.close()


@pytest.fixture
def vault(tmp_path: Path, agent_id: str, sqld: SqldServer) -> Iterator[Vault]:
    v = Vault(tmp_path, agent_id, sqld)
    yield v
    v.close()


def rows_of(mem: Memory) -> set[tuple[Any, ...]]:
    query = f"SELECT {COLUMNS} FROM memories WHERE agent_id = ?"
    return {tuple(r) for r in mem.db.query(query, (mem.agent_id,))}


def visible(home: Path, agent_id: str) -> set[tuple[Any, ...]]:
    if not Home(home).db_path.is_file():
        return set()
    with Memory(home, agent_id) as mem:
        return rows_of(mem)


def tiermem(home: Path, agent_id: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "tiermem.tui", "--home", str(home), "--agent-id", agent_id, *args]


def restore_command(home: Path, vault: Vault, url: str) -> list[str]:
    return tiermem(home, vault.agent_id, "restore", "--url", url, "--page-rows", str(PAGE_ROWS))


@contextmanager
def restoring(
    target: Path, vault: Vault, gate: GateProxy, token: str
) -> Iterator[subprocess.Popen[bytes]]:
    """`tiermem restore` into `target` through `gate`, in a process of its own; afterwards the
    gate opens, and the restore must then finish with 0."""
    proc = subprocess.Popen(
        restore_command(target, vault, gate.url),
        env=vault.env(token),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        yield proc
    finally:
        gate.release()
        _, err = proc.communicate(timeout=PATIENCE)
    assert proc.returncode == 0, err.decode()


def retrieve(home: Path, agent_id: str, query: str) -> list[str]:
    """`tiermem retrieve` in a process of its own: the texts it finds."""
    done = subprocess.run(
        tiermem(home, agent_id, "--json", "retrieve", query, "--limit", "50"),
        capture_output=True,
        timeout=PATIENCE,
        env={**os.environ, "TIERMEM_SECRET_STORE": "file"},
    )
    assert done.returncode == 0, done.stderr.decode()
    found = json.loads(done.stdout)
    results = found["results"] if isinstance(found, dict) else found
    return [str(r["text"]) for r in results]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Until `condition` holds (it is an event of another process), or fail after PATIENCE."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def warm_searchable(home: Path, vault: Vault) -> Callable[[], bool]:
    expected = len(vault.warm) - len(vault.late_cold)
    return lambda: len(visible(home, vault.agent_id)) >= expected


def test_warm_memories_are_searchable_from_another_process_while_the_restore_streams(
    tmp_path: Path, vault: Vault, gate: GateProxy, sqld: SqldServer
) -> None:
    target = tmp_path / "phone"
    with restoring(target, vault, gate, sqld.token) as proc:
        assert gate.held.wait(PATIENCE), "the restore never asked for the oldest window"
        wait_for(warm_searchable(target, vault), "the warm memories")
        found = retrieve(target, vault.agent_id, "harbour crane")
        assert "working note 3 about the harbour crane" in found
        assert proc.poll() is None, "the restore finished while its oldest window was held"
        shown = visible(target, vault.agent_id)
        # warm before cold: the cold ones, even those among the newest rows, wait for the end
        assert {r[5] for r in shown} == {"warm"}
        assert shown <= vault.rows() and len(shown) == len(vault.warm) - len(vault.late_cold)
        assert retrieve(target, vault.agent_id, "quarry ledger") == []
    assert visible(target, vault.agent_id) == vault.rows()
    assert any("quarry ledger" in text for text in retrieve(target, vault.agent_id, "quarry"))


def roster_read(body: bytes) -> bool:
    """The restore's read of the vault's roster (its signed bodies)."""
    return b"SELECT seq, body FROM roster" in body


def asked(gate: GateProxy, *fragments: bytes) -> bool:
    return all(any(f in request for request, _ in gate.exchanges) for f in fragments)


def test_the_manifests_are_read_while_the_roster_is_on_its_way(
    tmp_path: Path, vault: Vault, sqld: SqldServer
) -> None:
    """A restore's opening requests overlap: with the roster's answer held, the vault's device
    list and their manifests are still asked for (on a long round trip they cost one wait, not
    one each); once the roster arrives the restore completes, every memory checked."""
    gate = GateProxy(sqld.url, roster_read)
    target = tmp_path / "phone"
    try:
        with restoring(target, vault, gate, sqld.token) as proc:
            assert gate.held.wait(PATIENCE), "the restore never read the roster"
            manifests = (b"SELECT device_id FROM devices", b"record_id IN (")
            wait_for(lambda: asked(gate, *manifests), "the manifests, while the roster is held")
            assert proc.poll() is None, "the restore finished without the roster"
    finally:
        gate.close()
    assert visible(target, vault.agent_id) == vault.rows()


def newest_row_of(client: HranaClient, vault: Vault, memory_id: str) -> tuple[bytes, str]:
    rid = records.record_id(vault.engine.id_key(), records.MEMORY_TABLE, memory_id)
    rows = client.execute(
        "SELECT version FROM records WHERE record_id = ? ORDER BY version DESC LIMIT 1", (rid,)
    ).rows
    return rid, records.server_str(rows[0][0])


def test_a_replayed_memory_is_never_searchable_and_the_restore_is_refused(
    tmp_path: Path, vault: Vault, sqld: SqldServer, client: HranaClient
) -> None:
    edited = vault.warm[2]
    with vault.mem.db.transaction():
        vault.mem.db.execute(
            "UPDATE memories SET text = ? WHERE agent_id = ? AND id = ?",
            ("working note 2 moved to the dry dock", vault.agent_id, edited),
        )
    vault.push()
    rid, newest = newest_row_of(client, vault, edited)
    # The attacker (holding the token every device holds) drops the newest version: the older
    # one, authentic and listed by an older manifest, is what the server now serves.
    client.execute("DELETE FROM records WHERE record_id = ? AND version = ?", (rid, newest))
    target = tmp_path / "phone"
    done = subprocess.run(
        restore_command(target, vault, sqld.url),
        env=vault.env(sqld.token),
        capture_output=True,
        timeout=PATIENCE,
    )
    err = done.stderr.decode()
    assert done.returncode == 47, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    shown = visible(target, vault.agent_id)
    assert shown and shown <= vault.rows()  # only memories exactly as pushed
    assert edited not in {r[0] for r in shown}
    assert "working note 2 about the harbour crane" not in retrieve(
        target, vault.agent_id, "harbour crane"
    )


def test_a_tampered_page_is_refused_with_nothing_unverified_searchable(
    tmp_path: Path, vault: Vault, sqld: SqldServer, client: HranaClient
) -> None:
    rid, version = newest_row_of(client, vault, vault.warm[0])
    envelope = client.execute(
        "SELECT envelope FROM records WHERE record_id = ? AND version = ?", (rid, version)
    ).rows[0][0]
    raw = bytearray(records.server_blob(envelope))
    raw[-1] ^= 1
    client.execute(
        "UPDATE records SET envelope = ? WHERE record_id = ? AND version = ?",
        (bytes(raw), rid, version),
    )
    target = tmp_path / "phone"
    done = subprocess.run(
        restore_command(target, vault, sqld.url),
        env=vault.env(sqld.token),
        capture_output=True,
        timeout=PATIENCE,
    )
    err = done.stderr.decode()
    assert done.returncode == 14, err
    assert len(err.strip().splitlines()) == 1 and "salvage" in err
    shown = visible(target, vault.agent_id)
    assert shown <= vault.rows() and vault.warm[0] not in {r[0] for r in shown}
    assert base64.b64encode(bytes(raw)).decode() not in err


def test_a_restore_killed_mid_stream_resumes_to_the_whole_home(
    tmp_path: Path, vault: Vault, gate: GateProxy, sqld: SqldServer
) -> None:
    target = tmp_path / "phone"
    proc = subprocess.Popen(
        restore_command(target, vault, gate.url),
        env=vault.env(sqld.token),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert gate.held.wait(PATIENCE)
        wait_for(warm_searchable(target, vault), "the warm memories")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=PATIENCE)
    before = visible(target, vault.agent_id)
    assert before and before <= vault.rows()
    # A push lands between the kill and the rerun: a memory already searchable is edited.
    changed = vault.warm[0]
    assert changed in {r[0] for r in before}
    with vault.mem.db.transaction():
        vault.mem.db.execute(
            "UPDATE memories SET text = ? WHERE agent_id = ? AND id = ?",
            ("working note 0 now covers the harbour tug", vault.agent_id, changed),
        )
    vault.push()
    gate.release()
    done = subprocess.run(
        restore_command(target, vault, gate.url),
        env=vault.env(sqld.token),
        capture_output=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert visible(target, vault.agent_id) == vault.rows()
    with Memory(target, vault.agent_id) as mem:
        assert mem.db.scalar("SELECT count(*) FROM restore_staging") == 0
    assert "working note 0 now covers the harbour tug" in retrieve(
        target, vault.agent_id, "harbour tug"
    )
