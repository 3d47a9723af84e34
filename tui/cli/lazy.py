"""A click group that imports a command's module only when that command is used.

Listing the commands (`tiermem --help`) reads names and short help from a registry, so it
imports none of them: sync, the MCP server and the TUI cost nothing until they run.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import click

HandOver = Literal["never", "always", "unless-terminal"]
"""Whether the resident process (`tiermem resident`) may run a command: `never` for one that
takes the terminal (a full-screen app, a hidden prompt) or runs for long (a server, a watcher);
`unless-terminal` for one that asks for a secret only when standard input and error are both a
terminal; `always` for the rest. Its forked child has no controlling terminal."""


@dataclass(frozen=True)
class Lazy:
    """Where a command lives, the help line `--help` shows for it without importing it, and
    whether the resident process may run it."""

    module: str
    attribute: str
    help: str
    resident: HandOver = "never"

    def load(self) -> click.Command:
        command = getattr(importlib.import_module(self.module), self.attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.module}.{self.attribute} is not a click command")
        return command


class LazyGroup(click.Group):
    """A group whose subcommands come from a name → `Lazy` registry."""

    def __init__(self, *args: Any, lazy: Mapping[str, Lazy], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of `--help`, as click writes it, from the registry's help lines."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self._summary(ctx, name).get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _summary(self, ctx: click.Context, name: str) -> click.Command:
        if name in self.lazy:
            return click.Command(name, help=self.lazy[name].help)
        command = self.get_command(ctx, name)
        assert command is not None
        return command
