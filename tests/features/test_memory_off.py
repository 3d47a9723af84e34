"""`[agents.NAME] memory = false` turns an agent's memory off on every path an agent stores or
searches through, through the real `tiermem` command and MCP over stdio: conversation-end,
ingestion, imports, the watcher, hot memory, the graph and working memory all exit 86 and store
nothing; every MCP tool answers `MemoryOff` except `memory_context`, whose block is empty; the
spaces the agent includes do not answer either. What was stored before stays whole, and the
person can still export it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.agent.test_mcp import call, with_server
from tests.clikit import Cli

RUNBOOK = "The deploy runbook for the payments service lives at ops/runbook.md"
TRANSCRIPT = (
    "User: I moved to Lisbon last month and I prefer tea over coffee.\n"
    "Assistant: Noted, Lisbon and tea.\n"
)
OFF = "memory is off for agent 'alice'"


@pytest.fixture
def alice(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    cli = Cli(capsys, tmp_path / "home", "alice")
    cli.json("store", "--text", RUNBOOK)
    (tmp_path / "home" / "config.toml").write_text("[agents.alice]\nmemory = false\n")
    return cli


def _stored(cli: Cli) -> dict[str, Any]:
    """What the agent holds: its export, its graph's entities and a session's working memory."""
    return {
        "export": cli.json("export", "--format", "json"),
        "entities": cli.json("graph", "entities")["entities"],
        "working": cli.json("working", "show", "--session", "s1"),
    }


def test_every_cli_write_path_exits_86_and_stores_nothing(alice: Cli, tmp_path: Path) -> None:
    before = _stored(alice)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "2026-11-02.md").write_text("# Monday\n- Switched the billing queue to Kafka\n")
    (tmp_path / "chat.txt").write_text(TRANSCRIPT)
    carol = Cli(alice.capsys, tmp_path / "home", "carol")
    carol.json("store", "--text", "Carol keeps the on-call rota in the wiki")
    (tmp_path / "carol.json").write_text(json.dumps(carol.json("export", "--format", "json")))
    refused = [
        alice("conversation-end", str(tmp_path / "chat.txt")),
        alice("ingest-daily", str(notes)),
        alice("import", str(tmp_path / "carol.json")),
        alice("watch", str(notes), "--timeout", "1"),
        alice("hot", "--add-lesson", "Always run the smoke tests first"),
        alice("graph", "add", "Sam", "lives_in", "Leeds"),
        alice("working", "set", '{"task": "deploy"}', "--session", "s1"),
        alice("store", "--text", "Should not be kept"),
    ]
    for code, out, err in refused:
        assert code == 86, err
        assert out == "" and OFF in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1
    assert _stored(alice) == before


def test_reads_return_nothing_and_included_spaces_do_not_answer(alice: Cli, tmp_path: Path) -> None:
    bob = Cli(alice.capsys, tmp_path / "home", "bob")
    bob.json("spaces", "create", "team")
    bob.json("store", "--text", "The team's staging database is db-stage-2", "--space", "team")
    alice.json("spaces", "include", "team", "--role", "reader")  # the person's own upkeep works
    for search in (("retrieve", "staging database"), ("recall", "staging database")):
        code, out, err = alice(*search)
        assert code == 86 and out == "" and OFF in err
    code, _, err = alice("graph", "search", "where is the staging database")
    assert code == 86 and OFF in err
    block = alice.json("context", "-q", "which staging database does the team use?")
    assert block["context"] == "" and block["memories"] == []
    assert any(OFF in note for note in block["notes"])
    (tmp_path / "home" / "config.toml").write_text("")
    found = alice.json("retrieve", "staging database")["results"]
    assert [r["explanation"]["space"] for r in found] == ["team"]


CHOSEN = {"memory_forget": {"keyword": "payments"}}
"""Arguments a tool checks among themselves before it opens the memory."""


def _arguments(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A valid value for each required argument of a tool, from its input schema."""
    values = {"string": "payments", "integer": 1, "number": 1, "boolean": True, "object": {}}
    out: dict[str, Any] = {}
    for arg in schema.get("required", []):
        spec = schema["properties"][arg]
        if "enum" in spec:
            out[arg] = spec["enum"][0]
        elif spec.get("type") == "array":
            out[arg] = ["payments"]
        else:
            kinds = [spec.get("type")] + [s.get("type") for s in spec.get("anyOf", [])]
            out[arg] = next(values[k] for k in kinds if k in values)
    return out | CHOSEN.get(name, {})


def test_every_mcp_tool_answers_memory_off_and_the_context_is_empty(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[agents.default]\nmemory = false\n")

    async def body(s: ClientSession) -> None:
        tools = (await s.list_tools()).tools
        assert len(tools) > 20
        for tool in tools:
            if tool.name == "memory_context":
                continue
            result = await s.call_tool(tool.name, _arguments(tool.name, tool.input_schema))
            text = result.content[0].text  # type: ignore[union-attr]
            assert result.is_error and text.startswith("MemoryOff: "), (tool.name, text)
            assert "memory is off for agent 'default'" in text
        block = await call(s, "memory_context", message="where does the runbook live?")
        assert block["context"] == "" and block["memories"] == []

    with_server(home, tmp_path / "stderr.log", body)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()
    assert sorted(p.name for p in home.iterdir()) == ["config.toml"]  # nothing was created


def test_an_mcp_server_for_a_new_agent_with_memory_off_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The server started for an agent the home does not hold yet, whose memory is off: a
    write, a read and the context call all answer without creating the agent."""
    home = tmp_path / "home"
    owner = Cli(capsys, home)
    owner.json("store", "--text", RUNBOOK)
    (home / "config.toml").write_text("[agents.helper]\nmemory = false\n")
    before = owner.json("agents", "list")["agents"]
    env = {"TIERMEM_HOME": str(home)}
    for name in ("TIERMEM_DRIVER", "PYTHONPATH"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    args = ["-m", "tiermem.tui", "--agent-id", "helper", "mcp"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)

    async def main() -> list[Any]:
        with (tmp_path / "err.log").open("w") as log:
            async with (
                stdio_client(params, errlog=log) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                store = await session.call_tool("memory_store", {"content": "Should not be kept"})
                recall = await session.call_tool("memory_recall", {"query": "runbook"})
                block = await call(session, "memory_context", message="where is the runbook?")
                return [store, recall, block]

    store, recall, block = asyncio.run(main())
    for refused in (store, recall):
        text = refused.content[0].text
        assert refused.is_error and text.startswith("MemoryOff: ") and "'helper'" in text
    assert block["context"] == "" and any("memory is off" in n for n in block["notes"])
    assert owner.json("agents", "list")["agents"] == before
    assert "Traceback" not in (tmp_path / "err.log").read_text()
