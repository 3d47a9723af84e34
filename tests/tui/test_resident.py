"""The resident process: a command handed to it prints, reads and exits exactly as it would run
directly; it serves only this user, stops when its files change, and Ctrl-C still works.

Every test runs a real resident process (`tiermem resident start`) with its socket in a private
folder of its own, and real `tiermem` processes beside it.
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
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.residentkit import (
    CLICK_LOADED,
    NOT_HANDED,
    TIERMEM,
    both,
    children,
    direct,
    handed,
    run,
    socket_of,
    start,
)
from tests.terminal import open_terminal, read_until
from tiermem.core.errors import EXIT_INTERRUPTED
from tiermem.ops import service as svc
from tiermem.tui.cli.registry import ROOT
from tiermem.tui.resident import client
from tiermem.tui.resident.server import EXIT_RENEW, RECEIVE_TIMEOUT, handed_over

pytestmark = pytest.mark.skipif(not client.SUPPORTED, reason="the resident process is Linux-only")


@pytest.fixture
def env(resident_env: dict[str, str]) -> dict[str, str]:
    return resident_env


def test_a_handed_over_command_prints_reads_and_exits_as_a_direct_run(
    env: dict[str, str], tmp_path: Path
) -> None:
    start(env)
    home = str(tmp_path / "home")
    first = handed(["--home", home, "store", "--text", "the deploy checklist is in docs"], env)
    assert first.returncode == 0, first.stderr
    assert "stored:" in first.stdout and "created agent 'default'" in first.stderr
    second = handed(["--home", home, "store", "--text", "the staging host is db2"], env)
    assert second.returncode == 0, second.stderr
    talk = "user: we decided to deploy on fridays from now on\nassistant: noted\n"
    piped = handed(["distill", "-"], env, stdin=talk)
    assert piped.returncode == 0 and "fridays" in piped.stdout
    assert piped.stdout == direct(["distill", "-"], env, stdin=talk).stdout
    for args in (
        ["retrieve", "deploy checklist"],
        ["--json", "hot"],
        ["get", "no-such-id"],  # exit 4
        ["retrieve", "--no-such-option"],  # exit 2
        ["hot"],
        ["--help"],
        ["retrieve", "--help"],
    ):
        via, here = both(home, args, env)
        assert (via.returncode, via.stdout, via.stderr) == (
            here.returncode,
            here.stdout,
            here.stderr,
        )
    assert (
        json.loads(handed(["--home", home, "--json", "retrieve", "staging host"], env).stdout)[
            "results"
        ][0]["text"]
        == "the staging host is db2"
    )


def test_the_caller_s_folder_and_environment_are_the_command_s(
    env: dict[str, str], tmp_path: Path
) -> None:
    start(env)
    (tmp_path / "work").mkdir()
    relative = handed(
        ["--home", "rel-home", "store", "--text", "a fact"], env, cwd=tmp_path / "work"
    )
    assert relative.returncode == 0 and (tmp_path / "work" / "rel-home").is_dir()
    by_variable = {**env, "TIERMEM_HOME": str(tmp_path / "env-home")}
    assert handed(["store", "--text", "another fact"], by_variable).returncode == 0
    assert (tmp_path / "env-home").is_dir()


def test_the_tiermem_command_hands_over_without_loading_the_cli(
    env: dict[str, str], tmp_path: Path
) -> None:
    home = ["--home", str(tmp_path / "home")]
    alone = run([sys.executable, "-c", CLICK_LOADED, *home, "store", "--text", "x y z"], env)
    assert alone.returncode == 0 and "click loaded: True" in alone.stderr
    start(env)
    served = run([sys.executable, "-c", CLICK_LOADED, *home, "retrieve", "x y z"], env)
    assert served.returncode == 0 and "x y z" in served.stdout
    assert "click loaded: False" in served.stderr
    off = {**env, "TIERMEM_RESIDENT": "0"}
    assert "click loaded: True" in run([sys.executable, "-c", CLICK_LOADED, "--help"], off).stderr


def test_ctrl_c_reaches_the_command_and_ends_it_with_130(env: dict[str, str]) -> None:
    server = start(env)
    with waiting_on_input(env) as caller:
        try:
            child = wait_for_child(server, caller.pid)
            caller.send_signal(signal.SIGINT)
            caller.wait(timeout=60)  # its input stays open: only the signal can end it
        finally:
            caller.kill()  # no-op once it has ended
        out, err = caller.communicate(timeout=60)
    assert caller.returncode == EXIT_INTERRUPTED, err
    assert err.splitlines()[-1] in ("tiermem: error: aborted", "tiermem: error: interrupted")
    assert out == ""
    deadline = time.monotonic() + 30  # it sent its code just before it exits
    while child in children(server):
        assert time.monotonic() < deadline, "the interrupted child kept running"
        time.sleep(0.02)


def waiting_on_input(env: dict[str, str]) -> subprocess.Popen[str]:
    """`tiermem distill -`, which waits for its standard input (kept open), as a job of its own:
    a shell gives each command its process group, and a group left orphaned never stops on
    Ctrl-Z (the kernel drops the signal), as in some CI runners."""
    return subprocess.Popen(
        [*TIERMEM, "distill", "-"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )


@contextlib.contextmanager
def an_upgrade() -> Iterator[None]:
    """An installed file changed, as an upgrade changes it: its modification time moved."""
    source = Path(sys.modules["tiermem.core.hot"].__file__ or "")
    times = source.stat()
    os.utime(source, ns=(times.st_atime_ns, times.st_mtime_ns + 1_000_000_000))
    try:
        yield
    finally:
        os.utime(source, ns=(times.st_atime_ns, times.st_mtime_ns))


def test_a_changed_file_makes_it_decline_and_stop(env: dict[str, str], tmp_path: Path) -> None:
    start(env)
    home = ["--home", str(tmp_path / "home")]
    assert handed([*home, "store", "--text", "before the upgrade"], env).returncode == 0
    with an_upgrade():
        assert handed([*home, "hot"], env).returncode == NOT_HANDED
        plain = run([*TIERMEM, *home, "--json", "retrieve", "upgrade"], env)
        assert plain.returncode == 0 and "before the upgrade" in plain.stdout
        deadline = time.monotonic() + 30
        while "not running" not in run([*TIERMEM, "resident", "status"], env).stdout:
            assert time.monotonic() < deadline, "the stale resident process kept running"
            time.sleep(0.05)


def _serving(env: dict[str, str], process: subprocess.Popen[str]) -> None:
    """Wait until `process` answers on the socket."""
    deadline = time.monotonic() + 60
    while f"running (pid {process.pid})" not in run([*TIERMEM, "resident", "status"], env).stdout:
        assert process.poll() is None, "the resident process ended while starting"
        assert time.monotonic() < deadline, "the resident process never listened"
        time.sleep(0.05)


def test_as_a_service_an_upgrade_ends_it_for_a_restart_and_a_stop_ends_it_for_good(
    env: dict[str, str], tmp_path: Path
) -> None:
    """What `tiermem service install --resident` has systemd run, run here in the foreground:
    the exit codes its unit's restart rules rely on."""
    plan = svc.plan("systemd", tmp_path / "h", "default", resident=True, folder=tmp_path)
    unit = next(f for f in plan.files if f.unit == svc.RESIDENT_UNIT).content
    exec_line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(exec_line.removeprefix("ExecStart="))
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "text": True}
    service = subprocess.Popen(argv, env=env, **quiet)  # type: ignore[call-overload]
    _serving(env, service)
    second = run(argv, env)  # started twice: it ends at once, and not as a failure
    assert second.returncode == 0 and "another resident process" in second.stderr
    home = ["--home", str(tmp_path / "home")]
    assert handed([*home, "store", "--text", "before the upgrade"], env).returncode == 0
    with an_upgrade():
        assert handed([*home, "hot"], env).returncode == NOT_HANDED
        assert service.wait(30) == EXIT_RENEW == svc.RESIDENT_RENEW_EXIT
    service = subprocess.Popen(argv, env=env, **quiet)  # type: ignore[call-overload]
    _serving(env, service)
    assert run([*TIERMEM, "resident", "stop"], env).returncode == 0
    assert service.wait(30) == 0


