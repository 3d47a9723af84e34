"""Structured metadata of a text: the URLs, shell commands and file paths it mentions (seed v2.1).

Facts keep them beside their text (`urls`, `commands`, `paths`), so an agent remembers *how*
(the link, the exact command, the file), not only *what*. Extraction is regex-based and linear
in the input; it is deliberately conservative for commands and paths (a backticked span or a
shell prompt for commands; two path segments, a `~/` `./` `../` prefix or a file extension for
paths), because a false command in memory is worse than a missed one that `--command` can add.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_URL = re.compile(r"\b(?:https?|ftp|wss?|git|ssh|file)://[^\s<>\"'`]+|\bwww\.[^\s<>\"'`]+", re.I)
_TRAILING = ".,;:!?'\"*_"
_CLOSERS = {")": "(", "]": "[", "}": "{", ">": "<"}
_FENCE = re.compile(r"^[ \t]*(```|~~~)[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_INLINE = re.compile(r"(?<!`)`([^`\n]{1,300})`(?!`)")
_PROMPT = re.compile(r"^[ \t]*\$[ \t]+(\S.{0,300})$", re.M)
_PATH = re.compile(
    r"(?<![\w/.:@~-])(?:"
    r"(?:~|\.\.?)/[\w.@+%-]+(?:/[\w.@+%-]+)*/?"  # ~/x ./x ../x
    r"|/[\w.@+%-]+(?:/[\w.@+%-]+)+/?"  # /etc/hosts (two segments at least)
    r"|[A-Za-z]:\\[\w.@+%-]+(?:\\[\w.@+%-]+)*\\?"  # C:\Users\x
    r"|[\w.@+%-]+(?:/[\w.@+%-]+)+\.[A-Za-z][A-Za-z0-9]{0,7}"  # src/app/main.py
    r")(?![\w/])"
)
SHELL_LANGUAGES = {"", "sh", "bash", "zsh", "fish", "shell", "console", "terminal", "ps", "cmd"}
KNOWN_COMMANDS = frozenset(
    [
        "apt",
        "apt-get",
        "aws",
        "az",
        "bash",
        "brew",
        "bun",
        "bundle",
        "cargo",
        "cat",
        "cd",
        "chmod",
        "chown",
        "cmake",
        "composer",
        "conda",
        "cp",
        "crontab",
        "curl",
        "deno",
        "df",
        "dig",
        "dnf",
        "docker",
        "dotnet",
        "du",
        "echo",
        "env",
        "export",
        "ffmpeg",
        "find",
        "fly",
        "forge",
        "gcc",
        "gcloud",
        "gem",
        "gh",
        "git",
        "go",
        "gradle",
        "grep",
        "head",
        "helm",
        "heroku",
        "htop",
        "ip",
        "java",
        "journalctl",
        "jq",
        "just",
        "kill",
        "kubectl",
        "less",
        "ln",
        "ls",
        "lsof",
        "make",
        "mkdir",
        "mount",
        "mv",
        "mvn",
        "mypy",
        "mysql",
        "nano",
        "nc",
        "netlify",
        "nix",
        "node",
        "npm",
        "npx",
        "openclaw",
        "openssl",
        "pacman",
        "php",
        "pip",
        "pip3",
        "pipx",
        "pnpm",
        "podman",
        "poetry",
        "ps",
        "psql",
        "pytest",
        "python",
        "python3",
        "rails",
        "redis-cli",
        "rg",
        "rm",
        "rsync",
        "ruby",
        "ruff",
        "rustc",
        "rustup",
        "scp",
        "sed",
        "service",
        "sh",
        "sort",
        "source",
        "sqlite3",
        "ssh",
        "sudo",
        "systemctl",
        "tail",
        "tar",
        "terraform",
        "tiermem",
        "tmux",
        "top",
        "touch",
        "tsc",
        "uv",
        "uvicorn",
        "vercel",
        "vim",
        "wc",
        "wget",
        "which",
        "xargs",
        "yarn",
        "yum",
        "zsh",
    ]
)
_FLAG = re.compile(r"\s--?[A-Za-z]")


@dataclass
class Metadata:
    """The URLs, shell commands and file paths a text mentions."""

    urls: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.urls or self.commands or self.paths)

    def merge(self, other: Metadata) -> Metadata:
        """Union, order kept (this one's items first)."""
        return Metadata(
            urls=unique([*self.urls, *other.urls]),
            commands=unique([*self.commands, *other.commands]),
            paths=unique([*self.paths, *other.paths]),
        )

    def as_dict(self) -> dict[str, list[str]]:
        return {"urls": self.urls, "commands": self.commands, "paths": self.paths}


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def extract(text: str) -> Metadata:
    """Every URL, command and path in `text`, in order of appearance, without repeats."""
    urls = find_urls(text)
    without_urls = _URL.sub(" ", text) if urls else text
    return Metadata(urls=urls, commands=find_commands(text), paths=find_paths(without_urls))


def find_urls(text: str) -> list[str]:
    if "://" not in text and "www." not in text.lower():
        return []
    return unique(clean_url(m.group(0)) for m in _URL.finditer(text))


def clean_url(url: str) -> str:
    """Drop the sentence punctuation a URL is followed by, and a closing bracket it did not open
    (`(see https://x.org/a)` but `https://en.wikipedia.org/wiki/Foo_(bar)` stays whole)."""
    while url:
        last = url[-1]
        if last in _TRAILING or (last in _CLOSERS and url.count(last) > url.count(_CLOSERS[last])):
            url = url[:-1]
        else:
            break
    return url if "://" in url or (url.lower().startswith("www.") and len(url) > 4) else ""


def find_commands(text: str) -> list[str]:
    if "`" not in text and "$" not in text and "~~~" not in text:
        return []
    found: list[str] = []
    for match in _FENCE.finditer(text):
        language = match.group(2).lower()
        for line in match.group(3).splitlines():
            line = line.strip()
            prompted = line[:2] in ("$ ", "> ")
            if prompted:
                line = line[2:].strip()
            if not line or line.startswith("#"):
                continue
            if prompted or (language in SHELL_LANGUAGES and language) or looks_like_command(line):
                found.append(line)
    prose = _FENCE.sub(" ", text)
    found += [m.group(1).strip() for m in _INLINE.finditer(prose) if looks_like_command(m.group(1))]
    found += [m.group(1).strip() for m in _PROMPT.finditer(prose) if looks_like_command(m.group(1))]
    return unique(found)


def looks_like_command(text: str) -> bool:
    """A span starts with a known program (after `sudo`/`VAR=x`), or runs a local script."""
    words = text.strip().split()
    while words and (words[0] == "sudo" or ("=" in words[0] and not words[0].startswith("="))):
        words = words[1:]
    if not words:
        return False
    first = words[0]
    if first in KNOWN_COMMANDS:
        return len(words) > 1 or first in ("ls", "make", "pytest", "htop", "top", "df")
    runs_script = first.startswith(("./", "~/", "/")) and len(words) > 1
    return runs_script and _FLAG.search(" " + text) is not None


def find_paths(text: str) -> list[str]:
    if "/" not in text and "\\" not in text:
        return []
    out = []
    for match in _PATH.finditer(text):
        path = match.group(0).rstrip(_TRAILING)
        if len(path) > 2 and not path.startswith("//"):
            out.append(path)
    return unique(out)


def fit(values: Iterable[str], room: int) -> list[str]:
    """At most `room` distinct values (a fact holds at most 50 of each kind)."""
    return unique(values)[: max(0, room)]
