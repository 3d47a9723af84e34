"""Push after each conversation without a daemon: conversation-end hands the push to a detached
pusher (or wakes the daemon) and returns; the record reaches the server after it exited."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import conversation_end, dump_bytes, init_engine, remote_versions
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.logs import log_path
from tiermem.sync.daemon import Daemon
from tiermem.sync.engine import SyncEngine
from tiermem.sync.push import kick
from tiermem.sync.vault.hrana import HranaClient
from tiermem.tui.mcp.home import Home as McpHome
from tiermem.tui.mcp.tools.conversation import memory_conversation_end

PATIENCE = 60.0  # generous bounds on waits for background work (never a timing assertion)
TRANSCRIPT = (
    "User: remember that the staging server for quokka lives at quokka.example.org\n"
    "Assistant: Noted, the quokka staging server is quokka.example.org.\n"
)


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"gave up waiting for {what}")


def cli(
    home: Path, agent_id: str, *args: str, stdin: str = "", json_out: bool = True
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tiermem.tui", "--home", str(home), "--agent-id", agent_id]
    return subprocess.run(
        [*command, *(["--json"] if json_out else []), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env=os.environ.copy(),
        check=False,
    )


def end_conversation(home: Path, agent_id: str, n: int) -> dict[str, object]:
    done = cli(home, agent_id, "conversation-end", "-", stdin=f"{TRANSCRIPT}User: take {n}\n")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert isinstance(payload, dict)
    return payload


def pusher_done(home: Path, agent_id: str) -> bool:
    """The pusher recorded an outcome and let its lock go."""
    lock = kick.pusher_lock_path(home, agent_id)
    fd = kick.take_lock(lock)
    if fd is None:
        return False
    os.close(fd)
    return kick.last_attempt(home, agent_id) is not None


def in_sync(client: HranaClient, engine: SyncEngine, mem: Memory) -> bool:
    versions = remote_versions(client, engine)
    return bool(versions) and versions[-1][2] == dump_bytes(mem) and not engine.has_work()


def test_conversation_end_without_a_daemon_reaches_the_server_after_it_exits(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        assert remote_versions(client, engine) == []  # set up, nothing pushed yet
        payload = end_conversation(home, agent_id, 1)  # the command has exited here
        assert payload["push"] == "pusher"
        eventually(lambda: in_sync(client, engine, mem), "the record on the server")
        eventually(lambda: pusher_done(home, agent_id), "the pusher to finish")
        engine.close()
    status = json.loads(cli(home, agent_id, "sync", "status").stdout)
    assert status["last_attempt_ok"] is True and status["last_attempt_by"] == "pusher"
    assert status["last_attempt_message"].startswith("pushed ")
    text = cli(home, agent_id, "sync", "status", json_out=False)
    assert "last background push:" in text.stdout and "by the pusher, ok: pushed" in text.stdout
    assert sqld.token not in log_path(home).read_text() + text.stdout + text.stderr


def test_two_conversation_ends_at_once_start_one_pusher(
    tmp_path: Path, agent_id: str, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
        # The server fails for now, so the first pusher is still retrying when the second ends.
        fault_proxy.weights = {faultproxy.status(503): 1.0}
        results: list[dict[str, object]] = []
        threads = [
            threading.Thread(target=lambda n=n: results.append(end_conversation(home, agent_id, n)))
            for n in (1, 2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(PATIENCE)
        assert sorted(str(r["push"]) for r in results) == ["pusher", "running"]
        fault_proxy.weights = {}
        eventually(lambda: in_sync(client, engine, mem), "both conversations on the server")
        eventually(lambda: pusher_done(home, agent_id), "the pusher to finish")
        engine.close()


def test_a_pusher_facing_an_unreachable_server_gives_up_and_keeps_the_outbox(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[sync]\npush_budget_seconds = 2.0\n")
    proxy = FaultProxy(sqld.url)
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, proxy.url, sqld.token)
        proxy.stop()  # nothing listens at the vault's address any more
        conversation_end(mem, 1)
        waiting = engine.status().pending
        assert waiting > 0
        assert kick.kick(mem) == "pusher"
        eventually(lambda: pusher_done(home, agent_id), "the pusher to give up")
        status = engine.status()
        assert status.pending == waiting and engine.has_work()
        assert status.last_attempt_ok is False
        assert (status.last_attempt_message or "").startswith("gave up")
        text = cli(home, agent_id, "sync", "status", stdin="")
        engine.close()
    assert text.returncode == 0


def test_the_daemon_wakes_on_a_change_through_the_file_watcher(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        events: list[dict[str, object]] = []
        # An hour between polls and pulls: only the watcher can explain a prompt push.
        daemon_mem = Memory(home, agent_id)
        daemon = Daemon(daemon_mem, poll=3600.0, pull_interval=3600.0, report=events.append)
        thread = threading.Thread(target=daemon.run)
        thread.start()
        try:
            eventually(lambda: any(e["event"] == "started" for e in events), "the daemon")
            assert events[0]["watch"] == "watchdog"
            eventually(lambda: daemon.pulls == 1 and not engine.has_work(), "the first pull")
            conversation_end(mem, 1)
            eventually(lambda: in_sync(client, engine, mem), "the watcher-driven push")
            conversation_end(mem, 2)
            assert kick.kick(mem) == "daemon"
            eventually(lambda: in_sync(client, engine, mem), "the second push")
        finally:
            daemon.stop()
            thread.join(PATIENCE)
            daemon_mem.close()
        assert not thread.is_alive()
        engine.close()
    attempt = kick.last_attempt(home, agent_id)
    assert attempt is not None and attempt.ok and attempt.by == "daemon"


def test_without_sync_set_up_conversation_end_only_queues(tmp_path: Path, agent_id: str) -> None:
    home = tmp_path / "home"
    payload = end_conversation(home, agent_id, 1)
    assert payload["push"] == "off"
    assert not kick.pusher_lock_path(home, agent_id).exists()


def test_the_mcp_conversation_end_tool_starts_the_push_too(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        tools = McpHome(home, agent_id, None)
        try:
            done = memory_conversation_end(tools, TRANSCRIPT)
        finally:
            tools.close()
        assert done["push"] == "pusher"
        eventually(lambda: in_sync(client, engine, mem), "the record on the server")
        eventually(lambda: pusher_done(home, agent_id), "the pusher to finish")
        engine.close()


def test_without_the_watcher_the_daemon_falls_back_to_polling(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        events: list[dict[str, object]] = []
        daemon_mem = Memory(home, agent_id)
        daemon = Daemon(daemon_mem, poll=0.05, watch=False, report=events.append)
        thread = threading.Thread(target=daemon.run)
        thread.start()
        try:
            eventually(lambda: any(e["event"] == "started" for e in events), "the daemon")
            assert events[0]["watch"] == "polling"
            conversation_end(mem, 1)
            eventually(lambda: in_sync(client, engine, mem), "the polled push")
        finally:
            daemon.stop()
            thread.join(PATIENCE)
            daemon_mem.close()
        assert not thread.is_alive()
        engine.close()
