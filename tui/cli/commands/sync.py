"""CLI commands that set sync up: the `sync` group, `sync init` and `sync set-token` (moving data
is in sync_transfer.py and daemon.py, what this device knows in sync_status.py, the devices in
devices.py, checks and restores in restore.py, conflicts in conflicts.py).

Secrets are asked on the terminal (hidden) or taken from the environment for scripts:
TIERMEM_SYNC_URL, TIERMEM_SYNC_TOKEN, TIERMEM_RECOVERY_KEY, TIERMEM_PASSPHRASE. None of them is
ever printed, except the recovery key: once, on the terminal at `sync init` (and it must be typed
back), or, without a terminal, in the `recovery_key` field of `sync init --json`.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, replace
from typing import Any
from urllib.parse import urlsplit

import click

from tiermem.core.errors import InvalidInput
from tiermem.sync import crypto
from tiermem.sync.devices.secret_store import (
    ENV_PASSPHRASE,
    ENV_RECOVERY_KEY,
    ENV_TOKEN,
    ENV_URL,
    env_secret,
)
from tiermem.sync.engine import MIN_PASSPHRASE_CHARS, InitResult, PushResult, SyncEngine
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
    """End-to-end encrypted sync of the critical state (hot + tree) with Turso or any libSQL
    server."""
    opts.start_log()


@sync_group.command(name="init")
@click.option(
    "--url",
    help=f"Database URL: libsql://… or https://…, or http://127.0.0.1:… for a server on this "
    f"machine (`tiermem sync local-server`) (default ${ENV_URL}).",
)
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
