"""The resident process: the engine imported once, a child forked for each command.

Each request brings the caller's command line, environment, working folder and umask; its three
standard streams (file descriptors passed over the socket) come with its go. A child takes them over and runs
the command as `tiermem` itself would, so output, prompts on standard input, exit codes and
Ctrl-C behave the same; the caller relays signals to it and exits with its code. The process
stays single-threaded, so forking it is safe, and it holds no database open: every child opens
its own connections, as a new process would.

A child declines a command the registry keeps out of this process (`Lazy.resident`), and the
caller runs it itself. It declines and stops this process when a file it imported has changed
since (an upgrade, an edit) or when the caller speaks another protocol or is another tiermem
version: the caller runs the command on its own files, and a service manager starts this process
again on them (`EXIT_RENEW`). A child runs the command
only once the caller, given its pid, says go (a caller that gave up waiting runs it itself), and
it dies with its caller: the kernel kills its process group when the caller's end of the socket
closes before the command has ended, even while it is stopped.

This process keeps no secret variable of the environment it was started in: `main` starts
itself again without them (each caller brings its own in its request).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import io
import os
import pkgutil
import select
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final, Literal

from tiermem.core import tokens
from tiermem.core.errors import EXIT_INTERRUPTED
from tiermem.core.locks import record_owner, take_lock
from tiermem.core.version import VERSION
from tiermem.sync.vault.transport import tls_context
from tiermem.tui.cli.registry import GROUPS, ROOT
from tiermem.tui.resident import client
from tiermem.tui.resident.control import (
    SECRETS,
    SERVER,
    lock_path,
    log_path,
    make_folder,
    peer,
    scrubbed,
)

PRELOADED = ("tiermem.core", "tiermem.ops", "tiermem.tui.cli")
"""Packages imported whole before serving: everything a forwarded command may need."""
IMPORTED_LATER = (
    *("libsql_experimental", "sqlite3", "tiermem.tui.entry"),
    # what httpx and cryptography load on first use (a client's transport, the OpenSSL backend)
    *("httpcore", "h11", "encodings.idna", "cryptography.hazmat.backends.openssl"),
)
"""What commands import only when they run, named here: a child's own imports die with it."""

EXIT_RENEW = 75
"""How it exits when a child found an installed file changed (an upgrade) or met a caller of
another version: a service manager starts it again, on the new files (`tiermem service install
--resident`). Stopped any other way
(`tiermem resident stop`, SIGTERM), it exits 0 and stays stopped."""

RECEIVE_TIMEOUT = 30.0
"""A caller that connects and sends nothing is let go after this long (seconds)."""


@dataclass(frozen=True)
class Request:
    """What a caller sends: the command and everything it runs with."""

    package: str
    args: list[str]
    cwd: str
    environ: dict[str, str]
    umask: int
    streams: list[tuple[str | None, str | None]]
    terminal: bool  # the caller's standard input and error are both a terminal


SKEW: Final = "skew"
"""What `_receive` finds when the caller is of another protocol or tiermem version."""


def handed_over(args: list[str], terminal: bool) -> bool:
    """Whether the command registry lets this process run `args` (`Lazy.resident`)."""
    command = client.command_of(args)
    if command == "--help":
        return True
    declared = ROOT[command].resident if command in ROOT else "never"
    if command is not None and command in GROUPS:  # "sync local-server" declares its own
        sub = next((a for a in args[args.index(command) + 1 :] if not a.startswith("-")), "")
        declared = GROUPS[command][sub].resident if sub in GROUPS[command] else declared
    return declared == "always" or (declared == "unless-terminal" and not terminal)


def preload() -> dict[str, int]:
    """Import what commands use and load what they would load on first use (the tokenizer, the
    CA store); return each imported tiermem file's modification time."""
    from tiermem.tui.cli import app

    handed = sorted(name for name, lazy in ROOT.items() if lazy.resident != "never")
    # the modules of commands never handed over (the TUI, the MCP server): their libraries
    # would only make the process, and each fork of it, bigger
    unused = {lazy.module for lazy in ROOT.values()} - {ROOT[name].module for name in handed}
    for name in PRELOADED:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, f"{name}."):
            if info.name not in unused:
                importlib.import_module(info.name)
    for name in IMPORTED_LATER:
        with contextlib.suppress(ImportError):  # libSQL's wheel is missing on some platforms
            importlib.import_module(name)
    for name in handed:
        app.add_command(ROOT[name].load(), name)
    tokens.load()  # 0.15 s and about 45 MB, once: a read after a store counts the new memory
    tls_context()  # the CA store every https client uses, about 20 ms
    return stamp()


def stamp() -> dict[str, int]:
    """Modification times that change on an upgrade or an edit: every loaded module file of
    this install, and every folder on the import path (installing or removing any package
    adds or removes an entry there)."""
    root = client.package_dir()
    files = [getattr(module, "__file__", None) for module in list(sys.modules.values())]
    paths = [p for p in files if p and p.startswith(root)] + [p for p in sys.path if p]
    times: dict[str, int] = {}
    for path in paths:
        with contextlib.suppress(OSError):
            times[path] = os.stat(path).st_mtime_ns
    return times


