"""CLI commands that tell what this device knows of sync, without the network: `sync log|status`."""

from __future__ import annotations

import time
from dataclasses import asdict

import click

from tiermem.sync.engine import SyncEngine, SyncEvent, SyncStatus
from tiermem.tui.cli.options import Options, emit, pass_options


def _when(ts: float | None) -> str:
    return "never" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def _log_text(events: list[SyncEvent]) -> str:
    if not events:
        return "no sync activity recorded yet"
    lines = []
    for e in events:
        size = f"{e.bytes / 1024:.0f} KiB" if e.bytes else "-"
        lines.append(
            f"{_when(e.at)}  {e.kind:<5}  {e.records:>5} record(s)  {size:>8}  "
            f"{(e.version or '-')[:25]}  {e.note}"
        )
    return "\n".join(lines)


@click.command(name="log")
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=20, show_default=True, help="Entries."
)
@pass_options
def sync_log(opts: Options, limit: int) -> None:
    """Recent pushes, pulls and errors of this device, newest first (no network)."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        events = engine.history(limit)
    emit(opts, {"events": [asdict(e) for e in events]}, lambda: _log_text(events))


def _status_text(s: SyncStatus) -> str:
    if s.status is None:
        lines = [f"sync: not set up for agent {s.agent_id!r} (run `tiermem sync init --url URL`)"]
    elif s.status == "pending":
        lines = ["sync: `sync init` did not finish; run it again"]
    else:
        lines = [
            f"sync: ready · {s.url} · agent {s.agent_id!r} · device {(s.device_id or '')[:12]}… "
            f"· epoch {s.epoch}"
        ]
    age = "" if s.oldest_pending_at is None else f", oldest from {_when(s.oldest_pending_at)}"
    lines.append(f"outbox: {s.pending} critical change(s) waiting{age}")
    lines.append(
        f"memories: {s.pending_memories} changed record(s) waiting"
        + (f", {s.inflight_batches} request(s) in flight" if s.inflight_batches else "")
    )
    if s.pending_graph:
        lines.append(f"episodes and entities: {s.pending_graph} changed record(s) waiting")
    if s.inflight_version:
        lines.append(f"in flight: {s.inflight_version} (sent again until confirmed)")
    if s.status is not None:
        lines.append(
            f"last push: {_when(s.last_push_at)} ({s.pushes} push(es) from this home; "
            f"version {s.last_push_version or '-'})"
        )
        lines.append(
            f"last pull: {_when(s.last_pull_at)} ({s.pulls} pull(s); cursor {s.pull_cursor})"
        )
        if s.last_attempt_at is not None:
            outcome = "ok" if s.last_attempt_ok else "FAILED"
            lines.append(
                f"last background push: {_when(s.last_attempt_at)} by the {s.last_attempt_by}, "
                f"{outcome}: {s.last_attempt_message}"
            )
        lines += _trouble_lines(s)
        if s.last_error:
            retry = "" if s.retry_at is None else f"; next try at {_when(s.retry_at)}"
            lines.append(f"last error: {s.last_error} ({_when(s.last_error_at)}{retry})")
        lines.append(
            f"secrets: {s.secret_store} store · token: {s.token_source} · "
            f"passphrase: {'on' if s.passphrase else 'off'}"
        )
    return "\n".join(lines)


def _trouble_lines(s: SyncStatus) -> list[str]:
    """Rows that failed authentication and a clock set too far ahead, for `sync status`."""
    lines = [
        f"REJECTED: record {r['record_id'][:16]}… version {r['version']} ({r['reason']});"
        " fetched again by every pull"
        for r in s.rejected[:10]
    ]
    if len(s.rejected) > 10:
        lines.append(f"REJECTED: {len(s.rejected) - 10} more (see --json)")
    if s.clock_ahead:
        lines.append(f"clock: {s.clock_ahead} is more than a day ahead; the next push sets it back")
    return lines


@click.command(name="status")
@pass_options
def sync_status(opts: Options) -> None:
    """Show sync settings, the outbox and the last push or error (no network)."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        status = engine.status()
    emit(opts, asdict(status), lambda: _status_text(status))
