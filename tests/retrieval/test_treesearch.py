"""LLM tree search against a real OpenAI-compatible server on loopback: the model's choice of
categories and its reasons, and every failure falling back to keyword mode with a note."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.retrieval.conftest import completion
from tiermem.core.config import Config, LLMConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.treesearch import SCHEMA, TreeSearchError, choose_paths, parse_choices
from tiermem.core.warm import NewFact
from tiermem.tui.cli import run


def choice(*paths: tuple[str, float, str]) -> bytes:
    items = [{"path": p, "score": s, "reason": r} for p, s, r in paths]
    return completion(json.dumps({"paths": items}))


def open_with(open_memory, url: str, timeout: float = 5.0) -> Memory:
    llm = LLMConfig(base_url=url, model="tiny-test", timeout_seconds=timeout)
    mem: Memory = open_memory(config=Config(llm=llm))
    mem.tree_add("projects/evoclaw/bsc", "BSC integration for hackathon")
    mem.tree_add("owner/finance", "Budgets, taxes and spending")
    mem.store_many(
        [
            NewFact("Hackathon deadline is Feb 15", "projects/evoclaw/bsc", 0.9),
            NewFact("Use raw JSON-RPC, no go-ethereum", "projects/evoclaw/bsc", 0.8),
            NewFact("Q3 campaign spend reviewed with the marketing team", "owner/finance", 0.7),
            NewFact("The deadline for taxes is in April", "owner/finance", 0.5),
            NewFact("Prefers short answers", "owner/preferences", 0.6),
        ]
    )
    return mem


def test_model_chooses_categories_and_results_carry_its_reason(open_memory, chat_server) -> None:
    server = chat_server(
        lambda body: (200, choice(("owner/finance", 0.9, "budgets are discussed here")))
    )
    mem = open_with(open_memory, server.url)
    result = mem.retrieve("that budget conversation with marketing", llm=True, reinforce=False)
    assert result.mode == "llm" and result.notes == []
    assert {h.memory.category for h in result.hits} == {"owner/finance"}
    top = result.hits[0]
    assert top.memory.text.startswith("Q3 campaign spend")  # keyword relevance inside the path
    assert top.explanation.found_by == "llm"
    assert top.explanation.llm_reason == "owner/finance (0.90): budgets are discussed here"
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    sent = json.loads(body["messages"][1]["content"])
    assert sent["query"] == "that budget conversation with marketing"
    finance = next(n for n in sent["tree"] if n["path"] == "owner/finance")
    assert finance == {
        "path": "owner/finance",
        "description": "Budgets, taxes and spending",
        "warm": 2,
        "cold": 0,
    }


def test_categories_without_keyword_matches_still_give_their_memories(
    open_memory, chat_server
) -> None:
    server = chat_server(
        lambda body: (
            200,
            choice(("projects/evoclaw", 0.8, "the project"), ("nowhere/else", 1.0, "invented")),
        )
    )
    mem = open_with(open_memory, server.url)
    result = mem.retrieve("anything new?", llm=True, reinforce=False)
    assert [h.memory.category for h in result.hits] == ["projects/evoclaw/bsc"] * 2
    assert result.hits[0].memory.importance == 0.9  # no keyword match: most important first
    assert all(
        (h.explanation.llm_reason or "").startswith("projects/evoclaw (0.80)") for h in result.hits
    )


Failure = Any


@pytest.mark.parametrize(
    ("reply", "hang", "why"),
    [
        (lambda body: (200, completion("not json at all")), False, "not the JSON asked for"),
        (lambda body: (200, completion('{"paths": "owner"}')), False, "not the JSON asked for"),
        (lambda body: (200, choice(("no/such", 0.9, "x"))), False, "no category that exists"),
        (lambda body: (500, b"{}"), False, "HTTP 500"),
        (lambda body: (200, b"<html>"), False, "not an OpenAI chat completion"),
        (None, True, "timed out"),
    ],
)
def test_any_failure_falls_back_to_keyword_mode(
    open_memory, chat_server, reply: Failure, hang: bool, why: str
) -> None:
    server = chat_server(reply or (lambda body: (200, b"")), hang=hang)
    mem = open_with(open_memory, server.url, timeout=0.3)
    result = mem.retrieve("hackathon deadline", llm=True, reinforce=False)
    assert result.mode == "keyword"
    [note] = result.notes
    assert note.startswith("LLM tree search failed (") and why in note
    assert note.endswith("): keyword mode")
    assert result.hits[0].memory.text == "Hackathon deadline is Feb 15"
    assert result.hits[0].explanation.found_by == "keyword"


def test_unconfigured_endpoint_falls_back(open_memory, monkeypatch) -> None:
    for var in ("TIERMEM_LLM_BASE_URL", "TIERMEM_LLM_MODEL", "TIERMEM_LLM_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    mem = open_memory()
    mem.store("Hackathon deadline is Feb 15", "projects", 0.9)
    result = mem.retrieve("hackathon", llm=True, reinforce=False)
    assert "no LLM endpoint configured" in result.notes[0] and result.hits


def test_llm_cannot_be_combined_with_vector_modes(open_memory) -> None:
    with pytest.raises(InvalidInput, match="keyword"):
        open_memory().retrieve("x", llm=True, mode="hybrid")


def test_parse_choices_keeps_known_paths_best_first_and_clamps(open_memory) -> None:
    mem = open_with(open_memory, "http://127.0.0.1:9/v1")
    tree = mem.tree()
    text = (
        "```json\n"
        + json.dumps(
            {
                "paths": [
                    {"path": "owner", "score": 0.4, "reason": "  the   owner "},
                    {"path": "/Owner/Finance/", "score": 7, "reason": "money"},
                    {"path": "owner", "score": 0.9, "reason": "duplicate"},
                    {"path": "x", "score": 1, "reason": "unknown"},
                    {"path": "owner/preferences", "score": True, "reason": "bool is no score"},
                ]
            }
        )
        + "\n```"
    )
    got = parse_choices(text, tree, max_paths=5)
    assert [(c.path, c.score, c.reason) for c in got] == [
        ("owner/finance", 1.0, "money"),
        ("owner", 0.4, "the owner"),
    ]
    with pytest.raises(TreeSearchError):
        choose_paths(type(tree)({}, tree.cfg), "q", lambda messages: "{}")


def test_cli_retrieve_llm_shows_the_reason(tmp_path, chat_server, capsys, monkeypatch) -> None:
    server = chat_server(lambda body: (200, choice(("projects", 0.7, "work things"))))
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "tiny-test")
    home = str(tmp_path / "home")
    assert (
        run(["--home", home, "store", "--text", "Deploy on Fridays", "--category", "projects"]) == 0
    )
    capsys.readouterr()
    assert run(["--home", home, "retrieve", "deploy", "--llm"]) == 0
    out = capsys.readouterr().out
    assert "LLM: projects (0.70): work things" in out
    assert run(["--home", home, "--json", "retrieve", "deploy", "--llm"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["mode"] == "llm"
    assert payload["results"][0]["explanation"]["llm_reason"] == "projects (0.70): work things"
