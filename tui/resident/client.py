"""The `tiermem` command's side of the resident process: hand the command over, or return None.

A command an agent's hook runs many times a day (`retrieve`, `store`, `hot`) spends most of its
time starting Python and importing the engine. When `tiermem resident start` has left a process
running with everything imported, this module passes it the command line, the environment, the
working folder and the three standard streams themselves (their file descriptors, over a Unix
socket), and waits for the exit code; the resident process forks a child that runs the command
exactly as this process would have. With no resident process, one that declines, or one that
does not answer within `TIERMEM_RESIDENT_TIMEOUT` seconds (frozen, swamped), the caller runs
the command itself.

Which commands the resident process runs is declared in the command registry
(`tiermem.tui.cli.registry`, `Lazy.resident`), which the resident process has loaded: it
declines the others. Every request opens with this client's protocol and tiermem version; a
resident process of another version or protocol declines and exits (see `server._child`).

It imports only built-in modules (`_socket`, `_signal`, `marshal`, `zlib`) and
`tiermem.core.version`: `socket` and `signal` build their enums at import, which alone costs more
than the whole hand-over.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub; `signal` imports enum
import _socket
import marshal
import os
import sys
import zlib

from tiermem.core.version import VERSION

TYPE_CHECKING = False  # not `typing`'s: see above
if TYPE_CHECKING:
    from collections.abc import Mapping

PROTOCOL = 3
"""Bumped whenever the request or the reply changes shape; sent first with `VERSION`, the
handshake a resident process of another protocol or version refuses."""

DISABLE = "TIERMEM_RESIDENT"
"""Set to 0 to never hand a command over (read here, not through `environment()`: see above)."""
TIMEOUT = "TIERMEM_RESIDENT_TIMEOUT"
"""Seconds to wait for the resident process to take a command before running it here."""
DEFAULT_TIMEOUT = 2.0
GO = b"\x01"
"""What the caller sends once it has the child's pid, with its standard streams: a child runs
the command only then, so a caller that gave up waiting (and runs the command itself) never has
it run twice, and a frozen resident process never holds the caller's streams open (a shell
reading the command's output would wait for them)."""

