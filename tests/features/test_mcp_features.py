"""The MCP tools of tags, links, budgets and working memory, over stdio with the SDK's client."""

from __future__ import annotations

import json
from pathlib import Path

from mcp import ClientSession

from tests.agent.test_mcp import call, error, with_server


def test_tags_links_budget_and_working_memory_over_mcp(tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        base = await call(
            s,
            "memory_store",
            content="The VPN gateway is vpn.example.org",
            category="infra",
            tags=["network"],
        )
        linked = await call(
            s,
            "memory_store",
            content="VPN accounts are requested from Dana",
            category="infra",
            related_to=[base["id"]],
        )
        assert linked["related_to"] == [base["id"]]
        got = await call(s, "memory_get", id=base["id"])
        assert got["related_to"] == [linked["id"]] and got["tags"] == ["network"]
        assert "NotFound" in await error(
            s, "memory_store", content="Orphan fact about DNS", related_to=["nope"]
        )
        found = await call(s, "memory_search", query="network", tags=["network"])
        assert [r["id"] for r in found["results"]] == [base["id"]]
        assert found["results"][0]["tags"] == ["network"]
        recalled = await call(s, "memory_recall", query="vpn gateway", include_context=True)
        ids = [e["id"] for e in recalled["entries"]]
        assert ids[0] == base["id"] and linked["id"] in ids
        tagged = await call(s, "memory_recall", query="vpn", tags=["network"])
        assert [e["id"] for e in tagged["entries"]] == [base["id"]]
        tiny = await call(s, "memory_recall", query="vpn gateway", token_budget=4)
        assert tiny["token_count"] <= 4 and tiny["entries"][0]["shortened"]

        assert (await call(s, "memory_working_get"))["working_memory"] == {}
        state = {"goal": "set up the VPN for Dana", "plan": ["request account", "send config"]}
        saved = await call(s, "memory_working_update", changes=state, replace=True)
        assert saved["working_memory"] == state and saved["session"] == "s-default"
        patched = await call(
            s, "memory_working_update", changes={"plan": None, "facts": {"os": "mac"}}
        )
        assert patched["working_memory"] == {"goal": state["goal"], "facts": {"os": "mac"}}
        huge = {"notes": ["many many words of notes " * 50] * 20}
        assert "LimitExceeded" in await error(s, "memory_working_update", changes=huge)
        kept = await call(s, "memory_working_get")
        assert kept["working_memory"] == patched["working_memory"]
        other = await call(s, "memory_working_get", session_id="another")
        assert other["working_memory"] == {}
        block = await call(s, "memory_context", message="how do I set up the VPN gateway")
        assert (
            "## Working memory" in block["context"]
            and "set up the VPN for Dana" in block["context"]
        )
        hot = await call(s, "memory_hot")
        assert hot["provenance"] == {}
        json.dumps(hot)

    with_server(tmp_path / "home", tmp_path / "err.log", body)
