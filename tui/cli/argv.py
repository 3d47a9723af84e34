"""The command line before click reads it: arguments must be UTF-8 text, and the global options
(`--home`, `--agent-id`, `--json`) may come after the command as well as before it."""

from __future__ import annotations

import click

from tiermem.core.errors import InvalidInput

GLOBALS: dict[str, bool] = {"--home": True, "--agent-id": True, "--json": False}
"""The global options, and whether each takes a value."""


def check_utf8(args: list[str]) -> None:
    """Bytes that are not UTF-8 reach Python as surrogate escapes; name the argument (never
    echo it: it may be a secret)."""
    for i, arg in enumerate(args):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            option = arg.partition("=")[0] if arg.startswith("--") and "=" in arg else None
            if option is None and i and args[i - 1].startswith("-"):
                option = args[i - 1]
            what = f"the value of {option}" if option else f"argument {i + 1}"
            raise InvalidInput(f"{what} is not valid UTF-8 text") from None


def _values(command: click.Command, name: str) -> int | None:
    """How many values `command`'s own option `name` takes, or None if it has no such option."""
    for param in command.params:
        if isinstance(param, click.Option) and name in (*param.opts, *param.secondary_opts):
            return 0 if param.is_flag or param.count else param.nargs
    return None


def hoist_globals(root: click.Group, args: list[str]) -> list[str]:
    """Move the global options found after the command to just before it.

    Option values and everything after `--` stay where they are, and a command's own option of
    the same name (`demo --agent-id`) is left to that command."""
    ctx = click.Context(root)
    kept: list[str] = []
    hoisted: list[str] = []
    at: int | None = None
    command: click.Command = root
    i = 0
    while i < len(args):
        token = args[i]
        if token == "--":
            kept += args[i:]
            break
        name, eq, _ = token.partition("=")
        if at is not None and name in GLOBALS and _values(command, name) is None:
            width = 1 if eq or not GLOBALS[name] else 2
            hoisted += args[i : i + width]
            i += width
            continue
        width = 1 if eq or not token.startswith("-") else 1 + (_values(command, name) or 0)
        if not token.startswith("-") and isinstance(command, click.Group):
            sub = command.get_command(ctx, token)
            if sub is not None:
                at = len(kept) if at is None else at
                command = sub
        kept += args[i : i + width]
        i += width
    if at is None:
        return kept
    return kept[:at] + hoisted + kept[at:]
