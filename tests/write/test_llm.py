"""LLM mode against a real OpenAI-compatible HTTP server on loopback: a good answer, garbage, a
server that hangs, HTTP errors — every failure falls back to rule mode and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import cli_json
from tests.write.conftest import FIXTURES, completion
from tiermem.core.config import DistillConfig, LLMConfig
from tiermem.core.distill import SCHEMA, distill
from tiermem.core.llm import LLMSettings, settings_from
from tiermem.core.transcript import parse

KEY = "sk-test-SECRET-0123456789"
TRANSCRIPT = parse((FIXTURES / "conversation.txt").read_text())


def good_answer(drop_url: bool = False) -> dict[str, Any]:
    return {
        "facts": [
            {
                "text": "Bowen decided raw JSON-RPC for BSC, no go-ethereum",
                "category": "projects/evoclaw/bsc",
                "importance": 0.8,
            },
            {
                "text": "Always test on testnet before mainnet",
                "category": "lessons",
                "importance": 0.9,
            },
        ],
        "decisions": ["Use raw JSON-RPC for BSC"],
        "lessons": ["Always test on testnet before mainnet"],
        "tasks": ["Update the EvoClaw deploy script"],
        "events": [],
        "people": ["Sarah"],
        "urls": [] if drop_url else ["https://docs.bnbchain.org/docs/rpc"],
        "commands": ["npm run deploy -- --network testnet"],
        "paths": [],
        "summary": "BSC: raw JSON-RPC",
    }


def settings(url: str, timeout: float = 5.0) -> LLMSettings:
    return LLMSettings(base_url=url, model="tiny-test", api_key=KEY, timeout=timeout)


def test_llm_mode_uses_the_schema_and_restores_dropped_metadata(chat_server) -> None:
    server = chat_server(lambda body: (200, completion(json.dumps(good_answer(drop_url=True)))))
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=settings(server.url))
    assert out.mode == "llm" and out.fallback is None
    assert [f.category for f in out.facts] == ["projects/evoclaw/bsc", "lessons"]
    assert out.summary == "BSC: raw JSON-RPC"
    assert out.restored == {
        "urls": ["https://docs.bnbchain.org/docs/rpc"],
        "paths": ["~/src/evoclaw/contracts", "config/networks.json"],
    }
    assert "https://docs.bnbchain.org/docs/rpc" in out.urls
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert body["model"] == "tiny-test" and body["temperature"] == 0
    assert body["response_format"]["json_schema"]["schema"] == SCHEMA
    assert body["response_format"]["json_schema"]["strict"] is True
    assert "raw JSON-RPC" in body["messages"][1]["content"]


def test_fenced_json_is_accepted_and_long_summaries_are_shortened(chat_server) -> None:
    answer = good_answer() | {"summary": "A very long summary that is far over thirty bytes"}
    server = chat_server(lambda body: (200, completion("```json\n" + json.dumps(answer) + "\n```")))
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=settings(server.url))
    assert out.mode == "llm" and 0 < out.summary_bytes < 30


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (
            lambda body: (200, completion("Sure! Here are the facts: the user likes BSC.")),
            "not JSON",
        ),
        (lambda body: (200, completion(json.dumps({"facts": "none"}))), "does not fit the schema"),
        (
            lambda body: (
                200,
                completion(
                    json.dumps(
                        good_answer() | {"facts": [{"text": "x", "category": "c", "importance": 7}]}
                    )
                ),
            ),
            "does not fit the schema",
        ),
        (lambda body: (200, b"<html>gateway</html>"), "not an OpenAI chat completion"),
        (lambda body: (200, json.dumps({"choices": []}).encode()), "not an OpenAI chat completion"),
        (lambda body: (500, b'{"error": "boom"}'), "HTTP 500"),
        (lambda body: (401, b'{"error": "bad key"}'), "HTTP 401"),
    ],
)
def test_garbage_and_http_errors_fall_back_to_rule_mode(chat_server, reply, reason: str) -> None:
    server = chat_server(reply)
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=settings(server.url))
    assert out.mode == "rule" and out.requested_mode == "llm"
    assert out.fallback is not None and reason in out.fallback
    assert KEY not in out.fallback
    assert out.decisions  # rule mode did the work
    assert "https://docs.bnbchain.org/docs/rpc" in out.urls


def test_a_hanging_server_times_out_into_rule_mode(chat_server) -> None:
    server = chat_server(lambda body: (200, b""), hang=True)
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=settings(server.url, 0.3))
    assert out.mode == "rule" and out.fallback is not None
    assert "timed out after 0.3 s" in out.fallback


def test_unreachable_unconfigured_and_oversized(tmp_path: Path) -> None:
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=LLMSettings())
    assert out.mode == "rule" and "no LLM endpoint configured" in (out.fallback or "")
    closed = settings("http://127.0.0.1:9/v1", 1.0)  # discard port: nothing listens
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=closed)
    assert out.mode == "rule" and "cannot reach" in (out.fallback or "")
    small = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", max_input_chars=50)
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=small)
    assert "over the 50 allowed" in (out.fallback or "")
    bad = LLMSettings(base_url=f"ftp://user:{KEY}@example.org", model="m", api_key=KEY)
    out = distill(TRANSCRIPT, DistillConfig(), mode="llm", settings=bad)
    assert "invalid LLM base URL" in (out.fallback or "") and KEY not in (out.fallback or "")


def test_environment_overrides_config_and_key_is_not_in_repr() -> None:
    cfg = LLMConfig(base_url="http://file.example/v1", model="from-file", api_key="file-key")
    env = {"TIERMEM_LLM_BASE_URL": "http://127.0.0.1:1/v1/", "TIERMEM_LLM_API_KEY": KEY}
    got = settings_from(cfg, env)
    assert got.base_url == "http://127.0.0.1:1/v1" and got.model == "from-file"
    assert got.api_key == KEY
    assert KEY not in repr(got) and KEY not in json.dumps(got.public())


def test_cli_llm_mode_never_shows_the_key(capsys, home: Path, chat_server, monkeypatch) -> None:
    server = chat_server(lambda body: (500, json.dumps({"error": KEY}).encode()))
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", server.url)
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "tiny-test")
    monkeypatch.setenv("TIERMEM_LLM_API_KEY", KEY)
    out = cli_json(capsys, home, "distill", "--mode", "llm", str(FIXTURES / "conversation.txt"))
    assert out["mode"] == "rule" and "HTTP 500" in out["fallback"]
    assert KEY not in json.dumps(out)
    server.reply = lambda body: (200, completion(json.dumps(good_answer())))
    ended = cli_json(
        capsys, home, "conversation-end", "--mode", "llm", str(FIXTURES / "conversation.txt")
    )
    assert ended["mode"] == "llm" and ended["fallback"] is None
    assert KEY not in json.dumps(ended)
    assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {KEY}"
