"""The knowledge graph and a question's answer across shared spaces, through the real `tiermem`
command and MCP over stdio: `graph search` and `knowledge_graph_search` ask the graphs of the
spaces the agent includes too, each answer and entity labelled with its space and the agent's
own first; `retrieve` reaches a space's memory through the space's graph, and answers a
question from a space when the agent's own memory states no answer."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession

from tests.agent.test_mcp import call, with_server
from tests.clikit import Cli

LEEDS = "Sam lives in Leeds and works on Orchard"
KAFKA = "Orchard uses Kafka for its event queue"
MANAGER = "Sam reports to Priya since March"


@pytest.fixture
def bob(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    """Bob includes the space `team` as a reader; Alice wrote what it holds."""
    alice = Cli(capsys, tmp_path / "home", "alice")
    alice.json("spaces", "create", "team")
    for text in (LEEDS, KAFKA, MANAGER):
        alice.json("store", "--text", text, "--space", "team")
    reader = Cli(capsys, tmp_path / "home", "bob")
    reader.json("store", "--text", "The manager sync is on Mondays at ten")
    reader.json("store", "--text", "Ask the manager before deploying on Fridays")
    reader.json("spaces", "include", "team", "--role", "reader")
    return reader


def test_graph_search_answers_from_a_space_labelled_and_the_agent_s_own_first(bob: Cli) -> None:
    found = bob.json("graph", "search", "where does Sam live")
    assert found["answer"] == ["[space team] Sam lives in Leeds (since " + _day(found) + ")"]
    assert [(r["object"], r["space"]) for r in found["current"]] == [("Leeds", "team")]
    assert found["searched"] == [None, "team"]
    bob.json("store", "--text", "Sam lives in York now")
    found = bob.json("graph", "search", "where does Sam live")
    assert [(r["object"], r["space"], r["scope_boost"]) for r in found["current"]] == [
        ("York", None, 1.2),
        ("Leeds", "team", 1.0),
    ]
    assert found["answer"][1].startswith("[space team] Sam lives in Leeds")
    code, out, _ = bob("graph", "search", "Sam")
    named = [line for line in out.splitlines() if line.startswith("Sam (person)")]
    assert code == 0 and len(named) == 2
    assert sum("[space team]" in line for line in named) == 1
    assert "  Sam → lives_in → York (since" in out
    assert "  Sam → works_on → Orchard (since " in out and ") [space team]" in out
    bob.json("spaces", "exclude", "team")
    assert [r["object"] for r in bob.json("graph", "search", "where does Sam live")["current"]] == [
        "York"
    ]


def _day(found: dict[str, object]) -> str:
    current = found["current"]
    assert isinstance(current, list)
    return str(current[0]["valid_from"])


def test_retrieve_reaches_a_space_memory_through_the_space_s_graph(bob: Cli) -> None:
    found = bob.json("retrieve", "Sam")["results"]
    kafka = next(r for r in found if r["text"] == KAFKA)
    assert kafka["explanation"]["space"] == "team"
    assert kafka["explanation"]["via"] == "Sam → works_on → Orchard"


def test_a_question_is_answered_from_a_space_when_the_agent_s_own_memory_has_no_answer(
    bob: Cli,
) -> None:
    found = bob.json("retrieve", "who is the manager of Sam?")["results"]
    assert found[0]["text"] == MANAGER
    assert found[0]["explanation"]["space"] == "team"
    assert found[0]["explanation"]["via"].startswith("answers: the newest statement")
    bob.json("store", "--text", "Since last week Sam reports to Omar")
    found = bob.json("retrieve", "who is the manager of Sam?")["results"]
    assert [r["text"] for r in found[:2]] == ["Since last week Sam reports to Omar", MANAGER]
    assert [r["explanation"]["space"] for r in found[:2]] == [None, "team"]


def test_mcp_knowledge_graph_search_covers_the_spaces_and_returns_the_best_entity(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    alice = Cli(capsys, home, "alice")
    alice.json("spaces", "create", "team")
    alice.json("store", "--text", LEEDS, "--space", "team")
    Cli(capsys, home).json("spaces", "include", "team", "--role", "reader")  # the server's agent

    async def body(s: ClientSession) -> None:
        found = await call(s, "knowledge_graph_search", query="where does Sam live")
        assert found["answer"][0].startswith("[space team] Sam lives in Leeds")
        named = await call(s, "knowledge_graph_search", query="Sam", entity=True)
        assert named["entities"][0]["space"] == "team"
        assert named["entity"]["name"] == "Sam" and named["entity"]["space"] == "team"
        assert [m["text"] for m in named["entity"]["memories"]] == [LEEDS]

    with_server(home, tmp_path / "stderr.log", body)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()
