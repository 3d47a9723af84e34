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
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 3600.0),
    default=control.STOP_TIMEOUT,
    show_default=True,
    help="Seconds it gets to end after SIGTERM before it is killed.",
)
@pass_options
def stop(opts: Options, timeout: float) -> None:
    """Stop the resident process and wait until it has ended; commands start Python themselves
    again. Its socket and lock go with it, and its log too unless it holds something."""
    stopped = control.stop(timeout)
    payload = {
        "running": False,
        "stopped": stopped.pid is not None,
        "pid": stopped.pid,
        "killed": stopped.killed,
        "socket": stopped.socket,
        "log": stopped.log,
    }
    emit(opts, payload, _stopped_text(stopped, timeout))


def _stopped_text(stopped: control.Stopped, timeout: float) -> str:
    if stopped.pid is None:
        said = "resident process was not running"
    elif stopped.killed:
        late = f"it had not ended {timeout:g} s after SIGTERM"
        said = f"resident process killed (pid {stopped.pid}): {late}"
    else:
        said = f"resident process stopped (pid {stopped.pid})"
    return said + (f"\nits log, kept: {stopped.log}" if stopped.log else "")


@resident_group.command("status")
@pass_options
def status(opts: Options) -> None:
    """Whether the resident process runs, its pid and its socket."""
    _report(opts, control.status())
