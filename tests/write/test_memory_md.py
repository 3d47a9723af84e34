"""Hand edits of MEMORY.md: read back into hot where they parse, kept and reported where not."""

from __future__ import annotations

from pathlib import Path

from tiermem.core import snapshot
from tiermem.core.engine import Memory


def setup_hot(mem: Memory) -> Path:
    mem.update_hot("identity", {"agent_name": "Claw", "trust_level": 0.9})
    mem.update_hot("owner_profile", {"family": ["Sarah (wife)", "Luna (daughter)"]})
    mem.add_project("EvoClaw", "agent framework", "active")
    mem.add_task("Deploy to BSC testnet")
    mem.add_task("Write the v2 migration guide")
    mem.add_event("Hackathon kickoff")
    mem.add_lesson("Always test on testnet before mainnet", 0.9, "blockchain")
    mem.add_lesson("Never force-push to main", 0.8, "git")
    return mem.home.memory_md(mem.agent_id)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


def test_an_untouched_file_changes_nothing(mem: Memory) -> None:
    setup_hot(mem)
    before = mem.hot()
    outbox = len(snapshot.pending(mem.db, mem.agent_id))
    report = mem.read_back_memory_md()
    assert report.edited is False and mem.hot() == before
    assert len(snapshot.pending(mem.db, mem.agent_id)) == outbox


def test_edits_are_read_back_into_hot(mem: Memory) -> None:
    path = setup_hot(mem)
    edit(
        path, "- **trust_level**: 0.9", "- **trust_level**: 0.95\n- **timezone**: Australia/Sydney"
    )
    edit(path, "- [pending] Deploy to BSC testnet", "- [x] Deploy to BSC testnet")
    edit(path, "- [git] Never force-push to main\n", "")
    edit(
        path,
        "- [blockchain] Always test on testnet before mainnet",
        "- [blockchain] Always test on testnet before mainnet, twice",
    )
    edit(path, "## Critical Lessons", "## Tasks\n\n- [ ] Renew the domain\n\n## Critical Lessons")
    report = mem.read_back_memory_md()
    assert report.edited and report.unparsed == [] and report.error is None
    hot = mem.hot()
    assert hot.identity == {
        "agent_name": "Claw",
        "trust_level": 0.95,
        "timezone": "Australia/Sydney",
    }
    assert hot.owner_profile == {"family": ["Sarah (wife)", "Luna (daughter)"]}
    assert [t.text for t in hot.active_context.tasks] == [
        "Write the v2 migration guide",
        "Renew the domain",
    ]
    assert "Done: Deploy to BSC testnet" in [e.text for e in hot.active_context.events]
    lessons = {x.text: x.importance for x in hot.critical_lessons}
    assert lessons == {"Always test on testnet before mainnet, twice": 0.9}  # kept its importance
    assert "task completed: Deploy to BSC testnet" in report.applied
    assert "lesson removed: Never force-push to main" in report.applied
    assert path.read_text() == mem.memory_md()  # regenerated from the new hot state
    assert snapshot.pending(mem.db, mem.agent_id)[-1][2] == "hot"


def test_a_removed_promoted_lesson_is_not_resurrected(mem: Memory) -> None:
    fact = mem.store("Rotate the API keys every quarter", "security", 0.95)
    mem.consolidate("quick")
    path = mem.home.memory_md(mem.agent_id)
    assert "Rotate the API keys" in path.read_text()
    edit(path, "- [security] Rotate the API keys every quarter\n", "")
    mem.consolidate("quick")  # reads the edit back, then would promote the warm fact again
    mem.consolidate("full")
    assert mem.hot().critical_lessons == []
    assert "Rotate the API keys" not in path.read_text()
    assert mem.get(fact.id).tier == "warm"  # the fact itself is not lost


def test_hot_edits_never_overwrite_unread_hand_edits(mem: Memory) -> None:
    path = setup_hot(mem)
    edit(path, "- **agent_name**: Claw", "- **agent_name**: Clawd")
    mem.add_event("Demo day")  # a writer of MEMORY.md: reads the edit back first
    assert mem.hot().identity["agent_name"] == "Clawd"
    assert "Demo day" in path.read_text() and "Clawd" in path.read_text()


def test_unparsed_lines_become_warm_facts_and_are_reported(mem: Memory) -> None:
    path = setup_hot(mem)
    path.write_text(
        path.read_text()
        + "\nMy dentist is Dr. Okafor on Baker Street\n\n## Ideas\n\n- Build a plant-watering bot\n"
    )
    lines = path.read_text().splitlines()
    report = mem.read_back_memory_md()
    expected = [
        "My dentist is Dr. Okafor on Baker Street",
        "## Ideas",
        "- Build a plant-watering bot",
    ]
    assert report.unparsed == [f"line {lines.index(x) + 1}: {x}" for x in expected]
    stored = {mem.get(i).text for i in report.stored_ids}
    assert stored == {
        "My dentist is Dr. Okafor on Baker Street",
        "Ideas",
        "Build a plant-watering bot",
    }
    assert "Dr. Okafor" not in path.read_text()  # regenerated: the line now lives in warm
    assert mem.retrieve("dentist").hits[0].memory.text.startswith("My dentist")


def test_a_foreign_or_broken_file_is_copied_aside(mem: Memory) -> None:
    path = setup_hot(mem)
    before = mem.hot()
    path.write_text("Just my own notes\n- the wifi password is in the drawer\n")
    report = mem.read_back_memory_md()
    assert report.error is not None and "not a tiermem MEMORY.md" in report.error
    assert report.backup is not None and report.backup.read_text().startswith("Just my own notes")
    assert mem.hot() == before
    assert {mem.get(i).text for i in report.stored_ids} == {
        "Just my own notes",
        "the wifi password is in the drawer",
    }
    path.write_bytes(b"# MEMORY.md\n\xff\xfe broken")
    report = mem.read_back_memory_md()
    assert report.error is not None and "not UTF-8" in report.error and report.backup is not None
    assert path.read_text() == mem.memory_md()


def test_an_edit_over_the_hot_limit_is_refused_and_kept(mem: Memory) -> None:
    path = setup_hot(mem)
    before = mem.hot()
    edit(path, "- **agent_name**: Claw", "- **agent_name**: " + "x" * 6000)
    report = mem.read_back_memory_md()
    assert report.error is not None and "not applied" in report.error
    assert report.backup is not None and "x" * 6000 in report.backup.read_text()
    assert mem.hot() == before and path.read_text() == mem.memory_md()


def test_cli_hot_shows_and_reports_hand_edits(capsys, tmp_path: Path) -> None:
    from tests.clikit import cli_json

    home = tmp_path / "home"
    cli_json(capsys, home, "hot", "--add-lesson", "Keep receipts for a year", "--category", "tax")
    md = home / "MEMORY.md"
    md.write_text(md.read_text().replace("for a year", "for seven years") + "\nCall the bank\n")
    shown = cli_json(capsys, home, "hot")
    assert [x["text"] for x in shown["hot"]["critical_lessons"]] == [
        "Keep receipts for seven years"
    ]
    assert shown["hand_edits"]["unparsed"][0].endswith("Call the bank")
    assert cli_json(capsys, home, "hot")["hand_edits"] is None
