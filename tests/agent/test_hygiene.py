"""Session hygiene: promotion after 3 sessions, demotion after 3 unused ones, the
transcript tags at conversation-end and their CLI twins, the health report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clikit import cli_json
from tiermem.core import context, curate, hygiene, snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.transcript import parse
from tiermem.tui.cli import run


def lesson_texts(mem: Memory) -> list[str]:
    return [x.text for x in mem.hot().critical_lessons]


def test_rapid_reaccess_within_one_session_counts_toward_promotion(mem: Memory) -> None:
    fact = mem.store("The VPN endpoint is vpn.example.org on port 1194", "infra/vpn", 0.5).id
    for _ in range(5):  # re-reading it in one session counts twice (reaccess_counts = 2)
        context.recall(mem, "vpn endpoint port", session="s1")
    assert hygiene.end_session(mem, "s1").promoted == []
    context.recall(mem, "vpn endpoint", session="s2")
    promoted = hygiene.end_session(mem, "s2").promoted
    assert [p["id"] for p in promoted] == [fact]
    assert promoted[0]["reason"] == "3 uses in 2 sessions"


def test_recalled_in_three_distinct_sessions_is_promoted(mem: Memory) -> None:
    mem.cfg.hygiene.reaccess_counts = 1  # each session counts once, however often it recalls
    fact = mem.store("The VPN endpoint is vpn.example.org on port 1194", "infra/vpn", 0.5).id
    for _ in range(5):  # one session recalling it many times counts once
        context.recall(mem, "vpn endpoint port", session="s1")
    assert hygiene.end_session(mem, "s1").promoted == []
    context.recall(mem, "vpn endpoint", session="s2")
    assert hygiene.end_session(mem, "s2").promoted == []
    context.build_context(mem, "which vpn endpoint and port do we use?", session="s3")
    outbox = len(snapshot.pending(mem.db, mem.agent_id))
    report = hygiene.end_session(mem, "s3")
    assert len(snapshot.pending(mem.db, mem.agent_id)) == outbox + 1  # hot changed: synced
    assert [p["id"] for p in report.promoted] == [fact]
    assert report.promoted[0]["reason"] == "3 sessions"
    assert curate.hot_lesson_for(mem, fact) is not None
    assert hygiene.sessions_of(mem, fact) == []  # promotion is terminal for the count
    assert "vpn.example.org" in mem.home.memory_md(mem.agent_id).read_text()


def test_archived_memory_recalled_in_three_sessions_comes_back_to_hot(mem: Memory) -> None:
    fact = mem.store("Grandma's birthday is on March 3", "people/family", 0.4).id
    mem.memories.move([fact], "cold", mem.now())
    for session in ("a", "b", "c"):
        context.recall(mem, "grandma birthday", session=session)
    hygiene.end_session(mem, "c")
    assert mem.get(fact).tier == "warm" and curate.hot_lesson_for(mem, fact)


def test_unused_hot_lessons_are_demoted_unless_pinned_or_critical(mem: Memory) -> None:
    plain = mem.add_lesson("Prefer small pull requests over big ones", 0.7)[0]
    pinned = mem.add_lesson("Never push on Fridays after 4pm", 0.7)[0]
    critical = mem.add_lesson("Never share the recovery key with anyone", 0.95)[0]
    used = mem.add_lesson("Run the database migrations before deploying", 0.7)[0]
    hygiene.pin(mem, pinned.id)
    for n in (1, 2):  # the lessons exist before session 1: unused in s1 and s2 so far
        context.build_context(mem, "how do I run database migrations safely?", session=f"s{n}")
        report = hygiene.end_session(mem, f"s{n}")
        assert report.demoted == []
    context.build_context(mem, "deploy the database migrations for release", session="s3")
    report = hygiene.end_session(mem, "s3")
    assert [d["lesson_id"] for d in report.demoted] == [plain.id]
    assert report.demoted[0]["reason"] == "unused for 3 sessions"
    assert set(lesson_texts(mem)) == {critical.text, pinned.text, used.text}
    kept = mem.get(report.demoted[0]["id"])  # demotion is not deletion
    assert kept.text == plain.text and kept.tier == "warm"
    mem.consolidate("quick")  # consolidation does not bring a demoted lesson straight back
    assert plain.text not in lesson_texts(mem)
    health = hygiene.health(mem)
    assert health.demotions == 1 and health.l1_pinned == 1 and health.critical == 1


def test_resolve_by_id_and_slug(mem: Memory) -> None:
    a = mem.store("Two-tier architecture adopted for memory", "decisions", 0.6).id
    mem.store("Two-tier pricing rejected by the board", "decisions/business", 0.6)
    lesson = mem.add_lesson("Keep the two-tier cache small", 0.8, "lessons")[0]
    assert hygiene.resolve(mem, a).id == a
    assert hygiene.resolve(mem, lesson.id).kind == "lesson"
    assert hygiene.resolve(mem, "decisions:two-tier-architecture").id == a
    assert hygiene.resolve(mem, "Two-Tier Architecture").id == a
    assert hygiene.resolve(mem, "lessons:two-tier").id == lesson.id
    with pytest.raises(InvalidInput, match="matches 3 entries"):
        hygiene.resolve(mem, "two-tier")
    with pytest.raises(NotFound):
        hygiene.resolve(mem, "decisions:nothing-like-this")
    with pytest.raises(InvalidInput):
        hygiene.resolve(mem, "  ")


def test_forget_archives_and_restore_brings_back(mem: Memory) -> None:
    fact = mem.store("Jarvis is the name of the home assistant", "home/assistant", 0.5).id
    done = hygiene.forget_entry(mem, fact)
    assert done["action"] == "archived"
    assert not mem.retrieve("Jarvis home assistant", reinforce=False).hits
    assert curate.forgotten_count(mem) == 1  # archived, not deleted
    back = hygiene.restore(mem, "home/assistant:jarvis")
    assert back["id"] == fact and mem.get(fact).tier == "warm"
    with pytest.raises(NotFound):
        hygiene.restore(mem, fact)  # nothing left to restore


def test_forget_on_a_hot_entry_demotes_it(mem: Memory) -> None:
    fact = mem.store("Standups are at 9:30", "work/meetings", 0.6).id
    hygiene.promote_to_hot(mem, fact)
    done = hygiene.forget_entry(mem, "work/meetings:standups")
    assert done["action"] == "demoted" and mem.get(fact).tier == "warm"
    assert "Standups are at 9:30" not in lesson_texts(mem)


def test_forget_keyword_demotes_and_archives_every_match(mem: Memory) -> None:
    mem.add_lesson("Ask JARVIS before touching the lights", 0.7)
    ids = [
        mem.store(f"Jarvis fact {i}: it controls the heating zone {i}", "home", 0.5).id
        for i in range(4)
    ]
    other = mem.store("The heating is on a timer", "home", 0.5).id
    report = hygiene.forget_keyword(mem, "jarvis")
    assert len(report.demoted) == 1 and len(report.archived) == 5  # 4 + the demoted lesson
    assert lesson_texts(mem) == []
    assert mem.memories.get_many([*ids, other]) == mem.memories.get_many([other])
    assert curate.forgotten_count(mem) == 5
    with pytest.raises(InvalidInput):
        hygiene.forget_keyword(mem, "--")


TRANSCRIPT = """User: We decided to use Postgres 16 for the analytics service.
Assistant: Noted, Postgres 16 for analytics.
User: Also [[pin:decisions:rust-for-the-cli]] and [[promote:people:sarah-likes]] please.
User: [[forget keyword:jarvis]] [[restore:home:old-router]] [[memory_health]]
User: [[forget:nothing-matches-this]]
"""


def test_tags_in_a_transcript_act_at_conversation_end(mem: Memory) -> None:
    rust = mem.store("Rust for the CLI was chosen", "decisions", 0.6).id
    sarah = mem.store("Sarah likes hiking on weekends", "people/sarah", 0.5).id
    jarvis = mem.store("Jarvis runs the lights", "home", 0.5).id
    router = mem.store("The old router is in the attic", "home", 0.4).id
    curate.move_to_forgotten(mem, router)
    report = mem.conversation_end(parse(TRANSCRIPT), TRANSCRIPT, session="chat-1")
    assert report.tags == [
        "[[pin:decisions:rust-for-the-cli]]",
        "[[promote:people:sarah-likes]]",
        "[[forget keyword:jarvis]]",
        "[[restore:home:old-router]]",
        "[[memory_health]]",
        "[[forget:nothing-matches-this]]",
    ]
    assert rust in curate.pinned_ids(mem.db, mem.agent_id)
    assert curate.hot_lesson_for(mem, sarah) is not None
    assert not mem.memories.get_many([jarvis]) and mem.get(router).tier == "warm"
    h = report.hygiene
    assert h is not None and h.session == "chat-1"
    assert h.health is not None and h.health.startswith("=== Memory Health ===")
    assert any("nothing-matches-this" in s for s in h.skipped)
    stored = [mem.get(i).text for i in report.stored]
    assert stored and not any("[[" in t for t in stored)  # no tag is distilled into a fact
    again = mem.conversation_end(parse(TRANSCRIPT), TRANSCRIPT, session="chat-1")
    assert again.already_processed and again.tags == []


def test_a_growing_session_does_not_act_on_its_tags_twice(mem: Memory) -> None:
    fact = mem.store("The cat is called Miso", "home/pets", 0.5).id
    first = '{"type":"session","id":"sess-9"}\n' + json.dumps(
        {"type": "message", "message": {"role": "user", "content": f"[[forget:{fact}]]"}}
    )
    mem.conversation_end(parse(first), first)
    hygiene.restore(mem, fact)
    grown = (
        first
        + "\n"
        + json.dumps(
            {"type": "message", "message": {"role": "user", "content": "We moved to Lyon."}}
        )
    )
    report = mem.conversation_end(parse(grown), grown)
    assert report.tags == [] and mem.get(fact).tier == "warm"


def test_health_report_has_the_seed_layout(mem: Memory) -> None:
    mem.add_lesson("Keep answers short", 0.7)
    text = hygiene.health(mem).text()
    lines = text.splitlines()
    assert lines[0] == "=== Memory Health ==="
    assert lines[1] == "L1: 1/20 bullets | 0 tagged [pin]"
    assert lines[2].startswith("L2: ") and "entries tracked" in lines[2]
    for prefix in (
        "Promotions (total): ",
        "Demotions (total): ",
        "Archive queue: ",
        "🔒 critical: ",
        "L2 cold candidates (never accessed, age>30d): ",
        "L1↔L2 sync (L1 has stale L2 source): ",
        "Top L1 entries by sessionsSinceAccess:",
    ):
        assert any(line.startswith(prefix) for line in lines), prefix
    assert lines[-1] == "1. general:keep-answers-short — 0 sessions stale"


def test_cli_equivalents(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    stored = cli_json(capsys, home, "store", "--text", "Sam drinks oat milk", "--category", "owner")
    fact = str(stored["id"])
    assert cli_json(capsys, home, "pin", "owner:oat-milk")["memories"] == [fact]
    assert cli_json(capsys, home, "unpin", fact)["action"] == "unpin"
    assert cli_json(capsys, home, "promote", fact)["lesson_id"]
    assert cli_json(capsys, home, "demote", fact)["id"] == fact
    assert cli_json(capsys, home, "forget", fact)["action"] == "archived"
    assert cli_json(capsys, home, "unforget", fact)["id"] == fact
    report = cli_json(capsys, home, "forget", "--keyword", "oat milk")
    assert [a["id"] for a in report["archived"]] == [fact]
    assert cli_json(capsys, home, "health")["l1_bullets"] == 0
    for session in ("x", "y"):
        cli_json(capsys, home, "store", "--text", "Kids school starts at 8", "--category", "family")
        cli_json(capsys, home, "retrieve", "school starts", "--session", session)
    found = cli_json(capsys, home, "recall", "kids school", "--session", "z", "--budget", "500")
    assert found["token_count"] and found["session"] == "z"
    transcript = tmp_path / "t.txt"
    transcript.write_text("User: The kids school trip is in May.\n")
    ended = cli_json(capsys, home, "conversation-end", str(transcript), "--session", "z")
    promoted = ended["hygiene"]["promoted"]
    assert [p["text"] for p in promoted] == ["Kids school starts at 8"]
    block = cli_json(capsys, home, "context", "--query", "when does school start for kids")
    assert "Kids school starts at 8" in str(block["context"])
    assert cli_json(capsys, home, "index-status")["progressive"]
    assert cli_json(capsys, home, "audit", "--scope", "hot")["analysis"]
    code = run(["--home", str(home), "forget"])
    assert code == 3 and "give REF or --keyword" in capsys.readouterr().err