OPTIONS_WITH_VALUE = frozenset({"--home", "--agent-id"})
FORWARDED_SIGNALS = tuple(
    getattr(_signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTSTP")
    if hasattr(_signal, name)
)
MAX_REQUEST = 1 << 20
SUPPORTED = sys.platform == "linux"
"""It needs the kernel to name a socket's peer (SO_PEERCRED), which Python offers on Linux."""


def package_dir() -> str:
    """The installed `tiermem` package folder: a resident process serves only its own install."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def folders() -> list[str]:
    """Where the socket's folder may go, best first: the session's runtime folder when it is
    this user's alone, else the user's cache folder; never a shared folder such as /tmp, where
    another user could make the folder first."""
    found = []
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and private_folder(runtime):
        found.append(os.path.join(runtime, "tiermem"))
    cache = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(cache):
        cache = os.path.join(os.path.expanduser("~"), ".cache")
    if os.path.isabs(cache):
        found.append(os.path.join(cache, "tiermem", "run"))
    return found


def socket_dir() -> str:
    """The user's private folder for the socket (made 0700 by `tiermem resident start`): the
    first candidate that is ours alone or not made yet; one that is not ours alone (made by
    someone else, open to others, a symlink) is passed over, never used. Empty if none."""
    candidates = folders()
    for folder in candidates:
        if not os.path.lexists(folder) or private_folder(folder):
            return folder
    return candidates[-1] if candidates else ""


def socket_path() -> str:
    """One socket per install and Python: two venvs never answer for each other (empty when
    there is no folder for it)."""
    folder = socket_dir()
    key = f"{package_dir()}\0{sys.prefix}\0{sys.version}".encode()
    return os.path.join(folder, f"resident-{zlib.crc32(key):08x}.sock") if folder else ""


def hand_over_timeout(environ: Mapping[str, str]) -> float:
    """Seconds to wait for the child's pid: a frozen resident process costs a command no more."""
    try:
        seconds = float(environ.get(TIMEOUT, ""))
    except ValueError:
        return DEFAULT_TIMEOUT
    return seconds if 0 < seconds < 1e9 else DEFAULT_TIMEOUT  # NaN fails both


def command_of(args: list[str]) -> str | None:
    """The command name, past the global options; `--help` and `--version` count as commands."""
    i = 0
    while i < len(args):
        token = args[i]
        if token in OPTIONS_WITH_VALUE:
            i += 2
        elif token == "--json" or token.partition("=")[0] in OPTIONS_WITH_VALUE:
            i += 1
        elif token in ("-h", "--help", "--version"):
            return "--help"
        else:
            return None if token.startswith("-") else token
    return None


def wanted(args: list[str]) -> bool:
    """Whether to offer `args` to the resident process (which declines commands the registry
    keeps out of it): a command, on a system that has one, not turned off."""
    return command_of(args) is not None and SUPPORTED and os.environ.get(DISABLE, "1") != "0"


def on_terminal() -> bool:
    """Standard input and error both a terminal: where a command may ask for a hidden secret."""
    return os.isatty(0) and os.isatty(2)


def private(path: str) -> bool:
    """Ours alone: owned by this user and closed to everyone else (so a socket another user
    placed in a shared /tmp never receives our environment, which may hold secrets)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return info.st_uid == os.getuid() and not info.st_mode & 0o077


def private_folder(path: str) -> bool:
    """A folder that is ours alone, itself and not a symlink to one."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return info.st_mode & 0o170000 == 0o040000 and private(path)


def forward(args: list[str]) -> int | None:
    """Run `args` in the resident process and return its exit code; None if it cannot."""
    path = socket_path()
    if not (path and private_folder(os.path.dirname(path)) and private(path)):
        return None
    relay = _Relay()
    relay.install()  # from here a signal ends the wait, or is kept until the child can be told
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.settimeout(hand_over_timeout(os.environ))
        conn.connect(path)
        _send_request(conn, args)
        reply = _read(conn, 8)
        pid = int.from_bytes(reply, "little", signed=True) if len(reply) == 8 else 0
        if pid <= 0:
            relay.give_up()
            return None  # it declined (an install changed): run here
        relay.pid = pid  # from here a signal goes to the child
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        conn.sendmsg([GO], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        conn.settimeout(None)  # the command itself may take as long as it takes
        status = relay.wait(conn)
    except (OSError, _Interrupted):  # a timeout is an OSError too
        relay.give_up()
        return None
    finally:
        conn.close()
    if len(status) < 4:
        return 1  # the child died without a word (killed): a failure, not a success
    return int.from_bytes(status, "little", signed=True)


def _send_request(conn: _socket.socket, args: list[str]) -> None:
    own = (sys.stdin, sys.stdout, sys.stderr)  # each may be None (a closed descriptor at start)
    streams = [(getattr(s, "encoding", None), getattr(s, "errors", None)) for s in own]
    payload = marshal.dumps(
        (
            PROTOCOL,
            VERSION,
            package_dir(),
            args,
            os.getcwd(),
            dict(os.environ),
            _umask(),
            streams,
            on_terminal(),
        )
    )
    if len(payload) > MAX_REQUEST:
        raise OSError("request too large")
    conn.sendall(len(payload).to_bytes(4, "little") + payload)


class _Interrupted(Exception):
    """A signal came before the child was known: stop waiting for the resident process."""


class _Relay:
    """Passes the signals a terminal or a supervisor sends on to the child running the command;
    one that comes before the child is known ends the wait (Ctrl-Z waits for the child)."""

    def __init__(self) -> None:
        self.pid = 0
        self.early: list[int] = []
        self.installed: dict[int, object] = {}
        self.given_up = False

    def install(self) -> None:
        for signum in FORWARDED_SIGNALS:
            self.installed[signum] = _signal.signal(signum, self.relay)

    def relay(self, signum: int, _frame: object) -> None:
        if not self.pid:
            self.early.append(signum)
            if signum != _signal.SIGTSTP and not self.given_up:
                raise _Interrupted
        elif signum == _signal.SIGTSTP:
            self._suspend()
        else:
            self._send(signum)

    def _suspend(self) -> None:
        """Ctrl-Z: stop the child, then this process as the terminal asked; at `fg` (SIGCONT)
        this process goes on from here and lets the child go on too."""
        self._send(_signal.SIGSTOP)
        _signal.signal(_signal.SIGTSTP, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGTSTP)
        _signal.signal(_signal.SIGTSTP, self.relay)
        self._send(_signal.SIGCONT)

    def _send(self, signum: int) -> None:
        try:  # noqa: SIM105 (contextlib is not loaded this early)
            os.kill(self.pid, signum)
        except OSError:
            pass  # it has just ended

    def wait(self, conn: _socket.socket) -> bytes:
        """The child's exit status (4 bytes, or fewer if it died without a word)."""
        for signum in self.early:  # a Ctrl-Z while it was being handed over
            self.relay(signum, None)
        try:
            return _read(conn, 4)
        except OSError:
            return b""

    def give_up(self) -> None:
        """Restore the handlers, so the command runs here; a signal that came while it was
        being handed over then acts as on a direct run: Ctrl-C interrupts, SIGTERM ends this
        process, Ctrl-Z stops it, an ignored one is ignored."""
        self.given_up = True  # a signal from here on is only kept
        for signum, handler in self.installed.items():
            _signal.signal(signum, handler)
        for signum in self.early:
            os.kill(os.getpid(), signum)


def _read(conn: _socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask
