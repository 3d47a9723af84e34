"""conversation-end: distill, store, hot, consolidation, outbox — and nothing doubles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clikit import cli, cli_json
from tests.write.conftest import FIXTURES
from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.transcript import parse


def end(mem: Memory, text: str):
    return mem.conversation_end(parse(text), text)


def state(mem: Memory) -> tuple[object, ...]:
    rows = sorted(
        (m.id, m.access_count, m.importance, m.urls)
        for chunk in mem.memories.iter_all()
        for m in chunk
    )
    return (rows, mem.hot(), len(snapshot.pending(mem.db, mem.agent_id)))


def test_conversation_end_stores_updates_hot_and_queues_sync(mem: Memory) -> None:
    mem.add_project("EvoClaw", "agent framework", "active")
    outbox_before = len(snapshot.pending(mem.db, mem.agent_id))
    text = (FIXTURES / "conversation.txt").read_text()
    report = end(mem, text)
    assert not report.already_processed and report.distilled is not None
    assert len(report.stored) == len(report.distilled.facts) == 6
    hot = mem.hot()
    # "I'll update the EvoClaw deploy script tomorrow." is the assistant's promise, no task
    assert hot.active_context.tasks == []
    lessons = [x.text for x in hot.critical_lessons]
    assert "Lesson learned: always test on testnet before mainnet." in lessons
    assert len(lessons) == len(set(lessons))
    reasons = [r[2] for r in snapshot.pending(mem.db, mem.agent_id)[outbox_before:]]
    assert "conversation-end" in reasons
    assert report.consolidation is not None  # quick consolidation ran
    record = mem.get(report.record_id or "")
    assert record.category == "conversations"
    assert record.urls == ("https://docs.bnbchain.org/docs/rpc",)
    assert record.commands == ("npm run deploy -- --network testnet",)
    assert "Lesson learned" in mem.home.memory_md(mem.agent_id).read_text()
    found = mem.retrieve("JSON-RPC go-ethereum", reinforce=False)
    assert found.hits and "raw JSON-RPC" in found.hits[0].memory.text


def test_calling_twice_changes_nothing(mem: Memory) -> None:
    text = (FIXTURES / "conversation.txt").read_text()
    end(mem, text)
    before = state(mem)
    again = end(mem, text)
    assert again.already_processed and again.stored == [] and not again.outbox
    assert state(mem) == before


def said(text: str) -> str:
    """One line of an OpenClaw session: the user saying `text`."""
    return json.dumps({"type": "message", "message": {"role": "user", "content": text}}) + "\n"


def test_a_growing_session_adds_only_what_is_new(mem: Memory) -> None:
    first = (FIXTURES / "openclaw.jsonl").read_text() + said(
        "I need to write the release notes before Friday."
    )
    r1 = end(mem, first)
    mem.complete_task(mem.hot().active_context.tasks[0].id)
    grown = first + said("We decided to keep the beta flag for one more week.")
    r2 = end(mem, grown)
    assert r1.source == r2.source == "session:sess-42"
    assert not r2.already_processed
    assert r2.skipped_known >= 3 and len(r2.stored) == 1
    assert mem.hot().active_context.tasks == []  # the completed task did not come back
    assert mem.get(r2.stored[0]).text == "We decided to keep the beta flag for one more week."


def test_known_facts_are_reported_as_deduplicated(mem: Memory) -> None:
    known = mem.store(
        "We decided to use raw JSON-RPC for BSC to avoid the go-ethereum dependency", "x"
    )
    report = end(mem, (FIXTURES / "conversation.txt").read_text())
    assert report.deduplicated == [
        {
            "text": "We decided to use raw JSON-RPC for BSC to avoid the go-ethereum dependency.",
            "merged_into": known.id,
            "similarity": 1.0,
        }
    ]


def test_cli_conversation_end_and_its_replay(capsys, home: Path) -> None:
    path = str(FIXTURES / "openclaw.jsonl")
    first = cli_json(capsys, home, "conversation-end", path)
    assert first["outbox_recorded"] and first["warnings"] == ["line 6: not valid JSON, skipped"]
    assert first["source"] == "session:sess-42" and len(first["stored"]) >= 3
    again = cli_json(capsys, home, "conversation-end", path)
    assert again["already_processed"] and again["stored"] == []
    code, out, _ = cli(capsys, home, "conversation-end", path)
    assert code == 0 and "already processed" in out


@pytest.mark.parametrize(
    ("content", "code", "needle"),
    [
        (b"\x00\x00\x00binary", 3, "binary"),
        (b"User: d\xc3\xa9j\xe0 vu", 3, "not UTF-8"),
        (b"\n\n", 3, "is empty"),
        (b'{"type": "session", "id": "x"}\n{"broken\n', 3, "no conversation messages"),
    ],
)
def test_cli_conversation_end_bad_input(
    capsys, home: Path, tmp_path: Path, content, code, needle
) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_bytes(content)
    rc, out, err = cli(capsys, home, "conversation-end", str(bad))
    assert rc == code and needle in err and err.count("\n") == 1 and "Traceback" not in out + err
    assert not home.exists()  # a failed first write creates no home
