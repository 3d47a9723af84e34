"""CLI commands that move data with the server now: `sync push|pull|now` (the agent's own
vault, then every shared space the agent includes: `sync.spaces.vaults`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

import click

from tiermem.core.errors import RejectedRecords
from tiermem.sync.engine import DEFAULT_BATCH_BYTES, PullResult, PushResult, SyncEngine, SyncStatus
from tiermem.sync.spaces import vaults
from tiermem.sync.state import SyncFailed
from tiermem.sync.vault.hrana import HranaError
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.prompts import retry_policy

_ATTEMPTS = click.option(
    "--attempts",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="Tries per request before giving up (waits of up to 5, 10, 20, 40 s between them).",
)
BATCH_KB = click.option(
    "--batch-kb",
    type=click.IntRange(16, 64 * 1024),
    default=DEFAULT_BATCH_BYTES // 1024,
    show_default=True,
    help="Sealed kilobytes per push request: a bigger push is split into several requests.",
)


@contextmanager
def _push_failures(engine: SyncEngine) -> Iterator[None]:
    """A push that fails for good says what stays queued, and keeps its exit code."""
    try:
        yield
    except HranaError as exc:
        status = engine.status()
        raise SyncFailed(
            f"push failed: {exc}; {_queued(status)} stay queued for the next push",
            exc.exit_code,
        ) from None


def _queued(s: SyncStatus) -> str:
    """What waits for the next push: critical changes and changed memories."""
    return f"{s.pending} critical change(s) and {s.pending_memories} changed memory record(s)"


def _raise_rejected(result: PullResult) -> None:
    """A pull that leaves records unapplied exits non-zero (after its report is printed)."""
    if result.rejected:
        raise RejectedRecords(
            f"{result.rejected} record(s) failed authentication and were not applied; every "
            "pull fetches them again (`tiermem sync status` lists them, `tiermem sync check` "
            "tells what is damaged)"
        )


@contextmanager
def _pull_failures() -> Iterator[None]:
    try:
        yield
    except HranaError as exc:
        raise SyncFailed(
            f"pull failed: {exc}; the next pull resumes where this one stopped", exc.exit_code
        ) from None


def _push_text(result: PushResult) -> str:
    if not result.pushed:
        return result.note
    return (
        f"pushed version {result.version} ({result.changes} critical change(s), "
        f"{result.memories} memory record(s), {result.requests} request(s), "
        f"{result.bytes / 1024:.0f} KiB, {result.seconds * 1000:.0f} ms)"
    )


def _pull_text(result: PullResult) -> str:
    text = (
        f"pulled: {result.memories} memory record(s) and {result.critical} critical state(s) "
        f"applied, {result.skipped} older or superseded, {result.pages} page(s), "
        f"{result.seconds * 1000:.0f} ms"
    )
    if result.conflicts:
        text += f"\n{result.conflicts} conflict(s) kept: see `tiermem sync conflicts`"
    if result.repaired or result.gone:
        text += (
            f"\n{result.repaired} record(s) rejected earlier now authenticate (or were "
            f"replaced); {result.gone} no longer on the server"
        )
    if result.rejected:
        text += (
            f"\nWARNING: {result.rejected} record(s) failed authentication and were NOT "
            "applied (run `tiermem sync check`)"
        )
    return text


@click.command(name="push")
@_ATTEMPTS
@BATCH_KB
@pass_options
def sync_push(opts: Options, attempts: int, batch_kb: int) -> None:
    """Push what changed: critical state and changed memories (one request per batch)."""
    with (
        opts.open() as mem,
        SyncEngine(mem, batch_bytes=batch_kb * 1024) as engine,
        _push_failures(engine),
    ):
        policy = retry_policy(opts, attempts)
        result = engine.push(policy)
        shared = vaults.sync_included(mem, policy, pull=False)
    emit(opts, asdict(result) | _spaces_dict(shared), _push_text(result) + _spaces_text(shared))


@click.command(name="pull")
@_ATTEMPTS
@pass_options
def sync_pull(opts: Options, attempts: int) -> None:
    """Fetch and apply what other devices pushed since the last pull."""
    with opts.open() as mem, SyncEngine(mem) as engine, _pull_failures():
        policy = retry_policy(opts, attempts)
        result = engine.pull(policy)
        shared = vaults.sync_included(mem, policy, push=False)
    emit(opts, asdict(result) | _spaces_dict(shared), _pull_text(result) + _spaces_text(shared))
    _raise_rejected(result)
    vaults.raise_refused(shared)


@click.command(name="now")
@_ATTEMPTS
@BATCH_KB
@pass_options
def sync_now(opts: Options, attempts: int, batch_kb: int) -> None:
    """Pull, then push: bring this device and the server up to date both ways."""
    with opts.open() as mem, SyncEngine(mem, batch_bytes=batch_kb * 1024) as engine:
        policy = retry_policy(opts, attempts)
        with _pull_failures():
            pulled = engine.pull(policy)
        with _push_failures(engine):
            pushed = engine.push(policy)
        with _pull_failures():
            shared = vaults.sync_included(mem, policy)
    emit(
        opts,
        {"pull": asdict(pulled), "push": asdict(pushed)} | _spaces_dict(shared),
        lambda: _pull_text(pulled) + "\n" + _push_text(pushed) + _spaces_text(shared),
    )
    _raise_rejected(pulled)
    vaults.raise_refused(shared)


def _spaces_dict(done: list[vaults.SpaceSync]) -> dict[str, object]:
    return {"spaces": [asdict(d) for d in done]}


def _spaces_text(done: list[vaults.SpaceSync]) -> str:
    from tiermem.tui.cli.commands.spaces_share import sync_line  # only with shared spaces

    return "".join("\n" + sync_line(d) for d in done)
