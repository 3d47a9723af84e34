"""Daily notes: idempotent ingestion, edits, deletions, bad files, consolidation runs it."""

from __future__ import annotations

from pathlib import Path

from tests.clikit import cli, cli_json
from tiermem.core.engine import Memory
from tiermem.core.ingest import daily_dir, note_items

NOTE = """# 2026-01-05

## Decisions
- Use raw JSON-RPC for BSC instead of go-ethereum

## BSC integration
- Switched the deploy script to `npm run deploy -- --network testnet`
- Faucet is https://testnet.bnbchain.org/faucet-smart

## Tasks
- [ ] Write the migration guide for v2
- [x] Fix the flaky nonce test

## Notes
ok
Lunch with Sarah at the new ramen place downtown
"""


def texts(mem: Memory) -> set[str]:
    return {m.text for chunk in mem.memories.iter_all() for m in chunk}


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_note_lines_become_dated_categorized_facts(mem: Memory) -> None:
    mem.add_project("EvoClaw", "agent framework", "active")
    items, warnings = note_items(NOTE, created_at=100.0, source="daily/x", projects=["EvoClaw"])
    assert warnings == []
    by_text = {i.fact.text: i for i in items}
    assert set(by_text) == {
        "Use raw JSON-RPC for BSC instead of go-ethereum",
        "BSC integration: Switched the deploy script to `npm run deploy -- --network testnet`",
        "BSC integration: Faucet is https://testnet.bnbchain.org/faucet-smart",
        "Write the migration guide for v2",
        "Done: Fix the flaky nonce test",
        "Lunch with Sarah at the new ramen place downtown",
    }
    assert by_text["Use raw JSON-RPC for BSC instead of go-ethereum"].fact.category == "decisions"
    assert by_text["Write the migration guide for v2"].kind == "task"
    assert by_text["Done: Fix the flaky nonce test"].kind == "event"
    assert all(i.fact.created_at == 100.0 for i in items)


def test_ingest_is_idempotent_and_follows_edits(mem: Memory, clock) -> None:
    clock.advance(10)  # 2026-01-11: the note is from the past
    folder = daily_dir(mem)
    path = write(folder, "2026-01-05.md", NOTE)
    first = mem.ingest_daily()
    (report,) = first.files
    assert report.status == "ingested" and report.added == 6
    stored = texts(mem)
    record = next(m for chunk in mem.memories.iter_all() for m in chunk if "Faucet" in m.text)
    assert record.urls == ("https://testnet.bnbchain.org/faucet-smart",)
    assert record.created_at == 1767614400.0  # 2026-01-05 12:00 UTC
    future = write(folder, "2026-02-01.md", "- A note dated ahead of the clock gets today\n")
    mem.ingest_daily()
    assert (
        mem.get(mem.store("A note dated ahead of the clock gets today", "x").id).created_at
        == clock.now
    )
    future.unlink()
    stored = texts(mem)
    again = mem.ingest_daily()
    assert again.files[0].status == "unchanged" and again.added == 0
    assert texts(mem) == stored
    from_note = [m for c in mem.memories.iter_all() for m in c if m.source == "daily/2026-01-05.md"]
    assert len(from_note) == 6 and all(m.access_count == 0 for m in from_note)
    # an edit: one line changed, one deleted, one added
    edited = (
        NOTE.replace("migration guide for v2", "migration guide for v2.1").replace(
            "- Faucet is https://testnet.bnbchain.org/faucet-smart\n", ""
        )
        + "- Buy a new USB-C cable for the test phone\n"
    )
    path.write_text(edited, encoding="utf-8")
    clock.advance(1)
    changed = mem.ingest_daily().files[0]
    assert changed.status == "updated"
    assert (changed.added, changed.forgotten) == (2, 2)
    now = texts(mem)
    assert "Write the migration guide for v2.1" in now
    assert "Buy a new USB-C cable for the test phone" in now
    assert "Write the migration guide for v2" not in now
    assert not any("Faucet" in t for t in now)
    # the deleted line is never resurrected: not by re-ingesting, not by consolidation
    mem.ingest_daily()
    mem.consolidate("full")
    assert not any("Faucet" in t for t in texts(mem))
    # a deleted note keeps its knowledge
    path.unlink()
    mem.consolidate("daily")
    assert texts(mem) == now


