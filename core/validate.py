"""Completeness checks for daily notes (seed v2.1): remember *how*, not only *what*.

A note line that mentions a site or tool (a repo, a dashboard, GitHub, Vercel…) without a URL,
or says something was run, installed or deployed without the command, is a warning with a
suggestion; so is a note without any next step (a `## Next steps` section, an open `- [ ]`
checkbox, a TODO). Warnings never change memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiermem.core import metadata as meta
from tiermem.core.errors import InvalidInput
from tiermem.core.transcript import read_text

SITES = (
    "github",
    "gitlab",
    "bitbucket",
    "vercel",
    "netlify",
    "heroku",
    "cloudflare",
    "railway",
    "supabase",
    "firebase",
    "notion",
    "figma",
    "jira",
    "confluence",
    "trello",
    "asana",
    "slack",
    "discord",
    "grafana",
    "sentry",
    "datadog",
    "kibana",
    "hugging face",
    "huggingface",
    "pypi",
    "npmjs",
    "docker hub",
    "dockerhub",
    "aws console",
    "google docs",
    "google drive",
    "google sheets",
    "dropbox",
    "airtable",
    "stripe",
    "bscscan",
    "etherscan",
    "faucet",
)
_SITE_WORDS = r"website|web site|site|dashboard|portal|repo|repository|docs|documentation|"
_SITE_WORDS += r"wiki|page|link|url|signed up|sign up|registered|account on|console|endpoint|api"
_SITE = re.compile(rf"\b(?:{_SITE_WORDS}|{'|'.join(re.escape(s) for s in SITES)})\b", re.I)
_COMMAND = re.compile(
    r"\b(?:ran|run|running|executed|execute|installed|install|deployed|deploy|restarted|"
    r"restart|migrated|migration|command|script|cli|terminal|shell|cron(?:job)?|pip|npm|"
    r"docker|kubectl|ssh|git (?:push|pull|clone|rebase|merge))\b",
    re.I,
)
_NEXT = re.compile(
    r"^\s*#{1,6}\s*(?:next(?: steps?)?|todo|to do|tasks|action items|tomorrow|follow[- ]ups?)\b"
    r"|^\s*[-*+]\s+\[ \]|\btodo\b|\bnext(?: step)?s?:|\bfollow[- ]up\b|\bnext steps?\b"
    r"|\bneed to\b|\btomorrow\b",
    re.I | re.M,
)
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Warning_:
    line: int
    kind: str
    """missing-url, missing-command or missing-next-steps."""
    message: str
    suggestion: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "kind": self.kind,
            "message": self.message,
            "suggestion": self.suggestion,
        }


@dataclass
class NoteCheck:
    path: Path
    warnings: list[Warning_] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": str(self.path),
            "warnings": [w.as_dict() for w in self.warnings],
            "error": self.error,
        }


def check_text(text: str, path: Path) -> NoteCheck:
    result = NoteCheck(path)
    lines = text.splitlines()
    in_fence = False
    for number, raw in enumerate(lines, 1):
        if _FENCE.match(raw):
            in_fence = not in_fence
            continue
        line = raw.strip()
        if in_fence or not line or line.startswith("#"):
            continue
        # the next line may carry what this one lacks (a URL or a command under a bullet)
        nearby = line + "\n" + (lines[number].strip() if number < len(lines) else "")
        found = meta.extract(nearby)
        site = _SITE.search(line)
        if site and not found.urls:
            name = site.group(0)
            result.warnings.append(
                Warning_(
                    number,
                    "missing-url",
                    f"mentions {name!r} without a URL",
                    f"add the link, e.g. '{name}: https://…'",
                )
            )
        action = _COMMAND.search(line)
        if action and not found.commands and "`" not in line:
            result.warnings.append(
                Warning_(
                    number,
                    "missing-command",
                    f"says {action.group(0)!r} without the command",
                    "add the exact command in backticks, e.g. `npm run deploy`",
                )
            )
    if not _NEXT.search(text):
        result.warnings.append(
            Warning_(
                0,
                "missing-next-steps",
                "no next steps",
                "add a '## Next steps' section or '- [ ] …' items for what comes next",
            )
        )
    return result


def check_file(path: Path) -> NoteCheck:
    """Check one note; an unreadable, binary or empty file is this check's error."""
    try:
        _, text = read_text(path)
    except InvalidInput as exc:
        return NoteCheck(path, error=str(exc))
    return check_text(text, path)
