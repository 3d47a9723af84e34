"""Start-up laziness at the CLI boundary: what a command does not use, it does not import.

`LazyGroup` imports a command's module only when that command is used: listing the commands
(`tiermem --help`) reads names and short help from a registry, so sync, the MCP server and the
TUI cost nothing until they run. `lazy_import` names a module at the top of a command module
that only some of its commands (or options) use.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
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


def lazy_import(name: str) -> ModuleType:
    """`name`, imported on its first attribute access (or the module itself if already loaded).

    Name it at the top of a command module under a `TYPE_CHECKING` twin, so type checkers see
    the real module. The stand-in never enters `sys.modules`, so the import itself is the
    interpreter's own: one cut short (Ctrl-C in the middle of it) leaves no half-run module
    behind, and the next use simply imports again (`importlib.util.LazyLoader` runs the module's
    code inside the entry it put in `sys.modules`; an interrupt there left that half-run module
    for every later importer)."""
    loaded = sys.modules.get(name)
    return loaded if loaded is not None else _Deferred(name)


class _Deferred(ModuleType):
    """Stands for a module not imported yet: imports it on the first attribute it is asked for."""

    def __getattr__(self, attribute: str) -> Any:
        module = self.__dict__.get("_module")
        if module is None:
            module = importlib.import_module(self.__name__)
            self.__dict__["_module"] = module
        return getattr(module, attribute)