def changed(loaded: dict[str, int]) -> bool:
    for path, mtime in loaded.items():
        try:
            if os.stat(path).st_mtime_ns != mtime:
                return True
        except OSError:
            return True
    return False


def listen(path: str) -> socket.socket:
    """Bind the socket in a folder only this user can enter, the socket itself 0600."""
    folder = os.path.dirname(path)
    if not client.private(folder):
        raise OSError(f"{folder} is not private to this user (mode 0700, owned by us)")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # left by a process that died: the lock says none runs
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(mask)
    sock.listen(64)
    return sock


def serve(path: str, ready: int | None = None) -> None:
    """Preload, listen on `path`, then fork a child per connection until SIGTERM (exit 0) or
    until a child finds the install changed (`EXIT_RENEW`)."""
    make_folder(path)
    lock = take_lock(Path(lock_path(path)))  # held until this process ends
    if lock is None:  # what was asked for runs already: not a failure to restart on
        sys.stderr.write("another resident process is starting or running\n")
        raise SystemExit(0)
    record_owner(lock)  # how `tiermem resident stop` finds it before it listens
    lock_inode = os.fstat(lock).st_ino
    loaded = preload()
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        raise RuntimeError("a thread started while importing: forking would be unsafe")
    sock = listen(path)
    inode = os.stat(path).st_ino
    sock.setblocking(False)  # woken by `select`: a caller that hung up never blocks the loop
    wake = _handle_signals()
    if ready is not None:
        os.write(ready, b"ready\n")
        os.close(ready)
    try:
        while not _ending:
            readable = select.select([sock.fileno(), wake], [], [])[0]
            if wake in readable:
                _drain(wake)
            if sock.fileno() in readable:
                _accept(sock, lock, wake, loaded)
        raise SystemExit(_ending[0])
    finally:  # a stop ends here, keeping its exit code
        _remove_if_ours(path, inode)
        _remove_if_ours(lock_path(path), lock_inode)
        if os.fstat(2).st_size == 0:  # its log, when `start` made one, says nothing: no need
            _remove_if_ours(log_path(path), os.fstat(2).st_ino)
        sock.close()


def _remove_if_ours(path: str, inode: int) -> None:
    """Remove the socket or lock file this process made, unless a newer process owns the path by
    now."""
    with contextlib.suppress(OSError):
        if os.stat(path).st_ino == inode:
            os.unlink(path)


def _handle_signals() -> int:
    """Install the handlers of the serving loop; return the descriptor they wake it through.

    A handler only records a stop (`_ending`) and the loop, woken, acts on it: a handler that
    raised could run inside a fork's own callbacks (logging registers one), where its exception
    is swallowed with a traceback on standard error."""
    wake, wake_up = os.pipe()
    for fd in (wake, wake_up):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_up)
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGUSR1, _renew)
    return wake


