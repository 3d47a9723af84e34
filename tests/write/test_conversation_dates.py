"""`conversation-end` through the CLI dates a conversation by its own timestamps and cuts its
summary on a whole phrase."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.clikit import cli, cli_json

SESSION = {"type": "session", "version": "3", "id": "sess-tf", "timestamp": "2025-03-04T09:00:00Z"}
MESSAGES: list[tuple[str | int, str, str]] = [
    ("2025-03-04T09:00:05Z", "user", "We need to change the Terraform config for staging."),
    ("2025-03-04T09:02:00Z", "assistant", "First I'll check the current Terraform state."),
    (
        "2025-03-04T09:06:00Z",
        "user",
        "And lesson learned: never apply Terraform without a saved plan file.",
    ),
    (1741079400000, "assistant", "I'll add that to the runbook."),  # 09:10:00, in milliseconds
]


def openclaw(path: Path) -> Path:
    rows = [SESSION] + [
        {
            "type": "message",
            "timestamp": at,
            "message": {"role": role, "content": [{"type": "text", "text": text}]},
        }
        for at, role, text in MESSAGES
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def day(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))


def test_an_openclaw_conversation_is_dated_by_its_messages(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ended = cli_json(capsys, home, "conversation-end", str(openclaw(tmp_path / "c.jsonl")))
    episode = cli_json(capsys, home, "episodes", "list")["episodes"][0]
    assert (episode["started_at"], episode["ended_at"]) == (
        "2025-03-04T09:00:00Z",
        "2025-03-04T09:10:00Z",
    )
    assert "First I" not in episode["topics"]
    memories = cli_json(capsys, home, "export", "--format", "json")["memories"]
    ours = [m for m in memories if m["id"] in {*ended["stored"], ended["conversation_record"]}]
    assert ours and {day(m["created_at"]) for m in ours} == {"2025-03-04 09:00"}
    record = next(m for m in ours if m["id"] == ended["conversation_record"])
    assert record["text"].startswith("Conversation 2025-03-04: ")
    code, out, _ = cli(capsys, home, "history", ended["stored"][0])
    assert code == 0 and "2025-03-04" in out


def test_a_summary_cut_to_its_limit_ends_on_a_whole_phrase(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ended = cli_json(capsys, home, "conversation-end", str(openclaw(tmp_path / "c.jsonl")))
    summary = ended["summary"]
    assert summary.endswith("…") and len(summary.encode()) < 30, summary
    assert not summary.removesuffix("…").endswith((" without", " a", " the")), summary
    code, out, _ = cli(capsys, tmp_path / "again", "conversation-end", str(tmp_path / "c.jsonl"))
    assert code == 0 and f"summary: {summary}  [rule mode]" in out
