"""What every CLI command module shares: the global options, the output convention and the
`--session` option of the commands that count toward session hygiene."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tiermem.core.environment import SESSION
from tiermem.core.errors import StorageError
from tiermem.core.paths import default_home
from tiermem.core.printable import printable
from tiermem.tui.cli.lazy import lazy_import

if TYPE_CHECKING:
    import msgspec

    from tiermem.core import engine, logs
    from tiermem.core.engine import Memory
else:  # loaded by the first command that opens the memory, logs or emits a struct, so `--help`
    # starts fast
    engine = lazy_import("tiermem.core.engine")
    logs = lazy_import("tiermem.core.logs")
    msgspec = lazy_import("msgspec")


@dataclass
class Options:
    """The global options: which memory home and agent, and whether to print JSON."""

    home: Path | None
    agent_id: str
    json: bool

    @contextlib.contextmanager
    def open(self, *, create: bool = False) -> Iterator[Memory]:
        """The agent's memory. Only a command that stores passes `create`: it may create the
        home and the agent (and says so on stderr once it succeeded; a failure undoes them);
        any other needs both to exist, and reads a home it cannot write read-only."""
        mem = engine.Memory(self.home, self.agent_id, create=create)
        try:
            yield mem
        except BaseException:
            mem.undo_creation()
            raise
        mem.close()
        if mem.created_agent:
            where = "a new memory home" if mem.created_home else "memory home"
            root = mem.home.root.absolute()
            sys.stderr.write(f"tiermem: created agent {self.agent_id!r} in {where} {root}\n")

    def resolved_home(self) -> Path:
        """The memory home folder, without opening (or creating) it."""
        return (self.home if self.home is not None else default_home()).expanduser().resolve()

    def start_log(self) -> None:
        """Log this command to the home's log file; an absent or read-only home is not logged."""
        home = self.resolved_home()
        if home.is_dir():
            with contextlib.suppress(StorageError):
                logs.setup_logging(home)


pass_options = click.make_pass_decorator(Options)

session_option = click.option(
    "--session",
    envvar=SESSION,
    help=f"Session id for session hygiene (default: ${SESSION}).",
)


def when(ts: float | None, never: str = "never") -> str:
    """A stored time as people read it: `2026-11-25 14:05 UTC`."""
    if ts is None or ts <= 0:
        return never
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def write_stream(pieces: Iterable[str], output: Path | None) -> None:
    """Streamed text to standard output, or to `output` whole or not at all (a temporary file
    renamed over it). Exact, except on a terminal, where control characters show as escapes."""
    if output is None:
        shown = printable if sys.stdout.isatty() else str
        for piece in pieces:
            sys.stdout.write(shown(piece))
        return
    tmp = output.with_name(f".{output.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for piece in pieces:
            handle.write(piece)
    tmp.replace(output)


def emit(opts: Options, payload: dict[str, Any], text: str | Callable[[], str]) -> None:
    if opts.json:
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=_json_default) + "\n")
    else:
        sys.stdout.write(printable(text() if callable(text) else text).rstrip("\n") + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")