def test_a_line_known_from_elsewhere_is_not_forgotten_with_the_note(mem: Memory) -> None:
    conversation = mem.store("Lunch with Sarah at the new ramen place downtown", "people", 0.6)
    folder = daily_dir(mem)
    path = write(folder, "2026-01-05.md", NOTE)
    report = mem.ingest_daily().files[0]
    assert report.merged == 1 and report.added == 5
    path.write_text(NOTE.replace("Lunch with Sarah at the new ramen place downtown\n", ""))
    assert mem.ingest_daily().files[0].forgotten == 0
    assert mem.get(conversation.id).access_count == 1


def test_bad_notes_are_per_file_and_the_rest_is_ingested(mem: Memory) -> None:
    folder = daily_dir(mem)
    write(folder, "2026-01-01.md", "- The boiler was serviced by Ahmed today\n")
    (folder / "2026-01-02.md").write_bytes(b"\x00\x01\x02 binary junk")
    (folder / "2026-01-03.md").write_bytes(b"- caf\xe9 with the team\n")
    (folder / "2026-01-04.md").write_bytes(b"")
    write(folder, "2026-02-30.md", "- An impossible date never gets ingested\n")
    write(folder, "notes.md", "- not a daily note name\n")
    (folder / "2026-01-06.md").mkdir()
    report = mem.ingest_daily()
    status = {f.name: (f.status, f.message) for f in report.files}
    assert status["2026-01-01.md"] == ("ingested", "")
    assert status["2026-01-02.md"] == ("error", "is a binary file, not text")
    assert status["2026-01-03.md"] == ("error", "not UTF-8 text (invalid byte at offset 5)")
    assert status["2026-01-04.md"] == ("skipped", "empty (its memories are kept)")
    assert status["2026-02-30.md"][0] == "skipped"
    assert report.ignored == 1 and len(report.errors) == 2
    assert texts(mem) == {"The boiler was serviced by Ahmed today"}


def test_emptying_a_note_keeps_its_memories(mem: Memory) -> None:
    path = write(daily_dir(mem), "2026-01-05.md", "- The spare key is under the blue pot\n")
    mem.ingest_daily()
    path.write_text("")
    assert mem.ingest_daily().files[0].status == "skipped"
    assert texts(mem) == {"The spare key is under the blue pot"}


def test_consolidation_daily_monthly_full_ingest_but_quick_does_not(mem: Memory) -> None:
    write(daily_dir(mem), "2026-01-01.md", "- The office wifi password rotates every month\n")
    assert mem.consolidate("quick").ingested is None and texts(mem) == set()
    report = mem.consolidate("daily")
    assert report.ingested is not None and report.ingested.added == 1
    assert mem.consolidate("monthly").ingested.files[0].status == "unchanged"  # type: ignore[union-attr]


def test_agents_have_their_own_daily_folder(open_memory) -> None:
    a, b = open_memory("default"), open_memory("agent-2")
    assert daily_dir(b) == daily_dir(a) / "agent-2"
    write(daily_dir(b), "2026-01-01.md", "- Agent two learned to water the ferns weekly\n")
    a.ingest_daily()
    b.ingest_daily()
    assert texts(a) == set() and len(texts(b)) == 1


def test_cli_ingest_daily(capsys, home: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    write(notes, "2026-01-05.md", NOTE)
    (notes / "2026-01-06.md").write_bytes(b"\xff\xfe\x00junk")
    out = cli_json(capsys, home, "ingest-daily", str(notes), code=1)
    assert out["added"] == 6 and out["errors"] == 1
    assert {f["name"]: f["status"] for f in out["files"]} == {
        "2026-01-05.md": "ingested",
        "2026-01-06.md": "error",
    }
    code, text, _ = cli(capsys, home, "ingest-daily", str(notes))
    assert code == 1 and "2026-01-06.md: error: is a binary file" in text
    code, _, err = cli(capsys, home, "ingest-daily", str(tmp_path / "nope"))
    assert code == 3 and "is not a folder" in err
    quiet = cli_json(capsys, home, "ingest-daily")  # the default folder does not exist yet
    assert quiet["files"] == [] and quiet["added"] == 0
