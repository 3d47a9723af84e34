"""The resident process's fence: which commands it runs comes from the command registry, a
caller of another tiermem version or protocol runs its command itself (and the stale resident
process exits), and `tiermem resident stop` waits for the process to end and leaves nothing
behind.

Every test runs real processes: a resident process, `tiermem` commands beside it.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.residentkit import NOT_HANDED, TIERMEM, handed, run, socket_of, start
from tiermem.core import locks
from tiermem.core.version import VERSION
from tiermem.tui.cli.registry import ROOT
from tiermem.tui.resident import client
from tiermem.tui.resident.control import SERVER
from tiermem.tui.resident.server import handed_over

pytestmark = pytest.mark.skipif(not client.SUPPORTED, reason="the resident process is Linux-only")

CLICK_LOADED_WITH = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write(f"click loaded: {'click' in sys.modules}\\n"))
from tiermem.tui.resident import client
setattr(client, sys.argv[1], json.loads(sys.argv[2]))
from tiermem.tui.entry import main
main(sys.argv[3:])
"""
"""The `tiermem` command with one of its client's constants changed (argv: name, JSON value,
the command line), telling at exit whether click loaded (it did only if it ran here)."""

SERVER_WITH_REGISTRY = """
import dataclasses, json, sys
from tiermem.tui.cli.registry import ROOT
for name, resident in json.loads(sys.argv[1]).items():
    ROOT[name] = dataclasses.replace(ROOT[name], resident=resident)
from tiermem.tui.resident import client, server
server.serve(client.socket_path())
"""
"""A resident process whose registry declares some commands otherwise (argv: name → declaration)."""

IGNORES_SIGTERM = """
import os, signal, sys, time
from pathlib import Path
from tiermem.core.locks import record_owner, take_lock
signal.signal(signal.SIGTERM, signal.SIG_IGN)
fd = take_lock(Path(sys.argv[1]))
record_owner(fd)
time.sleep(600)
"""
"""A resident process frozen in its start (it holds the lock, records its pid, never listens and
ignores SIGTERM); the server's module name on its command line names it as one."""


@pytest.fixture
def env(resident_env: dict[str, str]) -> dict[str, str]:
    return resident_env


def click_loaded(args: list[str], env: dict[str, str], name: str = "", value: object = None):
    """`tiermem args` as the console script runs it; with `name`, that client constant changed."""
    patched = [name, json.dumps(value)] if name else ["PROTOCOL", str(client.PROTOCOL)]
    return run([sys.executable, "-c", CLICK_LOADED_WITH, *patched, *args], env)


