"""`tiermem watch`: ingest daily notes and MEMORY.md edits as they happen."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import click

from tiermem.core.watch import Watcher, WatchEvent
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.reports import render_memory_md


@click.command(name="watch")
@click.argument("folder", required=False, type=click.Path(path_type=Path))
@click.option("--debounce", type=click.FloatRange(0.05, 60.0), help="Quiet seconds before ingest.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.0),
    help="Stop after this many seconds (default: never).",
)
@pass_options
def watch(
    opts: Options, folder: Path | None, debounce: float | None, timeout: float | None
) -> None:
    """Ingest new or edited daily notes and MEMORY.md edits as they happen (Ctrl-C stops).

    With --json, one JSON object per line for each ingestion."""

    def show(event: WatchEvent) -> None:
        payload: dict[str, Any] = {"path": str(event.path), "at": time.time()}
        text = f"{event.path.name}: "
        if event.error:
            payload["error"] = event.error
            text += f"error: {event.error}"
        elif event.daily is not None:
            payload["daily"] = vars(event.daily)
            d = event.daily
            text += f"{d.status}: {d.added} added, {d.merged} known, {d.forgotten} forgotten"
            if d.message:
                text += f" ({d.message})"
        elif event.memory_md is not None:
            payload["memory_md"] = event.memory_md.as_dict()
            text += "; ".join(render_memory_md(event.memory_md)[1:]) or "read back"
        emit(opts, payload, text)

    stop = threading.Event()
    with opts.open(create=True) as mem:
        watcher = Watcher(mem, folder, debounce=debounce)
        if not opts.json:
            click.echo(f"watching {watcher.folder} and {watcher.memory_md.name} (Ctrl-C stops)")
        if timeout is not None:

            def finish() -> None:
                stop.set()
                watcher.wake()

            timer = threading.Timer(timeout, finish)
            timer.daemon = True
            timer.start()
        with watcher:
            watcher.scan()
            with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way out
                watcher.run(stop, show)
