"""CLI commands for encrypted sync: the `sync` group, sync init/push/pull/now/log/status and
`daemon` (the other `sync` subcommands are in devices.py, restore.py and conflicts.py).

Secrets are asked on the terminal (hidden) or taken from the environment for scripts:
TIERMEM_SYNC_URL, TIERMEM_SYNC_TOKEN, TIERMEM_RECOVERY_KEY, TIERMEM_PASSPHRASE. None of them is
ever printed, except the recovery key: once, on the terminal at `sync init` (and it must be typed
back), or, without a terminal, in the `recovery_key` field of `sync init --json`.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

import click

from tiermem.core.errors import InvalidInput, RejectedRecords
from tiermem.sync import crypto
from tiermem.sync.daemon import DEFAULT_POLL, DEFAULT_PULL_INTERVAL, Daemon
from tiermem.sync.devices.secret_store import (
    ENV_PASSPHRASE,
    ENV_RECOVERY_KEY,
    ENV_TOKEN,
    ENV_URL,
    env_secret,
)
from tiermem.sync.engine import (
    DEFAULT_BATCH_BYTES,
    MIN_PASSPHRASE_CHARS,
    InitResult,
    PullResult,
    PushResult,
    SyncEngine,
    SyncEvent,
    SyncStatus,
)
from tiermem.sync.setup import other_vaults_message, set_token
from tiermem.sync.state import AlreadyInitialised, MissingSecret, SyncFailed
from tiermem.sync.vault.hrana import HranaError
from tiermem.sync.vault.remote import allow_insecure_http
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.tui.cli.lazy import LazyGroup
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.prompts import (
    INSECURE_HTTP,
    ask_hidden,
    interactive,
    retry_policy,
    say,
    sync_token,
    sync_url,
)
from tiermem.tui.cli.registry import SYNC

# First contact fails fast: an unreachable host is a typo far more often than an outage.
INIT_ATTEMPTS = 2
INIT_WAIT = 2.0
INIT_BUDGET = "2 attempts, 5 s connect timeout each, at most 2 s between them"

CONFIRM_TRIES = 3


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


def _when(ts: float | None) -> str:
    return "never" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


# -- sync init -------------------------------------------------------------------------------


def _show_and_confirm(key: bytes) -> None:
    text = crypto.format_recovery_key(key)
    say(
        "\nYour RECOVERY KEY (shown once; tiermem never stores it):\n\n"
        f"    {text}\n\n"
        "Write it down or keep it in a password manager. With it (or the passphrase, if you set\n"
        "one) a new device restores this agent's memory; without both, nobody can, not even\n"
        "the server.\n"
    )
    for attempt in range(1, CONFIRM_TRIES + 1):
        typed = click.prompt("Type the recovery key to confirm you saved it", err=True)
        try:
            if crypto.parse_recovery_key(typed) == key:
                say("Recovery key confirmed.")
                return
            say("That is a valid key, but not this one.")
        except crypto.MalformedKey as exc:
            say(f"Not accepted: {exc}.")
        if attempt < CONFIRM_TRIES:
            say("Try again.")
    raise InvalidInput("the recovery key was not confirmed; nothing was set up")


def _announce(opts: Options, url: str | None) -> None:
    """Say, before the first contact, how long an unreachable host can take to fail."""
    if not opts.json:
        say(f"contacting {urlsplit(url or '').hostname or 'the sync server'}: {INIT_BUDGET}")


def _recovery_key(opts: Options) -> tuple[bytes, bytes | None]:
    """The new vault's recovery key, and the key again when it is to be revealed in the JSON
    output (no terminal): from the environment, or generated, shown and confirmed."""
    from_env = env_secret(ENV_RECOVERY_KEY)
    if from_env is not None:
        return crypto.parse_recovery_key(from_env), None
    key = crypto.generate_recovery_key()
    if interactive():
        _show_and_confirm(key)
        return key, None
    if opts.json:
        return key, key
    raise MissingSecret(
        "no terminal to show the recovery key on: run on a terminal, use --json (the key is in "
        f"its recovery_key field), or set {ENV_RECOVERY_KEY}"
    )


def _confirm_new_vault(
    engine: SyncEngine, url: str, token: str | None, policy: RetryPolicy
) -> bool:
    """Whether a new vault may be set up beside the ones the server holds: none there, or the
    owner says so on the terminal (default no); without a terminal, `AlreadyInitialised`."""
    others = engine.other_vaults(url, token, policy)
    if not others:
        return False
    if not interactive():
        raise AlreadyInitialised(other_vaults_message(others))
    say(other_vaults_message(others))
    if not click.confirm("Set up a new, separate vault for this agent?", default=False, err=True):
        raise AlreadyInitialised("nothing was set up (the server holds other vaults)")
    return True


def _new_passphrase() -> str:
    from_env = env_secret(ENV_PASSPHRASE)
    if from_env is not None:
        return from_env
    if not interactive():
        raise MissingSecret(f"--passphrase needs a terminal to ask it on, or {ENV_PASSPHRASE}")
    say(
        f"The passphrase needs {MIN_PASSPHRASE_CHARS}+ characters. The server keeps its key wrap "
        "and could try guesses offline: use four or more random words."
    )
    first = ask_hidden("Passphrase")
    if ask_hidden("Passphrase again") != first:
        raise InvalidInput("the two passphrases differ; nothing was set up")
    return first


@click.group(name="sync", cls=LazyGroup, lazy=SYNC)
@pass_options
def sync_group(opts: Options) -> None:
    """End-to-end encrypted sync of the critical state (hot + tree) with Turso."""
    opts.start_log()


@sync_group.command(name="init")
@click.option("--url", help=f"Database URL: libsql://… or https://… (default ${ENV_URL}).")
@click.option(
    "--passphrase",
    "use_passphrase",
    is_flag=True,
    help=f"Also let a passphrase unlock the vault (asked, or ${ENV_PASSPHRASE}).",
)
@click.option("--no-push", is_flag=True, help="Set up only; the daemon or `sync push` sends.")
@click.option(
    "--new-vault",
    is_flag=True,
    help="Set up a new vault even though the server already holds others (not asked).",
)
@INSECURE_HTTP
@pass_options
def sync_init(
    opts: Options,
    url: str | None,
    use_passphrase: bool,
    no_push: bool,
    new_vault: bool,
    insecure_http: bool,
) -> None:
    """Set up sync: keys, remote tables, this device; show the recovery key once."""
    url = sync_url(url, insecure_http)
    reveal: bytes | None = None
    with opts.open(create=True) as mem, SyncEngine(mem) as engine:
        if insecure_http:
            allow_insecure_http(mem, True)
        current = engine.settings()
        if current is not None and current.status == "ready":
            raise AlreadyInitialised(
                f"sync is already set up for agent {mem.agent_id!r} with {current.url}; "
                "see `tiermem sync status`"
            )
        token, token_from_env = sync_token(url)
        policy = replace(retry_policy(opts, INIT_ATTEMPTS), first_cap=INIT_WAIT)
        try:
            looked = not new_vault
            if looked:  # the first contact: a look for the server's other vaults
                _announce(opts, url)
                new_vault = _confirm_new_vault(engine, url, token, policy)
            if current is not None:  # an earlier init was interrupted: same keys and recovery key
                if not looked:
                    _announce(opts, url)
                result = engine.resume_init(
                    url, token, store_token=not token_from_env, policy=policy, new_vault=new_vault
                )
            else:
                passphrase = _new_passphrase() if use_passphrase else None
                key, reveal = _recovery_key(opts)
                if not looked:
                    _announce(opts, url)
                try:
                    result = engine.init(
                        url,
                        token,
                        key,
                        passphrase=passphrase,
                        store_token=not token_from_env,
                        policy=policy,
                        new_vault=new_vault,
                    )
                except BaseException:
                    if reveal is not None:  # nobody has this key yet: start afresh next time
                        engine.abandon_init()
                    raise
        except HranaError as exc:
            kept = reveal is None and engine.pending_init()  # a key was confirmed and kept
            again = " (the recovery key you have stays valid)" if kept else ""
            raise SyncFailed(
                f"sync init could not finish: {exc}; fix that and run `tiermem sync init` "
                f"again{again}",
                exc.exit_code,
            ) from None
        pushed: PushResult | None = None
        note = ""
        if not no_push:
            try:
                pushed = engine.push(retry_policy(opts, 3))
            except HranaError as exc:
                note = f"first push failed ({exc}); it stays queued for `sync push` or the daemon"
    payload: dict[str, Any] = asdict(result) | {
        "pushed": None if pushed is None else asdict(pushed),
        "note": note,
    }
    if reveal is not None:
        payload["recovery_key"] = crypto.format_recovery_key(reveal)
    emit(opts, payload, _init_text(result, pushed, note))


def _init_text(result: InitResult, pushed: PushResult | None, note: str) -> str:
    text = (
        f"sync {'resumed and ' if result.resumed else ''}set up for agent {result.agent_id!r} "
        f"with {result.url}\ndevice {result.device_id[:12]}…, epoch {result.epoch}, "
        f"passphrase {'on' if result.passphrase else 'off'}, secrets in the {result.secret_store} "
        f"store{'' if result.token_stored else ' (token not stored)'}"
    )
    if pushed is not None and pushed.pushed:
        text += f"\npushed the critical state (version {pushed.version})"
    if note:
        text += f"\n{note}"
    return text + "\nrun `tiermem daemon` to push after every change"


# -- sync push / status ----------------------------------------------------------------------


_ATTEMPTS = click.option(
    "--attempts",
    type=click.IntRange(1, 100),
    default=5,
    show_default=True,
    help="Tries per request before giving up (waits of up to 5, 10, 20, 40 s between them).",
)
_BATCH = click.option(
    "--batch-kb",
    type=click.IntRange(16, 64 * 1024),
    default=DEFAULT_BATCH_BYTES // 1024,
    show_default=True,
    help="Sealed kilobytes per push request: a bigger push is split into several requests.",
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


@sync_group.command(name="push")
@_ATTEMPTS
@_BATCH
@pass_options
def sync_push(opts: Options, attempts: int, batch_kb: int) -> None:
    """Push what changed: critical state and changed memories (one request per batch)."""
    with (
        opts.open() as mem,
        SyncEngine(mem, batch_bytes=batch_kb * 1024) as engine,
        _push_failures(engine),
    ):
        result = engine.push(retry_policy(opts, attempts))
    emit(opts, asdict(result), _push_text(result))


@sync_group.command(name="pull")
@_ATTEMPTS
@pass_options
def sync_pull(opts: Options, attempts: int) -> None:
    """Fetch and apply what other devices pushed since the last pull."""
    with opts.open() as mem, SyncEngine(mem) as engine, _pull_failures():
        result = engine.pull(retry_policy(opts, attempts))
    emit(opts, asdict(result), _pull_text(result))
    _raise_rejected(result)


@sync_group.command(name="now")
@_ATTEMPTS
@_BATCH
@pass_options
def sync_now(opts: Options, attempts: int, batch_kb: int) -> None:
    """Pull, then push: bring this device and the server up to date both ways."""
    with opts.open() as mem, SyncEngine(mem, batch_bytes=batch_kb * 1024) as engine:
        policy = retry_policy(opts, attempts)
        with _pull_failures():
            pulled = engine.pull(policy)
        with _push_failures(engine):
            pushed = engine.push(policy)
    emit(
        opts,
        {"pull": asdict(pulled), "push": asdict(pushed)},
        lambda: _pull_text(pulled) + "\n" + _push_text(pushed),
    )
    _raise_rejected(pulled)


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


@sync_group.command(name="log")
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


@sync_group.command(name="status")
@pass_options
def sync_status(opts: Options) -> None:
    """Show sync settings, the outbox and the last push or error (no network)."""
    with opts.open() as mem, SyncEngine(mem) as engine:
        status = engine.status()
    emit(opts, asdict(status), lambda: _status_text(status))


def _new_token(from_stdin: bool) -> str:
    """The new token: a line of stdin, else $TIERMEM_SYNC_TOKEN, else asked hidden."""
    if from_stdin:
        token = sys.stdin.readline().strip()
        if not token:
            raise MissingSecret("standard input is empty: give the token")
        return token
    from_env = env_secret(ENV_TOKEN)
    if from_env:
        return from_env
    if not interactive():
        raise MissingSecret(f"give the token on stdin (--stdin) or in {ENV_TOKEN}")
    token = ask_hidden("New server token (hidden)")
    if not token:
        raise MissingSecret("no token given")
    return token


@sync_group.command(name="set-token")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the token from standard input.")
@click.option(
    "--no-check", is_flag=True, help="Store it without asking the server whether it accepts it."
)
@pass_options
def sync_set_token(opts: Options, from_stdin: bool, no_check: bool) -> None:
    """Replace this device's server token (after removing a device, or when it expires)."""
    token = _new_token(from_stdin)
    with opts.open() as mem, SyncEngine(mem) as engine:
        store = set_token(engine, token, check=not no_check)
    data = {"stored": True, "secret_store": store, "checked": not no_check}
    note = "" if no_check else " (the server accepted it)"
    emit(opts, data, lambda: f"token stored in the {store} store{note}")


# -- daemon ----------------------------------------------------------------------------------


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
@_BATCH
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
