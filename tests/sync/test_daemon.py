"""The daemon: pushes new outbox rows, retries, stops on request without losing anything."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.sync import faultproxy
from tests.sync.faultproxy import FaultProxy
from tests.sync.helpers import conversation_end, dump_bytes, init_engine, remote_versions
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync.daemon import Daemon, DaemonRunning
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.state import NotInitialised
from tiermem.sync.vault.hrana import HranaClient

PATIENCE = 30.0  # generous bounds on waits for background work (never a timing assertion)


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    pytest.fail(f"gave up waiting for {what}")


class Running:
    """A daemon on its own thread, with its own connection to the home."""

    def __init__(self, home: Path, agent_id: str, **kw: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.mem = Memory(home, agent_id)
        self.daemon = Daemon(self.mem, poll=0.05, report=self.events.append, **kw)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.daemon.run()
        except BaseException as exc:
            self.error = exc

    def stop(self) -> None:
        self.daemon.stop()
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive(), "the daemon did not stop"
        self.mem.close()

    def kinds(self) -> list[str]:
        return [e["event"] for e in self.events]


def test_daemon_pushes_each_conversation_end(
    tmp_path: Path, agent_id: str, sqld: SqldServer, client: HranaClient
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        running = Running(home, agent_id)
        try:
            for n in range(3):
                conversation_end(mem, n)
                eventually(lambda: not engine.has_work(), "the push")
                assert remote_versions(client, engine)[-1][2] == dump_bytes(mem)
        finally:
            running.stop()
        engine.close()
    assert running.error is None
    kinds = running.kinds()
    assert kinds[0] == "started" and kinds[-1] == "stopped" and "pushed" in kinds


def test_stop_interrupts_a_long_wait_and_keeps_the_outbox(
    tmp_path: Path, agent_id: str, sqld: SqldServer, fault_proxy: FaultProxy
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
        fault_proxy.weights = {faultproxy.status(401): 1.0}
        running = Running(home, agent_id, error_pause=3600.0)
        eventually(lambda: "error" in running.kinds(), "the auth error")
        running.stop()  # within PATIENCE, so not after the hour-long pause
        assert running.error is None
        error = next(e for e in running.events if e["event"] == "error")
        assert "HTTP 401" in error["error"] and sqld.token not in str(running.events)
        assert engine.status().pending == 1
        fault_proxy.weights = {}
        assert engine.push().pushed
        engine.close()


def test_backoff_waits_are_reported_and_retried(
    tmp_path: Path, agent_id: str, sqld: SqldServer, fault_proxy: FaultProxy
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        engine, _ = init_engine(mem, fault_proxy.url, sqld.token)
        fault_proxy.script(faultproxy.status(503, retry_after="0"))
        running = Running(home, agent_id)
        try:
            eventually(lambda: not engine.has_work(), "the retried push")
        finally:
            running.stop()
        retry = next(e for e in running.events if e["event"] == "retry")
        assert "HTTP 503" in retry["error"] and 0 <= retry["wait"] <= 5
        engine.close()


def test_daemon_needs_sync_set_up_and_runs_once_per_home(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        with pytest.raises(NotInitialised):
            Daemon(mem).run()
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        engine.close()
        running = Running(home, agent_id)
        try:
            eventually(lambda: "started" in running.kinds(), "the first daemon")
            with pytest.raises(DaemonRunning) as info:
                Daemon(mem).run()
            assert info.value.exit_code == 27 and str(os.getpid()) in str(info.value)
        finally:
            running.stop()
        Running(home, agent_id).stop()  # the lock is free again


def test_sigterm_during_a_backoff_exits_cleanly_and_loses_nothing(
    tmp_path: Path, agent_id: str, sqld: SqldServer, fault_proxy: FaultProxy, client: HranaClient
) -> None:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem, SyncEngine(mem) as engine:
        init_engine(mem, fault_proxy.url, sqld.token)[0].close()
        conversation_end(mem, 1)
        fault_proxy.weights = {faultproxy.status(503, retry_after="3600"): 1.0}
        env = {**os.environ, "TIERMEM_SYNC_TOKEN": sqld.token}
        command = [sys.executable, "-m", "tiermem.tui", "--home", str(home), "--agent-id", agent_id]
        daemon = subprocess.Popen(
            [*command, "--json", "daemon"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            eventually(lambda: engine.status().retry_at is not None, "a backoff wait")
        finally:
            daemon.send_signal(signal.SIGTERM)
            out, err = daemon.communicate(timeout=PATIENCE)
        assert daemon.returncode == 0, err
        assert b'"event": "stopped"' in out and b"Traceback" not in err
        assert engine.status().pending == 3  # init + two edits: all still queued
        fault_proxy.weights = {}
        assert engine.push().pushed
        assert remote_versions(client, engine)[-1][2] == dump_bytes(mem)


def test_the_daemon_pulls_on_start_and_every_interval(
    tmp_path: Path, agent_id: str, sqld: SqldServer
) -> None:
    """A fact learned on one device is recalled on the other within one pull interval."""
    with Memory(tmp_path / "desktop", agent_id) as desktop:
        engine, key = init_engine(desktop, sqld.url, sqld.token)
        engine.push()
        restore(tmp_path / "phone", agent_id, sqld.url, sqld.token, recovery_key=key)
        first = desktop.store("the ferry to the capybara island leaves at nine", "travel").id
        engine.push()
        running = Running(tmp_path / "phone", agent_id, pull_interval=0.2)
        try:
            with Memory(tmp_path / "phone", agent_id) as phone:
                eventually(lambda: bool(phone.memories.get_many([first])), "the pull on start")
                second = desktop.store("the capybara island ferry is cancelled", "travel").id
                engine.push()
                eventually(lambda: bool(phone.memories.get_many([second])), "a timed pull")
        finally:
            running.stop()
        engine.close()
    assert running.error is None and running.daemon.pulls >= 2
    assert "pulled" in running.kinds() and "pushed" not in running.kinds()  # no ping-pong
