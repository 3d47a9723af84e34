"""Every export format imported back into a fresh agent and a fresh home, compared field by
field with the memory it came from: what comes back different is exactly what
`docs/import-export.md` lists as the format's loss."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import Cli
from tiermem.core import curate
from tiermem.core.engine import Memory
from tiermem.core.remember import Entry, remember

DOCS = Path(__file__).parent.parent.parent / "docs" / "import-export.md"
AGENT = "origin"
FIELDS = (
    "category",
    "importance",
    "created_at",
    "valid_from",
    "tags",
    "related_to",
    "urls",
    "commands",
    "paths",
    "pinned",
    "expires_at",
    "superseded_by",
    "superseded_at",
    "tier",
    "access_count",
    "last_access",
    "source",
)
LOST: dict[str, set[str]] = {
    "json": set(),
    "mem0": {"hot"},
    "folder": {"access_count", "last_access", "source"},
    "basic-memory": set(FIELDS) - {"category", "tags"},
}
"""What each format does not carry (the docs' table says the same). A field listed may still
come back equal by chance (a default, or supersession found again by the import)."""


def _export(cli: Cli, fmt: str, where: Path) -> list[str]:
    """Export in `fmt`; the import arguments that read it back."""
    if fmt == "json":
        cli.json("export", "--format", "json", "-o", str(where))
        return ["import", str(where)]
    if fmt == "folder":
        cli.json("export", "--format", "folder", str(where))
        return ["import", str(where)]
    cli.json("export", "--format", fmt, "-o", str(where))
    return ["import", "--from", fmt, str(where)]


def _build(cli: Cli) -> None:
    """A home with every kind of memory, through the CLI where the CLI has the verb."""
    ids = {}
    stores = {
        "docs": ["--category", "projects/docs", "--importance", "0.9", "--tag", "docs",
                 "--tag", "deploy", "--url", "https://docs.example.com/build",
                 "--command", "make html", "--path", "/srv/docs/conf.py"],
        "lisbon": ["--category", "people/ana", "--importance", "0.6"],
        "porto": ["--category", "people/ana", "--importance", "0.7"],
        "oat": ["--category", "preferences", "--importance", "0.4", "--tag", "coffee"],
        "old": ["--category", "events", "--importance", "0.2"],
        "frozen": ["--category", "events/archive", "--importance", "0.1"],
        "deadline": ["--category", "tasks", "--importance", "0.8"],
    }  # fmt: skip
    texts = {
        "docs": "The docs site is built with Sphinx and deployed from the docs branch",
        "lisbon": "Ana lives in Lisbon",
        "porto": "Ana moved to Porto last spring",
        "oat": "Sam drinks oat milk flat whites every morning",
        "old": "The 2019 offsite was held in a barn near Sintra",
        "frozen": "The first prototype ran on a Raspberry Pi 2",
        "deadline": "Send the Q4 invoice to Northwind before the fifth of December",
    }
    for name, args in stores.items():
        ids[name] = cli.json("store", "--text", texts[name], *args)["id"]
    cli.json("edit", ids["porto"], "--url", "https://maps.example.com/porto")
    cli.json("link", ids["docs"], ids["deadline"])
    cli.json("pin", ids["oat"])
    cli.json("retrieve", "Sintra offsite barn")
    cli.json("hot", "--update", "owner_profile", '{"name": "Sam", "city": "Porto"}')
    cli.json("hot", "--add-project", "Docs", "--description", "The docs site", "--status", "on")
    cli.json("hot", "--add-task", "Review the Sphinx theme")
    cli.json("hot", "--add-event", "Shipped the docs branch")
    cli.json("hot", "--add-lesson", "Never deploy docs on a Friday", "--category", "lessons")
    with Memory(cli.home, AGENT) as mem:  # no CLI verb: the TUI's tier keys, MCP's expiry
        curate.lower_tier(mem, ids["old"])
        curate.lower_tier(mem, ids["frozen"])
        curate.lower_tier(mem, ids["frozen"])
        remember(mem, Entry(text=texts["deadline"], expires="2099-12-05"))
        remember(mem, Entry(text=texts["porto"], supersedes=[ids["lisbon"]]))


def _memories(cli: Cli, home: Path, agent: str) -> dict[str, dict[str, Any]]:
    """Every memory of the agent by text, ids replaced by texts (ids are the agent's own)."""
    code, out, err = cli("--agent-id", agent, "--json", "export", "--format", "json", home=home)
    assert code == 0, err
    data = json.loads(out)
    text_of = {m["id"]: m["text"] for m in data["memories"]}
    out_by_text = {}
    for m in data["memories"]:
        record = dict(m) | m["metadata"]
        record["related_to"] = sorted(text_of[i] for i in m["related_to"])
        record["superseded_by"] = text_of.get(m["superseded_by"], m["superseded_by"])
        out_by_text[m["text"]] = record
    return out_by_text | {"hot": _hot(data["hot"])}


def _hot(hot: dict[str, Any]) -> dict[str, Any]:
    ctx = hot["active_context"]
    return {
        "profile": hot["owner_profile"],
        "projects": sorted(p["name"] for p in ctx["projects"]),
        "tasks": sorted(t["text"] for t in ctx["tasks"]),
        "events": sorted(e["text"] for e in ctx["events"]),
        "lessons": sorted(x["text"] for x in hot["critical_lessons"]),
    }


def _differences(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """The fields (and `hot`) that came back different for any memory."""
    assert set(after) == set(before), "the same memories, no more, no fewer"
    differ = {"hot"} if before["hot"] != after["hot"] else set()
    for text, old in before.items():
        if text == "hot":
            continue
        new = after[text]
        for name in FIELDS:
            a, b = old[name], new[name]
            same = abs(a - b) < 1e-3 if isinstance(a, float) and isinstance(b, float) else a == b
            if not same:
                differ.add(name)
    return differ


@pytest.mark.parametrize("fmt", sorted(LOST))
def test_an_export_comes_back_with_exactly_what_its_format_carries(
    capsys, tmp_path: Path, fmt: str
) -> None:
    home = tmp_path / "home"
    cli = Cli(capsys, home, AGENT)
    _build(cli)
    before = _memories(cli, home, AGENT)
    assert len(before) == 8  # seven memories and hot memory
    args = _export(cli, fmt, tmp_path / f"export-{fmt}")
    targets = [(home, f"copy-{fmt}"), (tmp_path / "fresh-home", AGENT)]
    for target_home, agent in targets:
        code, _, err = cli("--agent-id", agent, *args, home=target_home)
        assert code == 0, err
        after = _memories(cli, target_home, agent)
        assert _differences(before, after) <= LOST[fmt], (target_home, agent)
        code, out, err = cli("--agent-id", agent, "--json", *args, home=target_home)
        assert code == 0, err
        assert json.loads(out)["stored"] == 0
        assert _memories(cli, target_home, agent) == after  # importing twice adds nothing


def test_the_docs_list_the_same_losses() -> None:
    table = DOCS.read_text().split("## What each format carries", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w-]+)` \|.*\| (.*) \|$", table, re.M)
    documented = {fmt: set(re.findall(r"`(\w+)`", lost)) for fmt, lost in rows}
    assert documented == LOST
