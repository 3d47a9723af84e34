"""`tiermem logs`: the end of the home's log file (daemon, sync, consolidation), secrets masked."""

from __future__ import annotations

from collections import deque

import click

from tiermem.core.errors import NotFound
from tiermem.core.logs import log_path
from tiermem.tui.cli.options import Options, emit, pass_options


@click.command(name="logs")
@click.option("-n", "--lines", default=50, show_default=True, type=click.IntRange(min=1))
@click.option("--path", "path_only", is_flag=True, help="Print only the log file's path.")
@pass_options
def logs(opts: Options, lines: int, path_only: bool) -> None:
    """Show the end of the log written by the daemon, sync and consolidation."""
    path = log_path(opts.resolved_home())
    if path_only:
        emit(opts, {"path": str(path)}, str(path))
        return
    if not path.is_file():
        raise NotFound(f"no log yet at {path}: the daemon, sync and consolidation write it")
    with path.open(encoding="utf-8", errors="replace") as handle:
        tail = [line.rstrip("\n") for line in deque(handle, maxlen=lines)]
    emit(opts, {"path": str(path), "lines": tail}, "\n".join(tail) or "(the log is empty)")
