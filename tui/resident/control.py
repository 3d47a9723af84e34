"""Start, stop and report the resident process (what `tiermem resident` does).

Beside its socket the process keeps a lock file (held for its whole life, with its pid in it)
and a log file (what it writes on standard error). A clean end removes the socket and the lock;
`stop` removes what a killed process left, and the log unless it holds something.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from tiermem.core.environment import VARIABLES
from tiermem.core.errors import ResidentFailed
from tiermem.core.locks import owner, take_lock
from tiermem.tui.resident import client

SERVER = "tiermem.tui.resident.server"
SECRETS = frozenset(v.name for v in VARIABLES if v.secret)
"""What the resident process never keeps: each caller brings its own in its request."""
MAX_SOCKET_PATH = 107
"""The longest path a Unix socket can be bound to on Linux (108 bytes with the final NUL)."""
STOP_TIMEOUT = 10.0
"""Seconds `stop` gives the process to end after SIGTERM before it kills it."""
KILL_TIMEOUT = 5.0
"""Seconds to wait for the kernel to end it after SIGKILL."""


@dataclass(frozen=True)
class Status:
    """Whether the resident process answers on its socket, and its pid (the kernel's word)."""

    running: bool
    pid: int | None
    socket: str


@dataclass(frozen=True)
class Stopped:
    """What `stop` did: the process it ended (None if none ran), whether it had to kill it, and
    the log it kept because it holds something (None when removed)."""

    pid: int | None
    killed: bool
    socket: str
    log: str | None


def status() -> Status:
    path = client.socket_path()
    pid = _listener(path) if path and client.private_folder(os.path.dirname(path)) else None
    return Status(pid is not None, pid, path)


def scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the secrets: a process that lives for days keeps none of them."""
    return {name: value for name, value in environ.items() if name not in SECRETS}


def make_folder(path: str) -> None:
    """Make the socket's folder for `path` (0700), or refuse one that is not ours alone."""
    folder = os.path.dirname(path)
    if not path:
        raise ResidentFailed("no folder for its socket: set XDG_RUNTIME_DIR or HOME")
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ResidentFailed(f"{path} is too long for a socket: set XDG_RUNTIME_DIR")
    os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, mode=0o700)
    if not client.private_folder(folder):
        raise ResidentFailed(f"{folder} must be owned by you and closed to others (mode 0700)")


def start(timeout: float = 60.0) -> Status:
    """Start it in its own session (it outlives this command) and wait until it listens."""
    if not client.SUPPORTED:
        raise ResidentFailed("the resident process runs on Linux only (it checks who connects)")
    current = status()
    if current.running:
        return current
    make_folder(current.socket)
    log = log_path(current.socket)
    read, write = os.pipe()
    with open(log, "wb") as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", SERVER, str(write)],
            pass_fds=(write,),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            cwd="/",
            env=scrubbed(os.environ),
        )
    os.close(write)
    try:
        ready = select.select([read], [], [], timeout)[0] and os.read(read, 16)
    finally:
        os.close(read)
    if not ready:
        child.kill()
        child.wait()
        return _started_elsewhere(timeout) or _failed(log)
    return Status(True, child.pid, current.socket)


def stop(timeout: float = STOP_TIMEOUT) -> Stopped:
    """End it and wait until it has: SIGTERM (and SIGCONT, should it be stopped), then SIGKILL
    after `timeout` seconds; found by its socket, or by its lock while it is still starting.
    Then remove what it left beside the socket. Commands it is running go on to their end."""
    current = status()
    pid = current.pid or _starting(current.socket)
    killed = False
    if pid is not None:
        killed = not _end(pid, timeout)
    _clean(current.socket)
    log = log_path(current.socket)
    return Stopped(pid, killed, current.socket, log if os.path.exists(log) else None)


def _starting(path: str) -> int | None:
    """The pid a resident process recorded in its lock, when it holds it but does not listen
    (yet): it is still loading."""
    pid = owner(Path(lock_path(path))) if path else None
    return pid if pid is not None and _is_resident(pid) else None


def _is_resident(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return SERVER.encode() in file.read().split(b"\0")
    except OSError:
        return False


def _end(pid: int, timeout: float) -> bool:
    """Whether `pid` ended within `timeout` of SIGTERM; killed otherwise (ResidentFailed if even
    that does not end it). A pidfd names the process, never a later one given the same pid."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        for signum in (signal.SIGTERM, signal.SIGCONT):
            signal.pidfd_send_signal(pidfd, signum)
        if select.select([pidfd], [], [], timeout)[0]:
            return True
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        if not select.select([pidfd], [], [], KILL_TIMEOUT)[0]:
            raise ResidentFailed(f"the resident process (pid {pid}) did not end, even killed")
        return False
    except ProcessLookupError:  # it ended between two steps
        return True
    finally:
        os.close(pidfd)


def _clean(path: str) -> None:
    """Remove the socket, the lock and an empty log that no resident process uses: while this
    holds the lock, none starts (`take_lock` makes one that opened the old file take the new)."""
    if not path or not client.private_folder(os.path.dirname(path)):
        return
    lock = take_lock(Path(lock_path(path)))
    if lock is None:  # another resident process is starting: these are its files
        return
    try:
        log = log_path(path)
        with contextlib.suppress(OSError):
            if os.path.getsize(log) == 0:
                os.unlink(log)
        for leftover in (path, lock_path(path)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
    finally:
        os.close(lock)


def lock_path(socket_path: str) -> str:
    """Held by the resident process for its whole life: one per socket."""
    return socket_path.removesuffix(".sock") + ".lock"


def log_path(socket_path: str) -> str:
    """What the resident process writes on standard error (its start's failure, a crash)."""
    return socket_path.removesuffix(".sock") + ".log"


def _started_elsewhere(timeout: float) -> Status | None:
    """The resident process another `start` is bringing up (it holds the lock), once ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = status()
        if current.running:
            return current
        fd = take_lock(Path(lock_path(current.socket)))
        if fd is not None:  # nobody holds it: nothing else is starting
            os.close(fd)
            return None
        time.sleep(0.05)
    return None


def _failed(log: str) -> NoReturn:
    raise ResidentFailed(f"the resident process did not start: {_last_line(log)}")


def _last_line(log: str) -> str:
    try:
        with open(log, encoding="utf-8", errors="replace") as file:
            lines = file.read().strip().splitlines()
    except OSError:
        lines = []
    return lines[-1] if lines else "it exited without a word"


def _listener(path: str) -> int | None:
    """The pid of the process listening on `path` (the kernel's word), or None."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
        except OSError:
            return None
        return peer(conn)[0]


def peer(conn: socket.socket) -> tuple[int, int, int]:
    """pid, uid, gid of the process at the other end (the kernel's word, not the peer's)."""
    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid, uid, gid = (int.from_bytes(raw[i : i + 4], sys.byteorder) for i in (0, 4, 8))
    return pid, uid, gid
