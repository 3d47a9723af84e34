"""Facts that change over MCP (stdio, the SDK's client): the agent says what a memory
replaces, recall puts the current fact first and explains it, as_of answers what held then,
memory_changes lists it, a wrong one is undone, bad input is an error that names its kind."""

from __future__ import annotations

from pathlib import Path

from mcp import ClientSession

from tests.agent.test_mcp import call, error, with_server


def test_an_agent_supersedes_recalls_lists_and_undoes_over_mcp(tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        old = await call(s, "memory_store", content="The team standup is at 9:30 on Zoom")
        new = await call(
            s,
            "memory_store",
            content="The team standup happens at 10:00 in the Lisbon office",
            supersedes=[old["id"]],
        )
        assert new["supersedes"] == [old["id"]]
        recalled = await call(s, "memory_recall", query="when is the team standup")
        ids = [e["id"] for e in recalled["entries"]]
        assert ids.index(new["id"]) < ids.index(old["id"])
        stale = next(e for e in recalled["entries"] if e["id"] == old["id"])
        assert "superseded on" in stale["why"] and new["id"] in stale["why"]
        then = await call(s, "memory_recall", query="team standup", as_of="2000-01-01")
        assert then["entries"] == []  # before anything was said
        listed = await call(s, "memory_changes", since="2000-01-01")
        assert [(c["old"]["id"], c["new"]["id"]) for c in listed["changes"]] == [
            (old["id"], new["id"])
        ]
        await call(s, "memory_unsupersede", id=old["id"])
        assert (await call(s, "memory_changes", since="2000-01-01"))["changes"] == []
        again = await call(s, "memory_supersede", old_id=old["id"], new_id=new["id"])
        assert again["new"]["id"] == new["id"]
        assert "InvalidInput" in await error(s, "memory_changes", since="last week")
        assert "NotFound" in await error(s, "memory_supersede", old_id="nope")
        assert "InvalidInput" in await error(
            s, "memory_supersede", old_id=new["id"], new_id=old["id"]
        )

    with_server(tmp_path / "home", tmp_path / "err.log", body)
