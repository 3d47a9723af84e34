"""`tiermem mcp` driven by the official SDK's own client over stdio (a real subprocess): every
tool, errors as MCP tool errors with clear messages, the server alive after each error, and
the documented tool list equal to the server's."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client

from tiermem.core import agents
from tiermem.core.engine import Memory
from tiermem.core.tokens import count_tokens
from tiermem.tui import cli
from tiermem.tui import mcp as mcpmod

TOOLS_MD = Path(__file__).parents[2] / "packaging" / "openclaw" / "TOOLS.md"


def documented_tools() -> list[str]:
    return re.findall(r"^## (\w+)$", TOOLS_MD.read_text(), re.M)


def with_server(home: Path, errlog: Path, body: Callable[[ClientSession], Awaitable[None]]) -> None:
    env = {"TIERMEM_HOME": str(home)}
    for name in ("TIERMEM_DRIVER", "PYTHONPATH"):  # the package under test, as the tests see it
        if os.environ.get(name):
            env[name] = os.environ[name]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tiermem.tui", "mcp", "--session", "s-default"], env=env
    )

    async def main() -> None:
        with errlog.open("w") as log:
            async with (
                stdio_client(params, errlog=log) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await body(session)

    asyncio.run(main())


async def call(session: ClientSession, tool: str, **args: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content  # text and structure agree
    out: dict[str, Any] = result.structured_content
    return out


async def error(session: ClientSession, tool: str, **args: Any) -> str:
    result = await session.call_tool(tool, args)
    assert result.is_error
    text: str = result.content[0].text  # type: ignore[union-attr]
    return text


def test_every_tool_over_stdio(tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        listed = await s.list_tools()
        names = [t.name for t in listed.tools]
        assert names == documented_tools()
        assert {
            "memory_store",
            "memory_recall",
            "memory_search",
            "memory_get",
            "memory_hot",
            "memory_index_status",
            "memory_audit",
            "memory_forget",
            "memory_pin",
        } <= set(names)
        assert all(t.description and t.input_schema["type"] == "object" for t in listed.tools)

        text = "The production deploy runs make deploy-prod from the ops repo"
        stored = await call(
            s,
            "memory_store",
            content=text,
            category="projects/ops",
            priority="high",
            tags=["deploy"],
            expires="2999-01-01",
            url="https://ops.example.org/runbook",
            command=["make deploy-prod"],
            path="/srv/ops",
            context="the owner said so",
        )
        assert stored["stored"] and not stored["deduplicated"] and stored["priority"] == "high"
        assert stored["token_cost"] == count_tokens(text)
        again = await call(s, "memory_store", content=text.upper(), tags=["prod"])
        assert again["deduplicated"] and again["id"] == stored["id"]
        assert again["tags"] == ["deploy", "prod"]
        for i in range(20):
            await call(
                s,
                "memory_store",
                content=f"Deploy checklist item {i}: verify the canary metrics for service {i}",
                category="ops/checklist",
                importance=0.4,
            )

        recalled = await call(s, "memory_recall", query="production deploy", token_budget=3000)
        top = recalled["entries"][0]
        assert top["id"] == stored["id"] and top["tags"] == ["deploy", "prod"]
        assert "matched" in top["why"] and top["priority"] == "high"
        assert recalled["budget_remaining"] == 3000 - recalled["token_count"]
        assert recalled["session"] == "s-default"
        tight = await call(s, "memory_recall", query="deploy checklist canary", token_budget=40)
        assert 0 < len(tight["entries"]) < tight["total_entries_matched"]
        assert tight["token_count"] <= 40
        only = await call(
            s, "memory_recall", query="deploy", priority_min="high", format="detailed"
        )
        assert [e["id"] for e in only["entries"]] == [stored["id"]]
        assert only["entries"][0]["metadata"]["urls"] == ["https://ops.example.org/runbook"]
        scoped = await call(s, "memory_recall", query="deploy", categories=["ops"])
        assert {e["category"] for e in scoped["entries"]} == {"ops/checklist"}

        found = await call(s, "memory_search", query="canary metrics", limit=3, session_id="s2")
        assert len(found["results"]) == 3 and found["terms"] == ["canary", "metrics"]
        got = await call(s, "memory_get", id=stored["id"])
        assert got["kind"] == "memory" and got["text"] == text
        assert (
            got["source"] == "mcp: the owner said so" and got["expires"] == "2999-01-02T00:00:00Z"
        )
        assert got["sessions"] == ["s-default"] and got["tags"] == ["deploy", "prod"]
        edited = await call(
            s, "memory_update", id=stored["id"], content=text + " on Tuesdays", url=[]
        )
        assert edited["id"] == stored["id"] and edited["text"] == text + " on Tuesdays"
        assert edited["tags"] == ["deploy", "prod"] and edited["sessions"] == ["s-default"]
        assert edited["metadata"]["urls"] == [] and edited["priority"] == "high"
        assert (await call(s, "memory_get", id=stored["id"]))["text"] == edited["text"]
        replay = await call(s, "memory_store", content=text)  # the text before the edit
        assert replay["deduplicated"] and replay["id"] == stored["id"]

        hot = await call(s, "memory_hot")
        assert hot["tokens"] == count_tokens(hot["memory_md"])
        updated = await call(
            s, "memory_hot", action="update", key="identity", value={"agent_name": "Claw"}
        )
        assert updated["hot"]["identity"] == {"agent_name": "Claw"}
        updated = await call(
            s, "memory_hot", action="update", key="lesson", value="Deploy only from main"
        )
        assert "Deploy only from main" in updated["memory_md"]
        lesson_id = updated["hot"]["critical_lessons"][0]["id"]
        assert (await call(s, "memory_get", id=lesson_id))["kind"] == "lesson"

        status = await call(s, "memory_index_status")
        assert status["progressive"]["total_entries"] == 21
        assert status["index"]["always_loaded_tokens"] <= status["index"]["always_loaded_limit"]
        audit = await call(s, "memory_audit")
        assert audit["analysis"]["total_tokens"] > 0
        assert all("estimated_savings_tokens" in r for r in audit["recommendations"])

        pinned = await call(s, "memory_pin", id=stored["id"])
        assert pinned["memories"] == [stored["id"]]
        assert (await call(s, "memory_pin", id=stored["id"], unpin=True))["action"] == "unpin"
        forgotten = await call(s, "memory_forget", id=stored["id"])
        assert forgotten["action"] == "archived"
        after = await call(s, "memory_recall", query="production deploy ops repo")
        assert stored["id"] not in [e["id"] for e in after["entries"]]
        restored = await call(s, "memory_restore", id="projects/ops:production-deploy")
        assert restored["id"] == stored["id"]
        by_keyword = await call(s, "memory_forget", keyword="canary")
        assert len(by_keyword["archived"]) == 20

        block = await call(s, "memory_context", message="how does the production deploy work?")
        assert "make deploy-prod" in block["context"]
        assert block["tokens"]["total"] == count_tokens(block["context"]) <= 3000
        trivial = await call(s, "memory_context", message="thanks!")
        assert trivial["trivial"] and trivial["memories"] == []
        chat = "User: We picked Grafana for the dashboards. [[pin:projects/ops:production]]\n"
        ended = await call(s, "memory_conversation_end", transcript=chat, session_id="c1")
        assert ended["tags"] == ["[[pin:projects/ops:production]]"]
        assert ended["hygiene"]["session"] == "c1"
        assert ended["hygiene"]["pinned"][0]["memories"] == [stored["id"]]
        again = await call(s, "memory_conversation_end", transcript=chat, session_id="c1")
        assert again["already_processed"]
        health = await call(s, "memory_health")
        assert health["report"].startswith("=== Memory Health ===")

    with_server(tmp_path / "home", tmp_path / "stderr.log", body)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_errors_are_mcp_errors_and_the_server_keeps_running(tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        assert "NotFound: no memory 'nope'" in await error(s, "memory_get", id="nope")
        both = await error(s, "memory_store", content="x", priority="low", importance=0.3)
        assert "InvalidInput: give priority or importance, not both" in both
        assert "InvalidInput: text is empty" in await error(s, "memory_store", content="  ")
        assert "token_budget" in await error(s, "memory_recall", query="x", token_budget=0)
        assert "priority" in await error(s, "memory_recall", query="x", priority_min="urgent")
        assert "InvalidInput: query is empty" in await error(s, "memory_recall", query=" ")
        assert "give id or keyword" in await error(s, "memory_forget")
        assert "NotFound" in await error(s, "memory_pin", id="nothing:at-all")
        assert "NotFound" in await error(s, "memory_restore", id="nothing")
        assert "needs a key" in await error(s, "memory_hot", action="update")
        assert "object value" in await error(
            s, "memory_hot", action="update", key="identity", value="text"
        )
        assert "scope" in await error(s, "memory_audit", scope="everything")
        assert await error(s, "memory_nothing") == "NotFound: unknown tool 'memory_nothing'"
        assert "no conversation messages" in await error(
            s, "memory_conversation_end", transcript=""
        )
        assert "past" in await error(s, "memory_store", content="x", expires="2001-01-01")
        stored = await call(s, "memory_store", content="Still alive after the errors")
        assert stored["stored"]  # the server kept running

    with_server(tmp_path / "home", tmp_path / "stderr.log", body)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_tools_doc_is_generated_from_the_server(tmp_path: Path) -> None:
    server, state = mcpmod.build_server(tmp_path / "home", "default")
    try:
        assert TOOLS_MD.read_text() == mcpmod.tools_markdown(server)
        assert documented_tools() == [t.name for t in mcpmod.tool_list(server)]
    finally:
        state.close()


def test_a_read_on_a_mistyped_agent_creates_nothing(tmp_path: Path) -> None:
    """The server opened on a misspelt agent: a read fails with the close match and leaves no
    agent behind; the first write creates it, as the CLI does."""
    home = tmp_path / "home"
    assert cli.run(["--home", str(home), "store", "--text", "deploys go out on Fridays"]) == 0
    env = {"TIERMEM_HOME": str(home)}
    for name in ("TIERMEM_DRIVER", "PYTHONPATH"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    args = ["-m", "tiermem.tui", "--agent-id", "defualt", "mcp"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env)

    async def main() -> tuple[str, list[str], dict[str, Any]]:
        with (tmp_path / "err.log").open("w") as log:
            async with (
                stdio_client(params, errlog=log) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                failed = await error(session, "memory_recall", query="deploys")
                with Memory(home, "default") as mem:
                    after_read = agents.known_agents(mem.db)
                stored = await call(session, "memory_store", content="a new agent's first fact")
                return failed, after_read, stored

    failed, after_read, stored = asyncio.run(main())
    assert "NotFound" in failed and "'default'" in failed
    assert after_read == ["default"]
    assert stored["id"]
    with Memory(home, "default") as mem:
        assert agents.known_agents(mem.db) == ["default", "defualt"]