def test_a_socket_folder_others_can_enter_is_never_used(env: dict[str, str]) -> None:
    start(env)
    folder = socket_of(env).parent
    folder.chmod(0o755)
    try:
        assert handed(["--help"], env).returncode == NOT_HANDED
    finally:
        folder.chmod(0o700)
    assert handed(["--help"], env).returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another user needs root")
def test_another_user_who_reaches_the_socket_is_not_served(env: dict[str, str]) -> None:
    server = start(env)
    path = socket_of(env)
    opened = [(path.parent.parent, 0o711), (path.parent, 0o711), (path, 0o666)]
    stranger = f"""
import os, sys
from tiermem.tui.resident import client  # before: this Python's files are root's alone
os.setgid(65534); os.setuid(65534)
client.socket_path = lambda: {str(path)!r}
client.private = lambda path: True  # this caller does not care whose socket it is
code = client.forward(["--help"])
sys.exit({NOT_HANDED} if code is None else code)
"""
    modes = [(where, where.stat().st_mode & 0o777) for where, _ in opened]
    try:
        for where, mode in opened:
            where.chmod(mode)
        done = run([sys.executable, "-c", stranger], env)
    finally:
        for where, mode in modes:
            where.chmod(mode)
    assert done.returncode == NOT_HANDED and done.stdout == "", done.stderr
    assert children(server) == []


