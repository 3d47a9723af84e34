"""Rule-mode distillation: transcripts in, facts + lists + a < 30-byte summary out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.clikit import cli, cli_json
from tests.write.conftest import FIXTURES
from tiermem.core.config import DistillConfig
from tiermem.core.distill import distill_rule, is_trivial, summarize
from tiermem.core.transcript import parse

CFG = DistillConfig()


def rule(text: str, projects: tuple[str, ...] = ()):
    return distill_rule(parse(text), CFG, projects)


def test_plain_transcript_gives_categorized_facts_and_lists() -> None:
    out = rule((FIXTURES / "conversation.txt").read_text(), ("EvoClaw",))
    by_kind = {f.kind: f for f in out.facts}
    assert by_kind["decision"].text.startswith("We decided to use raw JSON-RPC")
    assert by_kind["decision"].category == "decisions" and by_kind["decision"].importance == 0.8
    assert by_kind["lesson"].category == "lessons" and by_kind["lesson"].importance >= 0.85
    assert by_kind["preference"].category == "owner/preferences"
    assert by_kind["person"].text == "My wife Sarah's birthday is May 3."
    assert by_kind["person"].category == "people/sarah"
    assert out.decisions == [by_kind["decision"].text]
    assert out.lessons == ["Lesson learned: always test on testnet before mainnet."]
    assert out.tasks == []  # "I'll update the EvoClaw deploy script" is the assistant's promise
    assert "task" not in by_kind
    assert out.people == ["Sarah"]
    assert out.urls == ["https://docs.bnbchain.org/docs/rpc"]
    assert out.commands == ["npm run deploy -- --network testnet"]
    assert out.paths == ["~/src/evoclaw/contracts", "config/networks.json"]
    texts = " ".join(f.text for f in out.facts)
    assert "Hello" not in texts and "thanks" not in texts and "Noted" not in texts
    assert 0 < out.summary_bytes < 30
    assert out.skipped_trivial >= 3


def test_facts_carry_their_own_metadata() -> None:
    out = rule(
        "User: Deploy with `make release` from /srv/app/current, see https://ci.example.org/7"
    )
    (fact,) = out.facts
    assert fact.commands == ["make release"]
    assert fact.paths == ["/srv/app/current"]
    assert fact.urls == ["https://ci.example.org/7"]


def test_openclaw_jsonl_roles_tools_and_malformed_lines() -> None:
    transcript = parse((FIXTURES / "openclaw.jsonl").read_text())
    assert transcript.format == "openclaw" and transcript.session_id == "sess-42"
    assert transcript.warnings == ["line 6: not valid JSON, skipped"]
    roles = [m.role for m in transcript.messages]
    assert roles == ["user", "assistant", "user", "user"]  # no tool result, no thinking
    assert all("chain of thought" not in m.text for m in transcript.messages)
    out = distill_rule(transcript, CFG)
    assert "git tag -a v1.4.0 -m release" in out.commands  # the tool call's command
    assert out.urls == ["https://staging.example.com/app"]
    assert out.paths == ["docs/runbook.md"]
    assert any("ship the dashboard on Friday" in d for d in out.decisions)
    assert any("Never deploy on Fridays" in x for x in out.lessons)
    assert out.warnings == ["line 6: not valid JSON, skipped"]


def test_plain_chat_jsonl_with_content_blocks() -> None:
    lines = [
        {"role": "system", "content": "You are helpful and must never be distilled."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "We agreed to move the standup to 10am."}],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "sh", "arguments": '{"command": "cal -3"}'}}],
        },
        ["not", "an", "object"],
    ]
    transcript = parse("\n".join(json.dumps(x) for x in lines))
    assert transcript.format == "jsonl"
    assert [m.text for m in transcript.messages] == ["We agreed to move the standup to 10am."]
    assert transcript.tool_commands == ["cal -3"]
    assert transcript.warnings == ["line 4: not a JSON object, skipped"]


def test_rule_mode_is_deterministic_and_bounded() -> None:
    text = "\n".join(
        f"User: We decided to rename service number {i} to alpha {i}." for i in range(100)
    )
    first, second = rule(text), rule(text)
    assert first.as_dict() == second.as_dict()
    assert len(first.facts) == CFG.max_facts
    assert len(first.decisions) == CFG.max_facts
    assert first.facts[-1].text.endswith("alpha 99.")  # ties keep the latest


def test_repeated_sentences_count_once() -> None:
    out = rule("User: We decided to use Postgres.\nUser: we decided to use postgres!")
    assert len(out.facts) == 1


@pytest.mark.parametrize(
    ("text", "trivial"),
    [
        ("ok", True),
        ("thanks!", True),
        ("hi there, how are you?", True),
        ("Deploy the app tonight please", False),
        ("see ~/x.txt", False),
    ],
)
def test_trivial_content(text: str, trivial: bool) -> None:
    assert is_trivial(text, 3) is trivial


def test_empty_conversation_distills_to_nothing() -> None:
    out = rule("User: hi\nAssistant: hello!\nUser: ok thanks")
    assert out.facts == [] and out.summary == ""


@given(st.text(min_size=0, max_size=300), st.integers(min_value=2, max_value=60))
def test_summary_is_always_shorter_than_the_limit(text: str, limit: int) -> None:
    summary = summarize(text, limit)
    assert len(summary.encode()) < limit
    assert "\n" not in summary


def test_summary_keeps_content_words() -> None:
    summary = summarize("Decided to use raw JSON-RPC for BSC to avoid go-ethereum", 30)
    assert summary == "raw JSON-RPC BSC avoid"


def test_cli_distill_file_and_stdin(capsys, home: Path, monkeypatch) -> None:
    out = cli_json(capsys, home, "distill", str(FIXTURES / "conversation.txt"))
    assert out["mode"] == "rule" and out["fallback"] is None and out["format"] == "text"
    assert (
        out["stats"]["raw_bytes"] > out["stats"]["distilled_bytes"] > out["stats"]["summary_bytes"]
    )
    import io
    import sys

    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(b"User: We decided to use Rust for the CLI."))
    )
    piped = cli_json(capsys, home, "distill", "-")
    assert piped["decisions"] == ["We decided to use Rust for the CLI."]
    code, text, _ = cli(capsys, home, "distill", str(FIXTURES / "conversation.txt"))
    assert code == 0 and text.startswith("summary: ") and "bytes of summary" in text


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        (b"User: caf\xe9", "not UTF-8 text (invalid byte at offset 9)"),
        (b"", "is empty"),
    ],
)
def test_cli_distill_rejects_bad_files_in_one_line(
    capsys, home: Path, tmp_path: Path, content, needle
) -> None:
    bad = tmp_path / "t.txt"
    bad.write_bytes(content)
    code, out, err = cli(capsys, home, "distill", str(bad))
    assert code == 3 and needle in err and err.count("\n") == 1
    assert "Traceback" not in out + err
    code, _, err = cli(capsys, home, "distill", str(tmp_path / "missing.txt"))
    assert code == 3 and "cannot read" in err
    code, _, err = cli(capsys, home, "distill", str(tmp_path))
    assert code == 3 and "is a folder" in err
