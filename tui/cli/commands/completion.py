"""`tiermem completion show|install [SHELL]`: tab completion for bash, zsh and fish.

The script is click's own (`_TIERMEM_COMPLETE=<shell>_source tiermem`). `install` saves it to a
file and, for bash and zsh, adds one line sourcing it to the shell's rc file (once: running it
again only refreshes the script); fish reads `~/.config/fish/completions/tiermem.fish` itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from click.shell_completion import get_completion_class

from tiermem.core.errors import InvalidInput
from tiermem.tui.cli.options import Options, emit, pass_options

SHELLS = ("bash", "zsh", "fish")
MARKER = "# tiermem completion"


def _shell(shell: str | None) -> str:
    name = shell or Path(os.environ.get("SHELL", "")).name
    if name not in SHELLS:
        raise InvalidInput(
            f"cannot tell the shell ({name or 'no $SHELL'}): name one of bash, zsh, fish"
        )
    return name


def script(shell: str) -> str:
    """click's completion script for `tiermem` in this shell."""
    root = click.get_current_context().find_root().command
    completion = get_completion_class(shell)
    assert completion is not None
    return completion(root, {}, "tiermem", "_TIERMEM_COMPLETE").source()


def _targets(shell: str) -> tuple[Path, Path | None]:
    """(where the script goes, the rc file that sources it or None)."""
    home = Path.home()
    if shell == "fish":
        config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        return config / "fish" / "completions" / "tiermem.fish", None
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    rc = Path(os.environ.get("ZDOTDIR") or home) / ".zshrc" if shell == "zsh" else home / ".bashrc"
    return data / "tiermem" / f"completion.{shell}", rc


@click.group(name="completion")
def completion_group() -> None:
    """Tab completion for bash, zsh and fish: show the script or install it."""


@completion_group.command()
@click.argument("shell", required=False, type=click.Choice(SHELLS))
def show(shell: str | None) -> None:
    """Print the completion script (default: the shell in $SHELL)."""
    click.echo(script(_shell(shell)), nl=False)


@completion_group.command()
@click.argument("shell", required=False, type=click.Choice(SHELLS))
@pass_options
def install(opts: Options, shell: str | None) -> None:
    """Install completion for this user (idempotent); open a new shell to use it."""
    name = _shell(shell)
    target, rc = _targets(name)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(script(name), encoding="utf-8")
        added = rc is not None and _source_line(rc, target)
    except OSError as exc:
        raise InvalidInput(f"cannot write {exc.filename}: {exc.strerror}") from None
    where = f"{target}" + (f", sourced from {rc}" if rc else "")
    emit(
        opts,
        {"shell": name, "script": str(target), "rc_file": str(rc) if rc else None, "added": added},
        f"completion for {name} installed: {where} (open a new shell)",
    )


def _source_line(rc: Path, target: Path) -> bool:
    """Add the line sourcing the script to the rc file unless it is there; whether added."""
    text = rc.read_text(encoding="utf-8") if rc.exists() else ""
    if MARKER in text:
        return False
    line = f'[ -f "{target}" ] && . "{target}"  {MARKER}\n'
    with rc.open("a", encoding="utf-8") as handle:
        handle.write(("\n" if text and not text.endswith("\n") else "") + line)
    return True
