"""Episodes through the CLI: one per conversation, replay-safe, searchable, exported as markdown
with front matter, pruned when they expire, and the LLM summary falling back with a note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from tests.clikit import cli_result as cli
from tests.conftest import Clock
from tiermem.core import episodes
from tiermem.core.config import config_from_mapping
from tiermem.core.conversation import conversation_end
from tiermem.core.engine import Memory
from tiermem.core.llm import LLMError
from tiermem.core.transcript import parse
from tiermem.tui.cli import run
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.graph import episode_get, episode_list, episode_search

TRANSCRIPT = """user: Maya works on Ledgerly since March 2026. She prefers PostgreSQL for Ledgerly.
assistant: Noted, Ledgerly stays on PostgreSQL.
user: We decided to deploy Ledgerly with Docker on Fridays from now on.
"""


def end(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str = TRANSCRIPT) -> Any:
    path = tmp_path / "t.txt"
    path.write_text(text)
    code, out = cli(capsys, tmp_path / "home", "conversation-end", str(path))
    assert code == 0
    return out


def test_conversation_end_writes_one_episode_and_a_replay_adds_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = end(capsys, tmp_path)
    assert report["episode"].startswith("ep-")
    end(capsys, tmp_path)
    code, listed = cli(capsys, tmp_path / "home", "episodes", "list")
    assert code == 0 and listed["total"] == 1
    episode = listed["episodes"][0]
    assert len(episode["abstract"]) <= 200 and episode["abstract"]
    assert "Ledgerly" in episode["topics"] and {"user", "assistant"} <= set(episode["participants"])
    assert set(report["stored"]) <= set(episode["fact_ids"])
    assert episode["expires_at"] > episode["created_at"]
    code, shown = cli(capsys, tmp_path / "home", "episodes", "show", report["episode"][:8])
    assert code == 0 and shown["id"] == report["episode"]


def test_episodes_are_found_by_keyword_and_a_missing_one_is_exit_4(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    end(capsys, tmp_path)
    code, found = cli(capsys, tmp_path / "home", "episodes", "search", "docker deploy")
    assert code == 0 and len(found["episodes"]) == 1
    code, none = cli(capsys, tmp_path / "home", "episodes", "search", "kubernetes")
    assert code == 0 and none["episodes"] == []
    assert run(["--home", str(tmp_path / "home"), "episodes", "show", "ep-nothing"]) == 4
    assert "no episode" in capsys.readouterr().err


def test_export_writes_markdown_with_yaml_front_matter(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = end(capsys, tmp_path)
    code, out = cli(capsys, tmp_path / "home", "episodes", "export", str(tmp_path / "out"))
    assert code == 0 and len(out["files"]) == 1
    text = Path(out["files"][0]).read_text()
    front, _, body = text.removeprefix("---\n").partition("\n---\n")
    fields = {k: json.loads(v) for k, _, v in (line.partition(": ") for line in front.splitlines())}
    assert {"timestamp", "tags", "summary", "participants"} <= set(fields)
    assert fields["id"] == report["episode"] and "Ledgerly" in fields["tags"]
    assert fields["summary"] in body


def test_expired_episodes_are_pruned_by_consolidation(tmp_path: Path, clock: Clock) -> None:
    config = config_from_mapping({"episodes": {"ttl_days": 2}}, "test")
    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        mem.conversation_end(parse(TRANSCRIPT), TRANSCRIPT)
        assert episodes.count(mem.db, mem.agent_id) == 1
        clock.advance(1)
        assert mem.consolidate("quick").episodes_pruned == []
        clock.advance(2)
        assert len(mem.consolidate("quick").episodes_pruned) == 1
        assert episodes.count(mem.db, mem.agent_id) == 0


def test_llm_summary_falls_back_to_the_extractive_one_and_says_so(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "m")
    config = config_from_mapping({"episodes": {"summary": "llm"}}, "test")

    def failing(url: str, body: bytes, headers: dict[str, str], timeout: float) -> bytes:
        raise LLMError("the LLM endpoint timed out")

    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        report = mem_end(mem, failing)
        assert any("extractive summary used" in n for n in report.notes)
        assert report.episode is not None and "Ledgerly" in report.episode.summary


def test_llm_summary_is_used_when_the_endpoint_answers(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "m")
    config = config_from_mapping({"episodes": {"summary": "llm"}}, "test")
    content = json.dumps(
        {"summary": "Maya and the user planned Ledgerly deploys.", "topics": ["Ledgerly"]}
    )

    def answering(url: str, body: bytes, headers: dict[str, str], timeout: float) -> bytes:
        return json.dumps({"choices": [{"message": {"content": content}}]}).encode()

    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        report = mem_end(mem, answering)
        assert report.episode is not None
        assert report.episode.summary == "Maya and the user planned Ledgerly deploys."
        assert report.episode.topics == ("Ledgerly",)


def mem_end(mem: Memory, transport: Any) -> Any:
    return conversation_end(mem, parse(TRANSCRIPT), TRANSCRIPT, transport=transport)


def test_episode_tools_over_mcp_find_read_and_refuse_unknown_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = end(capsys, tmp_path)
    home = Home(tmp_path / "home", "default", None)
    try:
        found = episode_search(home, "Docker deploys")
        listed = episode_list(home)
        one = episode_get(home, report["episode"])
        with pytest.raises(ToolError, match="NotFound: no episode"):
            episode_get(home, "ep-000000")
    finally:
        home.close()
    assert [e["id"] for e in found["episodes"]] == [report["episode"]]
    assert listed["episodes"][0]["id"] == one["id"] == report["episode"]
