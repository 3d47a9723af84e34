"""The `tiermem` command line over the core facade.

Every command prints a human summary, or with `--json` one JSON document on stdout. Expected
failures print one line (`tiermem: error: …`) and exit with the error's code; nothing is
printed as a traceback unless TIERMEM_DEBUG=1. The commands live in `commands/`, one module per
group, and are imported only when used (`registry.py` lists them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tiermem.core.environment import environment
from tiermem.core.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, TiermemError
from tiermem.core.paths import DEFAULT_AGENT
from tiermem.core.printable import printable
from tiermem.tui.cli.argv import check_utf8, hoist_globals
from tiermem.tui.cli.lazy import LazyGroup
from tiermem.tui.cli.options import Options
from tiermem.tui.cli.registry import ROOT

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def interactive_terminal() -> bool:
    """Both ends are a terminal, so a full-screen app can run."""
    return sys.stdin.isatty() and sys.stdout.isatty()


@click.group(cls=LazyGroup, lazy=ROOT, context_settings=CONTEXT, invoke_without_command=True)
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="Memory home folder (default: $TIERMEM_HOME or the user data folder); a read never "
    "creates one.",
)
@click.option(
    "--agent-id",
    default=DEFAULT_AGENT,
    show_default=True,
    help="Which agent's memory to use (a read needs it to exist; `tiermem agents list`).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one machine-readable JSON document.")
@click.version_option(package_name="tiermem")
@click.pass_context
def app(ctx: click.Context, home: Path | None, agent_id: str, as_json: bool) -> None:
    """Tiered long-term memory for AI agents: hot, warm and cold tiers with a tree index.

    Without a command, opens the terminal UI (the same as `tiermem tui`). The options below
    may also be given after the command (`tiermem sync status --json`).
    """
    ctx.obj = Options(home=home, agent_id=agent_id, json=as_json)
    if ctx.invoked_subcommand is None:
        if not interactive_terminal():  # a script or a pipe: the help, not a full-screen app
            click.echo(ctx.get_help())
            return
        tui = app.get_command(ctx, "tui")
        assert tui is not None
        ctx.invoke(tui)


def run(args: list[str]) -> int:
    """Run the CLI in this process and return its exit code (`tiermem.tui.entry` exits with
    it; the tests call it directly)."""
    try:
        check_utf8(args)
        result = app.main(args=hoist_globals(app, args), prog_name="tiermem", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except TiermemError as exc:
        return _fail(args, str(exc), exc.exit_code, type(exc).__name__)
    except click.exceptions.Abort:
        return _fail(args, "aborted", EXIT_INTERRUPTED, "Aborted")
    except click.exceptions.NoArgsIsHelpError as exc:  # `tiermem sync`: its help, as asked
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return 0
    except click.ClickException as exc:
        return _fail(args, exc.format_message(), EXIT_USAGE, "UsageError")
    except KeyboardInterrupt:
        return _fail(args, "interrupted", EXIT_INTERRUPTED, "Interrupted")
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: still one line, never a traceback
        if _after_interrupt(exc):  # a clean-up that failed because ctrl-C cut it short
            return _fail(args, "interrupted", EXIT_INTERRUPTED, "Interrupted")
        if environment().debug:
            raise
        message = f"internal error ({type(exc).__name__}); rerun with TIERMEM_DEBUG=1 for details"
        return _fail(args, message, EXIT_INTERNAL, "InternalError")


def _after_interrupt(exc: BaseException) -> bool:
    """Whether `exc` was raised while a KeyboardInterrupt was being handled."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__context__
    return False


def _fail(args: list[str], message: str, code: int, kind: str) -> int:
    message = " ".join(message.split())
    if "--json" in args:
        sys.stdout.write(json.dumps({"error": message, "type": kind, "exit_code": code}) + "\n")
    sys.stderr.write(f"tiermem: error: {printable(message)}\n")
    return code
