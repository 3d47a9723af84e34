"""The long-running `daemon` command, alone: the resident process neither runs nor preloads it."""

from __future__ import annotations

import json
import signal
import sys
from types import FrameType
from typing import Any

import click

from tiermem.sync.daemon import DEFAULT_POLL, DEFAULT_PULL_INTERVAL, Daemon
from tiermem.tui.cli.commands.sync_transfer import BATCH_KB
from tiermem.tui.cli.options import Options, pass_options


@click.command(name="daemon")
@click.option(
    "--poll",
    type=click.FloatRange(0.05, 60.0),
    default=DEFAULT_POLL,
    show_default=True,
    help="Seconds between checks for local changes when the file watcher cannot start.",
)
@click.option(
    "--pull-interval",
    type=click.FloatRange(1.0, 86400.0),
    default=DEFAULT_PULL_INTERVAL,
    show_default=True,
    help="Seconds between pulls of other devices' changes (and one pull at start).",
)
@BATCH_KB
@pass_options
def daemon_cmd(opts: Options, poll: float, pull_interval: float, batch_kb: int) -> None:
    """Sync in the background until SIGTERM: push local changes, pull other devices'."""
    opts.start_log()

    def report(event: dict[str, Any]) -> None:
        if opts.json:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
            return
        kind = event["event"]
        if kind == "pushed":
            line = (
                f"pushed {event['version']} ({event['changes']} critical change(s), "
                f"{event['memories']} memory record(s))"
            )
        elif kind == "pulled":
            line = f"pulled {event['applied']} record(s)"
            if event["rejected"]:
                line += f"; {event['rejected']} REJECTED (run `tiermem sync check`)"
        elif kind == "retry":
            line = f"retrying in {event['wait']:.1f} s: {event['error']}"
        elif kind == "error":
            line = f"error: {event['error']} (trying again in {event['retry_in']:.0f} s)"
        else:
            line = " ".join(f"{k}={v}" for k, v in event.items() if k != "event")
            line = f"{kind} {line}".strip()
        click.echo(f"tiermem daemon: {line}", err=True)

    with opts.open() as mem:
        daemon = Daemon(
            mem,
            poll=poll,
            report=report,
            pull_interval=pull_interval,
            batch_bytes=batch_kb * 1024,
        )

        def on_signal(signum: int, frame: FrameType | None) -> None:
            daemon.stop()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            daemon.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
