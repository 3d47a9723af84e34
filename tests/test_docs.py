"""The README is a landing page a newcomer can trust: short, the two commands on its first
screen, and its first five minutes working on a fresh home. In it and in every docs/ page,
each relative link goes somewhere that exists and each `tiermem` command named in a shell
block or a code span is a real command with real options."""

from __future__ import annotations

import os
import re
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
SEPARATORS = {"|", "||", "&&", ";", "&", "/"}

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
    """The arguments of each `tiermem` run on a shell line (pipes, `&&` and a ` / ` between
    two forms split it), optional parts' brackets taken off."""
    words = shlex.split(line, comments=True)
    simple: list[str] = []
    for word in [*words, ";"]:
        if word not in SEPARATORS:
            simple.append(word.replace("[", "").replace("]", ""))
            continue
        program = [w for w in simple if "=" not in w or w.startswith("-")]  # drop VAR=value
        if program and is_tiermem(program[0]):
            yield program[1:]
        simple = []


Named = tuple[list[str], click.Command, list[str]]
"""The subcommand words, the click command they name, the options given to it."""


def command_paths(args: list[str]) -> Iterator[Named]:
    """What `tiermem ARGS` names, once per alternative where a synopsis writes `a|b` in a
    command's place; raise LookupError for a word that is no command of its group."""
    command: click.Command = app
    path: list[str] = []
    options: list[str] = []
    skip_value = False
    for index, word in enumerate(args):
        if word == "--":
            break
        if skip_value:
            skip_value = False
        elif word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            options.extend(name.split("/"))  # a flag's pair: --daemon/--no-daemon
            skip_value = name in ("--home", "--agent-id") and "=" not in word
        elif isinstance(command, click.Group) and "|" in word:
            for form in synopsis_forms(command, " ".join(args[index:])):
                yield from command_paths([*args[:index], *form])
            return
        elif isinstance(command, click.Group):
            found = subcommand(command, word)
            if found is None:
                raise LookupError(f"`tiermem {' '.join([*path, word])}`: no such command")
            command, path = found, [*path, word]
    yield path, command, options


def subcommand(group: click.Group, name: str) -> click.Command | None:
    with click.Context(group) as ctx:
        return group.get_command(ctx, name)


def synopsis_forms(group: click.Group, synopsis: str) -> list[list[str]]:
    """`show ID|search QUERY|export DIR` → `show ID`, `search QUERY`, `export DIR`; a piece that
    starts with no subcommand of the group goes on the form before it (the choices of a value,
    as in `install [--platform systemd|launchd]`)."""
    forms: list[list[str]] = []
    for piece in synopsis.split("|"):
        words = piece.split()
        if forms and not (words and subcommand(group, words[0])):
            forms[-1].extend(words)
        else:
            forms.append(words)
    return forms


def known_options(command: click.Command) -> set[str]:
    own = {name for param in command.params for name in param.opts + param.secondary_opts}
    return own | GLOBAL_OPTIONS


def named_commands(page: Path) -> list[list[str]]:
    return [args for line in shell_lines(page) for args in tiermem_commands(line)]


def problems_with(args: list[str]) -> list[str]:
    """Why `tiermem ARGS` is no real command with real options (empty when it is one)."""
    try:
        named = list(command_paths(args))
    except LookupError as exc:
        return [str(exc)]
    problems = [
        f"`tiermem {' '.join(p)} --help` failed" for p, _, _ in named if run([*p, "--help"])
    ]
    # a synopsis's options belong to one form or all (`install|status [--platform P] [--print]`)
    given = {option for _, _, options in named for option in options}
    unknown = given - {option for _, command, _ in named for option in known_options(command)}
    if unknown:
        problems.append(f"`tiermem {' '.join(args)}`: no option {', '.join(sorted(unknown))}")
    return problems


def test_the_readme_names_commands() -> None:
    """The parser finds what is there: a regression to zero would pass everything below."""
    named = {
        " ".join(path) for args in named_commands(README) for path, _, _ in command_paths(args)
    }
    assert {"store", "retrieve", "context", "conversation-end", "demo", "mcp"} <= named
    assert {"sync init", "sync add-device", "restore", "service install"} <= named


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_a_page_names_exists(page: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problems = [why for args in named_commands(page) for why in problems_with(args)]
    capsys.readouterr()
    assert problems == []


def test_a_command_or_option_that_does_not_exist_is_caught(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert problems_with(["sync", "frobnicate"]) == ["`tiermem sync frobnicate`: no such command"]
    assert problems_with(["sync", "shove|push"]) == ["`tiermem sync shove`: no such command"]
    assert problems_with(["completion", "show|install", "bash|zsh"]) == []
    assert problems_with(["--home", "h", "store", "--txt", "x"]) == [
        "`tiermem --home h store --txt x`: no option --txt"
    ]
    assert problems_with(["sync", "pull|push", "--batch-kb", "9"]) == []  # push's option
    assert problems_with(["sync", "pull|push", "--batch-mb", "9"]) == [
        "`tiermem sync pull|push --batch-mb 9`: no option --batch-mb"
    ]
    assert problems_with(["service", "install", "--daemon/--no-demon"]) == [
        "`tiermem service install --daemon/--no-demon`: no option --no-demon"
    ]
    assert list(tiermem_commands("tiermem sync conflicts [--all] / resolve ID")) == [
        ["sync", "conflicts", "--all"]
    ]
    assert list(tiermem_commands("printf 'x' | A=1 tiermem conversation-end -  # end")) == [
        ["conversation-end", "-"]
    ]


def test_the_mcp_page_names_every_tool() -> None:
    """docs/mcp.md lists the tools by name; TOOLS.md (kept equal to the server) has them all."""
    tools = re.findall(r"^## (\w+)$", (REPO / "packaging/openclaw/TOOLS.md").read_text(), re.M)
    page = (REPO / "docs" / "mcp.md").read_text(encoding="utf-8")
    assert len(tools) > 20
    assert [tool for tool in tools if f"`{tool}`" not in page] == []


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