def test_a_terminal_sees_the_same_bytes(env: dict[str, str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    stored = direct(
        ["--home", str(home), "store", "--text", "the deploy checklist is in docs"], env
    )
    assert stored.returncode == 0
    shutil.copytree(home, tmp_path / "twin")
    start(env)
    shown = []
    for resident, where in (("1", home), ("0", tmp_path / "twin")):
        proc, master = open_terminal(
            [*TIERMEM, "--home", str(where), "retrieve", "deploy"],
            {**env, "TIERMEM_RESIDENT": resident},
        )
        out = bytearray()
        read_until(master, out, None, 60)
        os.close(master)
        assert proc.wait(timeout=60) == 0
        shown.append(bytes(out))
    assert shown[0] == shown[1] and b"deploy checklist" in shown[0]


def test_stop_ends_it_and_commands_run_directly_again(env: dict[str, str], tmp_path: Path) -> None:
    pid = start(env)
    assert start(env) == pid  # a second start finds it running
    stopped = json.loads(run([*TIERMEM, "--json", "resident", "stop"], env).stdout)
    assert stopped["running"] is False and not Path(stopped["socket"]).exists()
    assert handed(["--help"], env).returncode == NOT_HANDED
    assert run([*TIERMEM, "--help"], env).returncode == 0


def test_only_commands_that_never_take_the_terminal_are_handed_over() -> None:
    for name in ("tui", "serve", "daemon", "mcp", "watch", "service", "demo", "resident"):
        assert ROOT[name].resident == "never", name
    for name in ("sync", "restore"):  # they may ask for a secret on a terminal
        assert ROOT[name].resident == "unless-terminal", name


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["--home", "h", "retrieve", "x"], "retrieve"),
        (["--home=h", "--json", "--agent-id", "a", "hot"], "hot"),
        (["--agent-id", "store"], None),  # "store" is the option's value
        (["-h"], "--help"),
        (["--version"], "--help"),
        (["--unknown", "store"], None),
        ([], None),
    ],
)
def test_the_command_is_found_past_the_global_options(args: list[str], command: str | None) -> None:
    assert client.command_of(args) == command


def test_a_command_that_may_ask_for_a_secret_is_handed_over_only_without_a_terminal(
    env: dict[str, str], tmp_path: Path
) -> None:
    start(env)
    status = [sys.executable, "-c", CLICK_LOADED, "--home", str(tmp_path), "sync", "status"]
    piped = run(status, env)
    assert "click loaded: False" in piped.stderr
    here = direct(["--home", str(tmp_path), "sync", "status"], env)
    assert (piped.returncode, piped.stdout) == (here.returncode, here.stdout)
    proc, master = open_terminal(status, env)
    out = bytearray()
    read_until(master, out, None, 60)
    os.close(master)
    proc.wait(timeout=60)
    assert b"click loaded: True" in out  # on a terminal it may ask: it runs itself


def test_a_package_installed_beside_it_makes_it_decline(env: dict[str, str]) -> None:
    start(env)
    site = Path(sysconfig.get_paths()["purelib"])  # where pip would add or remove a package
    times = site.stat()
    os.utime(site, ns=(times.st_atime_ns, times.st_mtime_ns + 1_000_000_000))
    try:
        assert handed(["--help"], env).returncode == NOT_HANDED
    finally:
        os.utime(site, ns=(times.st_atime_ns, times.st_mtime_ns))


def test_a_killed_resident_process_leaves_commands_working_and_can_be_started_again(
    env: dict[str, str], tmp_path: Path
) -> None:
    os.kill(start(env), signal.SIGKILL)
    path = socket_of(env)
    home = ["--home", str(tmp_path / "home")]
    deadline = time.monotonic() + 30
    while handed(["--help"], env).returncode != NOT_HANDED:  # the kernel closes its socket
        assert time.monotonic() < deadline
        time.sleep(0.05)
    done = run([*TIERMEM, *home, "store", "--text", "after the crash"], env)
    assert done.returncode == 0, done.stderr
    assert path.exists()  # the dead process's socket file is still there: start replaces it
    start(env)
    found = handed([*home, "--json", "retrieve", "crash"], env)
    assert json.loads(found.stdout)["results"][0]["text"] == "after the crash"


