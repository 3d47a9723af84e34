"""`tiermem resident`: keep a process with the engine loaded, so commands start at once."""

from __future__ import annotations

import click

from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.resident import control


@click.group("resident")
def resident_group() -> None:
    """Keep a process with tiermem loaded, so that commands start at once.

    While it runs, `tiermem store`, `retrieve`, `hot` and the other non-interactive commands
    are handed to it instead of starting Python and importing the engine each time; the
    results, exit codes and Ctrl-C are the same. It serves only this user and this install,
    and stops by itself when an installed file changes. TIERMEM_RESIDENT=0 turns the hand-over
    off for one command.
    """


def _report(opts: Options, status: control.Status) -> None:
    state = f"running (pid {status.pid})" if status.running else "not running"
    payload = {"running": status.running, "pid": status.pid, "socket": status.socket}
    emit(opts, payload, f"resident process {state}\nsocket: {status.socket}")


@resident_group.command("start")
@pass_options
def start(opts: Options) -> None:
    """Start the resident process (nothing happens if it runs already)."""
    _report(opts, control.start())


@resident_group.command("stop")
@pass_options
def stop(opts: Options) -> None:
    """Stop the resident process; commands start Python themselves again."""
    _report(opts, control.stop())


@resident_group.command("status")
@pass_options
def status(opts: Options) -> None:
    """Whether the resident process runs, its pid and its socket."""
    _report(opts, control.status())
