"""The terminal side of the sync commands: asking for the database URL, token and secrets, and
saying what happens, on standard error so that standard output stays the command's result."""

from __future__ import annotations

import sys
import time
from urllib.parse import urlsplit

import click

from tiermem.core.errors import InvalidInput
from tiermem.sync.devices.secret_store import ENV_TOKEN, ENV_URL, env_secret
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.transport import permit_insecure_http, require_secure, url_token
from tiermem.tui.cli.options import Options


def interactive() -> bool:
    """A person is there to answer: standard input and error are both a terminal."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def say(text: str) -> None:
    click.echo(text, err=True)


def ask_hidden(prompt: str) -> str:
    value: str = click.prompt(prompt, hide_input=True, err=True, default="", show_default=False)
    return value


INSECURE_HTTP = click.option(
    "--insecure-http",
    is_flag=True,
    help="Accept a plain http:// URL to another machine (the token travels in clear); "
    "remembered for this agent's later commands.",
)


def sync_url(given: str | None, insecure_http: bool = False) -> str:
    """The database URL, checked before anything is asked or generated (plain http:// to
    another machine only with --insecure-http, which then holds for this process)."""
    url = given or env_secret(ENV_URL)
    if not url:
        raise InvalidInput(f"give the database URL with --url (or set {ENV_URL})")
    require_secure(url, insecure_http)
    if insecure_http:
        permit_insecure_http(url)
    return url


def sync_token(url: str | None = None) -> tuple[str | None, bool]:
    """(token, came from the environment). The environment first, then the ``authToken`` a
    Turso URL carries, then asked on a terminal; None means "no token"."""
    from_env = env_secret(ENV_TOKEN)
    if from_env is not None:
        return from_env or None, True
    if url is not None and (in_url := url_token(url)) is not None:
        return in_url, False
    if interactive():
        return ask_hidden(f"{token_name(url)} (hidden; empty for none)") or None, False
    return None, False


def token_name(url: str | None) -> str:
    """What the token is called where it was made: Turso's name for a Turso database, the
    plain one for any other libSQL server (sqld, `tiermem sync local-server`)."""
    host = (urlsplit(url.strip()).hostname or "").lower() if url else ""
    turso = host.endswith((".turso.io", ".turso.tech"))
    return "Turso auth token" if turso else "Server token"


def retry_policy(opts: Options, attempts: int) -> RetryPolicy:
    """Retries that say, on a terminal, how long they wait."""

    def sleep(seconds: float) -> None:
        if not opts.json:
            say(f"retrying in {seconds:.1f} s …")
        time.sleep(seconds)

    return RetryPolicy(max_attempts=attempts, sleep=sleep)