def test_two_starts_at_once_leave_one_resident_process(env: dict[str, str]) -> None:
    starts = [
        subprocess.Popen(
            [*TIERMEM, "--json", "resident", "start"], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    pids = {json.loads(p.communicate(timeout=120)[0])["pid"] for p in starts}
    assert all(p.returncode == 0 for p in starts)
    (pid,) = pids  # each reports the one that runs
    servers = [
        p.name
        for p in Path("/proc").iterdir()
        if p.name.isdigit()
        and b"tiermem.tui.resident.server" in _read_or_empty(p / "cmdline")
        and env["XDG_RUNTIME_DIR"].encode() in _read_or_empty(p / "environ")
    ]
    assert servers == [str(pid)]


def _read_or_empty(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def test_ctrl_z_stops_the_command_and_fg_lets_it_go_on(env: dict[str, str]) -> None:
    server = start(env)
    with waiting_on_input(env) as caller:
        try:
            child = wait_for_child(server, caller.pid)
            caller.send_signal(signal.SIGTSTP)
            wait_for_state(child, "T")  # stopped with the caller, as a job should be
            wait_for_state(caller.pid, "T")
            caller.send_signal(signal.SIGCONT)  # what `fg` sends
            wait_for_state(child, "S")
            talk = "user: we decided to deploy on fridays from now on\n"
            out, err = caller.communicate(talk, timeout=60)
        finally:
            caller.kill()  # no-op once it has ended
    assert caller.returncode == 0, err
    assert "fridays" in out


def wait_for_child(server: int, caller: int | None = None) -> int:
    """The resident process's child; with `caller`, once it has taken over the caller's
    standard input (it then runs the command, with the usual Ctrl-C handling)."""
    deadline = time.monotonic() + 60
    while not children(server) or (caller and not same_stdin(children(server)[0], caller)):
        assert time.monotonic() < deadline, "no child ran the command"
        time.sleep(0.02)
    return children(server)[0]


def same_stdin(one: int, other: int) -> bool:
    try:
        return os.readlink(f"/proc/{one}/fd/0") == os.readlink(f"/proc/{other}/fd/0")
    except OSError:
        return False


def wait_for_state(pid: int, state: str) -> None:
    """Until /proc says `pid` is in `state` (T stopped, S sleeping)."""
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != state:
        assert time.monotonic() < deadline, f"process {pid} never reached state {state}"
        time.sleep(0.02)


@pytest.mark.slow
def test_a_caller_that_says_nothing_does_not_keep_a_child(env: dict[str, str]) -> None:
    server = start(env)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.connect(str(socket_of(env)))
        child = wait_for_child(server)
        deadline = time.monotonic() + 2 * RECEIVE_TIMEOUT
        while child in children(server):  # let go while the caller still holds its end
            assert time.monotonic() < deadline, "a silent caller kept a child"
            time.sleep(0.2)


def test_what_is_handed_over_depends_on_the_command_and_the_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIERMEM_RESIDENT", "1")
    for terminal in (True, False):
        monkeypatch.setattr(os, "isatty", lambda fd, terminal=terminal: terminal)
        assert client.on_terminal() is terminal
        for args in (["--home", "h", "retrieve", "x"], ["sync", "status"]):
            assert client.wanted(args) is True
            assert handed_over(args, client.on_terminal()) is not (terminal and args[0] == "sync")
        assert client.wanted([]) is False
        assert client.wanted(["tui"]) is True and handed_over(["tui"], terminal) is False
    monkeypatch.setenv("TIERMEM_RESIDENT", "0")
    assert client.wanted(["retrieve", "x"]) is False


def test_an_environment_over_the_request_limit_runs_the_command_here(
    env: dict[str, str], tmp_path: Path
) -> None:
    start(env)
    padded = env | {f"PADDING_{i}": "x" * 100_000 for i in range(12)}  # 1.2 MB in all
    assert sum(map(len, padded.values())) > client.MAX_REQUEST  # each under exec's 128 KB
    assert handed(["--help"], padded).returncode == NOT_HANDED
    done = run([*TIERMEM, "--home", str(tmp_path / "h"), "store", "--text", "a fact"], padded)
    assert done.returncode == 0, done.stderr