def ended(pid: int) -> bool:
    """Gone, or a zombie waiting for its parent (it has ended either way)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def left_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_the_registry_declares_what_the_resident_process_runs() -> None:
    for terminal in (True, False):
        assert handed_over(["--home", "h", "retrieve", "x"], terminal)
        assert handed_over(["--version"], terminal)
        assert handed_over(["sync", "status"], terminal) is not terminal  # it may ask there
        for args in (["tui"], ["mcp"], ["watch"], ["resident", "stop"], ["no-such"], []):
            assert not handed_over(args, terminal), args
        for args in (["sync", "local-server"], ["--json", "sync", "--help", "local-server"]):
            assert not handed_over(args, terminal), args
    for name, entry in ROOT.items():
        expected = entry.resident == "always"
        assert handed_over([name], terminal=True) is expected, name


def test_the_resident_process_follows_the_registry_s_declarations(
    env: dict[str, str], tmp_path: Path
) -> None:
    flipped = json.dumps({"retrieve": "never", "demo": "always"})
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER_WITH_REGISTRY, flipped],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: socket_of(env).exists(), "the resident process never listened")
        home = ["--home", str(tmp_path / "home")]
        assert handed([*home, "retrieve", "anything"], env).returncode == NOT_HANDED
        assert handed(["demo", "--help"], env).returncode == 0
        here = click_loaded([*home, "retrieve", "--help"], env)
        assert "click loaded: True" in here.stderr and "Usage:" in here.stdout
        there = click_loaded(["demo", "--help"], env)
        assert "click loaded: False" in there.stderr and "Usage:" in there.stdout
    finally:
        server.terminate()
        server.wait(timeout=60)


@pytest.mark.parametrize(
    ("name", "value"), [("VERSION", "0.0.1-another"), ("PROTOCOL", client.PROTOCOL + 1)]
)
def test_a_client_of_another_version_runs_the_command_itself_and_the_stale_resident_exits(
    env: dict[str, str], tmp_path: Path, name: str, value: object
) -> None:
    pid = start(env)
    home = ["--home", str(tmp_path / "home")]
    assert (
        handed([*home, "store", "--text", "the build box is called kestrel"], env).returncode == 0
    )
    skewed = click_loaded([*home, "--json", "retrieve", "build box"], env, name, value)
    assert skewed.returncode == 0, skewed.stderr
    assert json.loads(skewed.stdout)["results"][0]["text"] == "the build box is called kestrel"
    assert "click loaded: True" in skewed.stderr  # it ran here, not in the resident process
    assert skewed.stderr.count("\n") == 1  # not a word more than a direct run
    wait_until(lambda: ended(pid), "the stale resident process kept running")
    assert handed(["--help"], env).returncode == NOT_HANDED


def test_a_client_of_the_same_version_hands_over(env: dict[str, str], tmp_path: Path) -> None:
    start(env)
    same = click_loaded(["--home", str(tmp_path), "--help"], env, "VERSION", VERSION)
    assert "click loaded: False" in same.stderr and "Usage:" in same.stdout


def test_stop_waits_for_the_process_to_end_and_leaves_no_file_behind(env: dict[str, str]) -> None:
    pid = start(env)
    folder = socket_of(env).parent
    assert len(left_in(folder)) == 3  # socket, lock, log
    done = run([*TIERMEM, "--json", "resident", "stop"], env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["stopped"], report["pid"], report["killed"]) == (True, pid, False)
    assert report["log"] is None, Path(report["log"]).read_text()  # it wrote nothing there
    assert ended(pid)  # when stop returns, not some time later
    assert left_in(folder) == []
    again = run([*TIERMEM, "resident", "stop"], env)
    assert (again.returncode, again.stdout) == (0, "resident process was not running\n")


def test_stop_says_which_process_it_stopped_and_keeps_a_log_that_holds_something(
    env: dict[str, str],
) -> None:
    pid = start(env)
    log = socket_of(env).with_suffix(".log")
    log.write_text("a warning the resident process wrote\n")
    done = run([*TIERMEM, "resident", "stop"], env)
    assert done.stdout == f"resident process stopped (pid {pid})\nits log, kept: {log}\n"
    assert left_in(log.parent) == [log.name]


@pytest.fixture
def loading(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A resident process caught (stopped) while it loads: it holds its lock, and does not
    listen yet."""
    sock = socket_of(env)
    lock = sock.with_suffix(".lock")
    command = [sys.executable, "-m", SERVER]
    proc = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(
            lambda: lock.exists() and lock.read_text().strip() == str(proc.pid),
            "the resident process never took its lock",
        )
        proc.send_signal(signal.SIGSTOP)
        assert not sock.exists(), "it listened before it could be caught loading"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_stop_ends_a_resident_process_that_is_still_loading(
    env: dict[str, str], loading: subprocess.Popen[bytes]
) -> None:
    status = json.loads(run([*TIERMEM, "--json", "resident", "status"], env).stdout)
    assert status["running"] is False  # it does not answer yet
    done = run([*TIERMEM, "--json", "resident", "stop"], env)
    report = json.loads(done.stdout)
    assert (report["stopped"], report["pid"], report["killed"]) == (True, loading.pid, False)
    assert loading.wait(timeout=60) == -signal.SIGTERM
    assert left_in(socket_of(env).parent) == []


def test_stop_kills_a_resident_process_that_does_not_end_in_time(env: dict[str, str]) -> None:
    lock = socket_of(env).with_suffix(".lock")
    lock.parent.mkdir(mode=0o700, parents=True)
    frozen = subprocess.Popen(
        [sys.executable, "-c", IGNORES_SIGTERM, str(lock), SERVER], env=env, start_new_session=True
    )
    try:
        wait_until(lambda: lock.exists() and lock.read_text().strip() == str(frozen.pid), "lock")
        done = run([*TIERMEM, "resident", "stop", "--timeout", "0.5"], env)
        assert done.returncode == 0, done.stderr
        said = f"resident process killed (pid {frozen.pid}): it had not ended 0.5 s after SIGTERM"
        assert done.stdout == said + "\n"
        assert frozen.wait(timeout=60) == -signal.SIGKILL
        assert left_in(lock.parent) == []
    finally:
        frozen.kill()
        frozen.wait(timeout=60)


def test_a_lock_file_removed_between_its_opening_and_its_locking_is_taken_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop removes the lock file while it holds it; a start that had opened the file just
    before must not then hold a lock on a file no longer there."""
    path = tmp_path / "x.lock"
    real_flock = fcntl.flock
    calls: list[int] = []

    def flock_after_a_removal(fd: int, operation: int) -> None:
        if not calls:  # the remover goes first, between this taker's open and its flock
            path.unlink()
        calls.append(fd)
        real_flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_removal)
    fd = locks.take_lock(path)
    assert fd is not None and len(calls) == 2  # it locked the removed file, then the new one
    assert os.fstat(fd).st_ino == path.stat().st_ino  # the one a later taker would find
    os.close(fd)