def _drain(wake: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(wake, 256):
            pass


def _accept(sock: socket.socket, lock: int, wake: int, loaded: dict[str, int]) -> None:
    """Fork a child for the caller that connected (if it is this user)."""
    try:
        conn, _ = sock.accept()
    except (BlockingIOError, InterruptedError):  # it hung up before we got to it
        return
    with conn:
        conn.setblocking(True)
        if peer(conn)[1] != os.getuid() or os.fork() != 0:
            return
        try:
            _as_child(sock, lock, wake)
            _child(conn, loaded)
        finally:
            os._exit(1)  # a child never returns into the serving loop


def _as_child(sock: socket.socket, lock: int, wake: int) -> None:
    """What a forked child first lets go of: the listening socket, the lock (it ends with the
    resident process, not its children), the wake-up pipe and the loop's signal handlers; a
    stop that reached it before that ends it."""
    sock.close()
    os.close(lock)
    signal.set_wakeup_fd(-1)
    os.close(wake)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if _ending:
        os._exit(1)


def _reap(_signum: int, _frame: FrameType | None) -> None:
    """Collect ended children, so their CPU time counts in this process's children's times."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


_ending: list[int] = []
"""The exit code a stop asked for; the serving loop ends with it."""


def _stop(_signum: int, _frame: FrameType | None) -> None:
    _ending.append(0)


def _renew(_signum: int, _frame: FrameType | None) -> None:
    _ending.append(EXIT_RENEW)


def _child(conn: socket.socket, loaded: dict[str, int]) -> None:
    """Run one request in this forked child, report its exit code, and never return."""
    code = 1
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # a Ctrl-C waits for the command
        os.setpgid(0, 0)  # a group of its own: what the command starts dies with it
        conn.settimeout(RECEIVE_TIMEOUT)
        request = _receive(conn)
        stale = request == SKEW or (request is not None and changed(loaded))
        if not isinstance(request, Request) or stale or not _serves(request):
            conn.sendall((0).to_bytes(8, "little"))
            if stale:
                os.kill(os.getppid(), signal.SIGUSR1)  # out of date: let the next start renew it
            os._exit(0)
        conn.sendall(os.getpid().to_bytes(8, "little", signed=True))
        fds = _go(conn)
        if fds is None:
            os._exit(0)  # the caller gave up waiting: it runs the command itself
        conn.settimeout(None)
        _die_with_caller(conn)
        _adopt(request, fds)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # one that came lands now
        from tiermem.tui.entry import run_here

        code = run_here(request.args)
    except KeyboardInterrupt:  # a Ctrl-C before the command's own handling began
        code = EXIT_INTERRUPTED
        with contextlib.suppress(Exception):
            print("tiermem: error: interrupted", file=sys.stderr)
    except BaseException:  # nothing may escape into the server's loop
        code = 1
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut this short
            signal.signal(signum, signal.SIG_IGN)
        if "logging" in sys.modules:  # as a direct run's exit would: the home's log flushed
            sys.modules["logging"].shutdown()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        with contextlib.suppress(OSError):
            _live_after_caller(conn)  # the caller reads the code, then hangs up: not a death
            conn.sendall(code.to_bytes(4, "little", signed=True))
        os._exit(code)


def _serves(request: Request) -> bool:
    """A caller of this install, with a command this process may run."""
    return request.package == client.package_dir() and handed_over(request.args, request.terminal)


def _die_with_caller(conn: socket.socket) -> None:
    """Have the kernel SIGKILL this child's process group as soon as the caller's end of `conn`
    closes (the caller killed, even by SIGKILL), as the command would have died with a direct
    run; the kernel does it, so it works while the child is stopped or busy."""
    fcntl.fcntl(conn, fcntl.F_SETOWN, -os.getpgrp() if os.getpgrp() == os.getpid() else os.getpid())
    fcntl.fcntl(conn, fcntl.F_SETSIG, signal.SIGKILL)  # instead of SIGIO
    fcntl.fcntl(conn, fcntl.F_SETFL, fcntl.fcntl(conn, fcntl.F_GETFL) | os.O_ASYNC)
    if select.select([conn], [], [], 0)[0]:  # it hung up before that: nothing tells us again
        os._exit(1)


def _live_after_caller(conn: socket.socket) -> None:
    """Undo `_die_with_caller`: the command has ended."""
    fcntl.fcntl(conn, fcntl.F_SETFL, fcntl.fcntl(conn, fcntl.F_GETFL) & ~os.O_ASYNC)


def _receive(conn: socket.socket) -> Request | Literal["skew"] | None:
    """The caller's request; `SKEW` when it opens with another protocol or version (the
    handshake), None when it is no request at all."""
    import marshal

    header = b"".join(_chunks(conn, 4))
    size = int.from_bytes(header, "little")
    if not 0 < size <= client.MAX_REQUEST:
        return None
    fields = marshal.loads(b"".join(_chunks(conn, size)))
    if not isinstance(fields, tuple) or len(fields) < 2:
        return None
    if fields[:2] != (client.PROTOCOL, VERSION):
        return SKEW
    package, args, cwd, environ, umask, streams, terminal = fields[2:]
    return Request(package, list(args), cwd, dict(environ), umask, list(streams), bool(terminal))


def _go(conn: socket.socket) -> list[int] | None:
    """The caller's standard streams, sent with its go; None if it hung up instead."""
    data, ancillary, _, _ = conn.recvmsg(1, socket.CMSG_SPACE(3 * 4))
    fds = [
        int.from_bytes(raw[i : i + 4], sys.byteorder, signed=True)
        for level, kind, raw in ancillary
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
        for i in range(0, len(raw) - len(raw) % 4, 4)
    ]
    return fds if data == client.GO and len(fds) == 3 else None


def _chunks(conn: socket.socket, size: int) -> Iterator[bytes]:
    while size > 0:
        chunk = conn.recv(min(size, 1 << 16))
        if not chunk:
            raise EOFError("the caller hung up")
        size -= len(chunk)
        yield chunk


def _adopt(request: Request, fds: list[int]) -> None:
    """Become the caller: its streams, folder, environment and umask."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.environ)
    os.umask(request.umask)
    unbuffered = bool(request.environ.get("PYTHONUNBUFFERED"))
    for fd, (encoding, errors) in enumerate(request.streams):
        binary = open(fd, "rb" if fd == 0 else "wb", closefd=False)  # noqa: SIM115 (kept open)
        stream = io.TextIOWrapper(
            binary,
            encoding=encoding or "utf-8",
            errors=errors or "strict",
            line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
            write_through=unbuffered and fd != 0,
        )
        name = ("stdin", "stdout", "stderr")[fd]
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    sys.argv = ["tiermem", *request.args]


def main() -> None:
    """`python -m tiermem.tui.resident.server [READY_FD]` (what `tiermem resident start` runs)."""
    if SECRETS & set(os.environ):  # removing them here would leave them in /proc/PID/environ
        os.execve(
            sys.executable,
            [sys.executable, "-m", SERVER, *sys.argv[1:]],
            scrubbed(os.environ),
        )
    ready = int(sys.argv[1]) if len(sys.argv) > 1 else None
    serve(client.socket_path(), ready)


if __name__ == "__main__":
    main()
