"""The resident process can never hang a command, outlive its caller's command, keep the starting
shell's secrets, or be disabled by a folder another user made first.

Every test runs a real resident process and real `tiermem` processes beside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.residentkit import NOT_HANDED, TIERMEM, children, direct, handed, run, socket_of, start
from tests.sentinels import SENTINEL_PASSPHRASE, SENTINEL_TOKEN
from tiermem.core.environment import VARIABLES
from tiermem.core.errors import EXIT_INTERRUPTED
from tiermem.ops import service as svc
from tiermem.tui.resident import client

pytestmark = pytest.mark.skipif(not client.SUPPORTED, reason="the resident process is Linux-only")

SECRETS = [v.name for v in VARIABLES if v.secret]
BOUND = 60
"""Generous: only a command that never ends takes this long."""


@pytest.fixture
def env(resident_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """`resident_env` with its own cache folder, so no fallback reaches the user's real one."""
    cache = tempfile.mkdtemp(prefix="tmc")
    environ = {**resident_env, "XDG_CACHE_HOME": cache}
    yield environ
    subprocess.run([*TIERMEM, "resident", "stop"], env=environ, capture_output=True)
    shutil.rmtree(cache, ignore_errors=True)


def frozen(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)


def thawed(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)


def wait_until(check: object, what: str, bound: float = BOUND) -> None:
    deadline = time.monotonic() + bound
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def connected(pid: int) -> bool:
    """Whether `pid` has opened a socket (the hand-over's)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    links = []
    for fd in fds:
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return any(link.startswith("socket:") for link in links)


# -- a frozen resident process ---------------------------------------------------------------


def test_a_frozen_resident_process_only_delays_a_command_which_then_runs_here(
    env: dict[str, str], tmp_path: Path
) -> None:
    server = start(env)
    home = str(tmp_path / "home")
    quick = {**env, "TIERMEM_RESIDENT_TIMEOUT": "0.5"}
    late = tmp_path / "late.txt"
    frozen(server)
    try:
        with open(late, "wb") as sink:
            declined = subprocess.run(
                [sys.executable, "-c", HAND_OVER_ONLY, "--help"],
                env=quick,
                stdout=sink,
                stderr=sink,
                timeout=BOUND,
            )
        assert declined.returncode == NOT_HANDED, late.read_text()
        done = subprocess.run(
            [*TIERMEM, "--home", home, "store", "--text", "stored while it was frozen"],
            env=env,  # the default wait
            capture_output=True,
            text=True,
            timeout=BOUND,
        )
        assert done.returncode == 0, done.stderr
        assert "stored:" in done.stdout
    finally:
        thawed(server)
    found = direct(["--home", home, "--json", "retrieve", "frozen"], env)
    assert found.returncode == 0 and "stored while it was frozen" in found.stdout
    wait_until(lambda: children(server) == [], "a child kept running after the caller gave up")
    assert serves(env)  # thawed, it serves again; the requests given up on never ran
    assert late.read_text() == ""


HAND_OVER_ONLY = f"""
import sys
from tiermem.tui.resident import client
code = client.forward(sys.argv[1:])
sys.exit({NOT_HANDED} if code is None else code)
"""


@pytest.mark.parametrize(
    ("signum", "expected"),
    [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, EXIT_INTERRUPTED)],
)
def test_a_signal_while_waiting_on_a_frozen_resident_ends_the_command_as_a_direct_run(
    env: dict[str, str], tmp_path: Path, signum: int, expected: int
) -> None:
    server = start(env)
    patient = {**env, "TIERMEM_RESIDENT_TIMEOUT": str(10 * BOUND)}  # only the signal ends it
    frozen(server)
    try:
        caller = subprocess.Popen(
            [*TIERMEM, "--home", str(tmp_path / "home"), "retrieve", "x"],
            env=patient,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: connected(caller.pid), "the caller never connected")
            time.sleep(0.2)  # well inside the wait for the resident's answer
            caller.send_signal(signum)
            caller.wait(timeout=BOUND)
        finally:
            caller.kill()  # no-op once it has ended
            _, err = caller.communicate(timeout=BOUND)
    finally:
        thawed(server)
    assert caller.returncode == expected, err
    if signum == signal.SIGINT:
        assert err.splitlines()[-1] == "tiermem: error: interrupted"


def test_the_wait_is_set_by_a_documented_variable() -> None:
    names = {v.name for v in VARIABLES}
    assert client.TIMEOUT in names
    assert client.hand_over_timeout({client.TIMEOUT: "0.25"}) == 0.25
    for bad in ("", "soon", "-1", "nan", "inf"):
        assert client.hand_over_timeout({client.TIMEOUT: bad}) == client.DEFAULT_TIMEOUT


# -- a killed caller -------------------------------------------------------------------------


def test_a_caller_killed_with_sigkill_takes_its_command_with_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    server = start(env)
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    reading = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writing = os.open(fifo, os.O_WRONLY)
    os.set_blocking(reading, True)
    out = tmp_path / "out.txt"
    with open(out, "wb") as sink:
        caller = subprocess.Popen(
            [*TIERMEM, "distill", "-"], env=env, stdin=reading, stdout=sink, stderr=sink
        )
    os.close(reading)
    try:
        wait_until(
            lambda: any(same_stdin(c, caller.pid) for c in children(server)),
            "no child took the caller's input",
        )
        child = children(server)[0]
        caller.kill()
        caller.wait(timeout=BOUND)
        gone = time.monotonic() + 10
        while child in children(server) and time.monotonic() < gone:
            time.sleep(0.02)
        with contextlib.suppress(BrokenPipeError):  # no reader left: nobody can act on it
            os.write(writing, b"user: we decided to deploy on fridays from now on\n")
    finally:
        os.close(writing)
    wait_until(lambda: child not in children(server), "the child outlived its caller")
    assert "fridays" not in out.read_text(), "the orphaned child read the input and acted"


def same_stdin(one: int, other: int) -> bool:
    try:
        return os.readlink(f"/proc/{one}/fd/0") == os.readlink(f"/proc/{other}/fd/0")
    except OSError:
        return False


def test_a_command_that_ends_normally_leaves_what_it_started_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    """The hang-up after the exit code is no reason to kill anything."""
    server = start(env)
    home = ["--home", str(tmp_path / "home")]
    for _ in range(3):
        done = handed([*home, "store", "--text", "a fact worth keeping"], env)
        assert done.returncode == 0, done.stderr
    wait_until(lambda: children(server) == [], "a child kept running")


# -- secrets in the resident's environment --------------------------------------------------


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}


def with_secrets(env: dict[str, str]) -> dict[str, str]:
    values = {name: f"{SENTINEL_TOKEN}-{i}" for i, name in enumerate(SECRETS)}
    return {**env, **values, "TIERMEM_PASSPHRASE": SENTINEL_PASSPHRASE}


def test_the_resident_process_keeps_no_secret_of_the_shell_that_started_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    assert {"TIERMEM_SYNC_TOKEN", "TIERMEM_RECOVERY_KEY", "TIERMEM_PASSPHRASE"} <= set(SECRETS)
    server = start(with_secrets(env))
    kept = environ_of(server)
    assert not set(SECRETS) & set(kept)
    assert kept.get("TIERMEM_RESIDENT") == "1"  # the rest is as it was
    seen = handed(["--home", str(tmp_path / "h"), "store", "--text", "a fact"], with_secrets(env))
    assert seen.returncode == 0, seen.stderr  # a caller still brings its own secrets


def test_the_service_unit_s_resident_process_keeps_no_secret_either(
    env: dict[str, str], tmp_path: Path
) -> None:
    plan = svc.plan("systemd", tmp_path / "h", "default", resident=True, folder=tmp_path)
    unit = next(f for f in plan.files if f.unit == svc.RESIDENT_UNIT).content
    setting = [line for line in unit.splitlines() if line.startswith("Environment=")]
    assert not [name for name in SECRETS for line in setting if name in line]
    unset = next(x for x in unit.splitlines() if x.startswith("UnsetEnvironment="))
    assert set(SECRETS) <= set(unset.removeprefix("UnsetEnvironment=").split())
    exec_line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(exec_line.removeprefix("ExecStart="))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    service = subprocess.Popen(argv, env=with_secrets(env), **quiet)  # type: ignore[call-overload]
    try:
        wait_until(
            lambda: (
                f"running (pid {service.pid})" in run([*TIERMEM, "resident", "status"], env).stdout
            ),
            "the resident process never listened",
        )
        assert not set(SECRETS) & set(environ_of(service.pid))
    finally:
        service.terminate()
        service.wait(timeout=BOUND)


# -- the socket folder -------------------------------------------------------------------------


def planned_folder(env: dict[str, str]) -> Path:
    """The folder the socket would go in now (it need not exist yet)."""
    return socket_of(env).parent


def serves(env: dict[str, str]) -> bool:
    return handed(["--help"], env).returncode == 0


def test_a_squatted_socket_folder_is_skipped_and_the_resident_still_starts(
    env: dict[str, str],
) -> None:
    squatted = planned_folder(env)
    squatted.mkdir(mode=0o755)
    squatted.chmod(0o755)  # as another user's folder looks to us: not ours alone
    start(env)
    assert socket_of(env).parent != squatted and serves(env)
    assert list(squatted.iterdir()) == []


def test_a_symlinked_socket_folder_is_skipped_and_nothing_is_made_through_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    elsewhere = Path(tempfile.mkdtemp(prefix="tme"))  # private and ours: only the link is wrong
    planned = planned_folder(env)
    planned.symlink_to(elsewhere)
    start(env)
    assert socket_of(env).parent != planned and serves(env)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("runtime", ["unset", "open to others", "a symlink"])
def test_without_a_private_runtime_folder_the_socket_goes_in_the_user_s_cache(
    env: dict[str, str], runtime: str
) -> None:
    environ = dict(env)
    base = Path(env["XDG_RUNTIME_DIR"])
    if runtime == "unset":
        del environ["XDG_RUNTIME_DIR"]
    elif runtime == "open to others":
        base.chmod(0o755)
    else:
        link = Path(tempfile.mkdtemp(prefix="tml")) / "run"
        link.symlink_to(base)
        environ["XDG_RUNTIME_DIR"] = str(link)
    try:
        start(environ)
        folder = socket_of(environ).parent
        assert folder.is_relative_to(env["XDG_CACHE_HOME"])
        assert (folder.stat().st_mode & 0o777) == 0o700 and serves(environ)
    finally:
        run([*TIERMEM, "resident", "stop"], environ)
        base.chmod(0o700)


def test_status_names_the_folder_it_would_use(env: dict[str, str]) -> None:
    status = json.loads(run([*TIERMEM, "--json", "resident", "status"], env).stdout)
    assert Path(status["socket"]).parent == Path(env["XDG_RUNTIME_DIR"], "tiermem")


# -- stopping it -------------------------------------------------------------------------------


def test_sigterm_ends_it_even_while_it_forks_for_callers(env: dict[str, str]) -> None:
    """A stop that lands during a fork (its at-fork callbacks run Python code) is not lost."""
    for _ in range(10):
        server = start(env)
        path = str(socket_of(env))
        stop_at = time.monotonic() + 0.3
        while time.monotonic() < stop_at:  # a stream of callers: it forks all the time
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as caller:
                caller.connect(path)
        os.kill(server, signal.SIGTERM)
        for _ in range(200):
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as caller:
                caller.connect(path)
        wait_until(lambda pid=server: not alive(pid), "a SIGTERM was lost", bound=15)


def alive(pid: int) -> bool:
    """Running (not a zombie waiting for its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"
