"""The README is a landing page a newcomer can trust: short, the two commands on its first
screen, every link (README and docs/) going somewhere that exists, every `tiermem` command it
names a real command with real options, and its first five minutes working on a fresh home."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import click
import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.anchors import anchors_plugin

from tiermem.tui.cli import app, run

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
FIRST_SCREEN = 40
"""Lines a terminal or a repository page shows before any scrolling."""
GLOBAL_OPTIONS = {"--home", "--agent-id", "--json", "--help", "-h", "--version"}
SEPARATORS = {"|", "||", "&&", ";", "&"}

MARKDOWN = MarkdownIt("commonmark").enable("table").use(anchors_plugin, max_level=6)


def tokens(page: Path) -> list[Token]:
    """The page's tokens, inline ones flattened in (links, images, code spans)."""
    flat: list[Token] = []
    for token in MARKDOWN.parse(page.read_text(encoding="utf-8")):
        flat.append(token)
        flat.extend(token.children or [])
    return flat


def anchors(page: Path) -> set[str]:
    """The heading ids GitHub gives the page's headings."""
    return {str(t.attrs["id"]) for t in tokens(page) if t.type == "heading_open"}


def relative_links(page: Path) -> Iterator[str]:
    for token in tokens(page):
        target = token.attrs.get("href") or token.attrs.get("src")
        if token.type not in ("link_open", "image") or not isinstance(target, str):
            continue
        if "://" not in target and not target.startswith("mailto:"):
            yield target


def broken_link(page: Path, target: str) -> str | None:
    """Why `target` (relative to `page`) goes nowhere, or None when it resolves."""
    path, _, anchor = target.partition("#")
    file = (page.parent / unquote(path)).resolve() if path else page
    if not file.exists():
        return f"{target}: no such file"
    if anchor and (file.suffix != ".md" or unquote(anchor) not in anchors(file)):
        return f"{target}: no heading #{anchor} in {file.name}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = [why for target in relative_links(page) if (why := broken_link(page, target))]
    assert broken == []


def test_a_broken_link_or_anchor_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A `code` heading\n", encoding="utf-8")
    assert broken_link(page, "#a-code-heading") is None
    assert broken_link(page, "page.md#title") is None
    assert broken_link(page, "#no-such-heading") is not None
    assert broken_link(page, "missing.md") is not None


# -- the commands the README names -------------------------------------------------------------


def shell_lines(page: Path) -> Iterator[str]:
    """Each command line of the page's shell blocks (continuations joined) and each code span
    that starts with the command."""
    for token in tokens(page):
        if token.type == "fence" and token.info.strip() in ("sh", "bash", "shell", "console"):
            yield from token.content.replace("\\\n", " ").splitlines()
        elif token.type == "code_inline" and is_tiermem(token.content.split(" ")[0]):
            yield token.content


def is_tiermem(word: str) -> bool:
    return word == "tiermem" or word.endswith("/tiermem")


def tiermem_commands(line: str) -> Iterator[list[str]]:
    """The arguments of each `tiermem` run on a shell line (pipes and `&&` split it)."""
    words = shlex.split(line, comments=True)
    simple: list[str] = []
    for word in [*words, ";"]:
        if word not in SEPARATORS:
            simple.append(word)
            continue
        program = [w for w in simple if "=" not in w or w.startswith("-")]  # drop VAR=value
        if program and is_tiermem(program[0]):
            yield program[1:]
        simple = []


def command_path(args: list[str]) -> tuple[list[str], click.Command, list[str]]:
    """The subcommand words of `args`, the click command they name, and the options given to
    it; raise LookupError for a word that is no command of its group."""
    command: click.Command = app
    path: list[str] = []
    options: list[str] = []
    skip_value = False
    for word in args:
        if word == "--":
            break
        if skip_value:
            skip_value = False
        elif word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            options.append(name)
            skip_value = name in ("--home", "--agent-id") and "=" not in word
        elif isinstance(command, click.Group):
            with click.Context(command) as ctx:
                found = command.get_command(ctx, word)
            if found is None:
                raise LookupError(f"`tiermem {' '.join([*path, word])}`: no such command")
            command, path = found, [*path, word]
    return path, command, options


def unknown_options(command: click.Command, options: list[str]) -> list[str]:
    known = {name for param in command.params for name in param.opts + param.secondary_opts}
    return [o for o in options if o not in known | GLOBAL_OPTIONS]


def named_commands(page: Path) -> list[list[str]]:
    return [args for line in shell_lines(page) for args in tiermem_commands(line)]


def test_the_readme_names_commands() -> None:
    """The parser finds what is there: a regression to zero would pass everything below."""
    named = {" ".join(command_path(args)[0]) for args in named_commands(README)}
    assert {"store", "retrieve", "context", "conversation-end", "demo", "mcp"} <= named
    assert {"sync init", "sync add-device", "restore", "service install"} <= named


def test_every_command_the_readme_names_exists(capsys: pytest.CaptureFixture[str]) -> None:
    problems = []
    for args in named_commands(README):
        try:
            path, command, options = command_path(args)
        except LookupError as exc:
            problems.append(str(exc))
            continue
        if unknown := unknown_options(command, options):
            problems.append(f"`tiermem {' '.join(args)}`: no option {', '.join(unknown)}")
        if run([*path, "--help"]) != 0:
            problems.append(f"`tiermem {' '.join(path)} --help` failed")
    capsys.readouterr()
    assert problems == []


def test_a_command_or_option_that_does_not_exist_is_caught() -> None:
    with pytest.raises(LookupError):
        command_path(["sync", "frobnicate"])
    path, command, options = command_path(["--home", "h", "store", "--txt", "x"])
    assert path == ["store"] and unknown_options(command, options) == ["--txt"]
    assert list(tiermem_commands("printf 'x' | A=1 tiermem conversation-end -  # end")) == [
        ["conversation-end", "-"]
    ]


# -- the landing page ----------------------------------------------------------------------------


def test_the_readme_is_a_landing_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 300
    first_screen = "\n".join(lines[:FIRST_SCREEN])
    assert "bash packaging/quickstart.sh" in first_screen
    assert "bash .ci/run" in first_screen
    assert (REPO / "packaging" / "quickstart.sh").is_file()
    assert "This is also the README's test command." in (REPO / ".ci" / "run").read_text()


def first_five_minutes() -> str:
    """The shell blocks of the README's section "The first five minutes", as one script."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## The first five minutes", 1)[1].split("\n## ", 1)[0]
    blocks = [
        t.content for t in MARKDOWN.parse(section) if t.type == "fence" and t.info.strip() == "sh"
    ]
    assert len(blocks) >= 3
    return "\n".join(blocks)


def test_the_first_five_minutes_work_on_a_fresh_home(tmp_path: Path) -> None:
    """Run as a newcomer would, in a shell with the installed `tiermem` first on PATH."""
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp_path),
        "TIERMEM_RESIDENT": "0",
        "HOME": str(tmp_path),
    }
    env.pop("TIERMEM_HOME", None)
    script = "set -euo pipefail\n" + first_five_minutes() + '\necho "HOME_USED=$TIERMEM_HOME"\n'
    done = subprocess.run(
        ["bash", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    home = Path(done.stdout.rsplit("HOME_USED=", 1)[1].strip())
    assert home.parent == tmp_path and (home / "MEMORY.md").is_file()
    assert done.stdout.count("The team offsite is in Porto on March 3") >= 2  # retrieve, context
    assert "matched offsite" in done.stdout
    assert "1 facts stored" in done.stdout
    assert "demo agent 'demo'" in done.stdout and "healthy: 0 failure(s)" in done.stdout
