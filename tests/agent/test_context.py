"""Context injection and recall: real budgets in cl100k tokens, the always-loaded part under
1,500 tokens, the trivial-message filter, priorities, tags and expiry of memory_store."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import Clock
from tiermem.core import audit, context
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.remember import Entry, remember
from tiermem.core.tokens import count_tokens


def fill_hot_to_the_limit(mem: Memory) -> None:
    """Hot memory at its 5 KB limit and a full tree: more than 1,500 tokens unfitted. The tree
    comes first: the categories of what hot's limits move to warm would take its root's slots."""
    for top in range(9):
        for sub in range(4):
            mem.tree_add(f"topic{top}/sub{sub}", f"everything about subject {top}.{sub} here")
    mem.update_hot("identity", {"agent_name": "Claw", "owner": "Sam", "style": "terse" * 3})
    mem.update_hot("owner_profile", {"timezone": "Europe/Paris", "loves": ["cycling", "tea"]})
    for i in range(25):
        mem.add_lesson(f"Lesson {i}: check every deploy step twice before release {i}", 0.5)
    for i in range(12):
        mem.add_event(f"Event {i}: shipped milestone {i} of the roadmap with the whole team")
        mem.add_task(f"Task {i}: follow up with the vendor about invoice number {i}")
    for i in range(6):
        mem.add_project(f"Project {i}", f"long running effort number {i} with many parts")


def test_always_loaded_stays_under_1500_tokens_with_hot_and_tree_full(mem: Memory) -> None:
    fill_hot_to_the_limit(mem)
    unfitted = count_tokens(mem.memory_md()) + count_tokens(mem.tree().serialize())
    assert mem.hot_size_bytes() > 4000 and len(mem.tree().nodes) >= 45
    base = context.always_loaded(mem)
    assert base.tokens == count_tokens(base.text) <= context.ALWAYS_LOADED_MAX_TOKENS
    assert unfitted > base.tokens  # something had to be left out, and it says so
    assert base.left_out and "Left out to stay in budget" in base.text
    assert "## Identity" in base.text and "Claw" in base.text  # identity is kept first


@settings(max_examples=15, deadline=None)
@given(limit=st.integers(min_value=1, max_value=2000))
def test_always_loaded_fits_any_limit(tmp_path_factory: pytest.TempPathFactory, limit: int) -> None:
    home = tmp_path_factory.mktemp("home")
    with Memory(home, driver="sqlite3") as mem:
        mem.update_hot("identity", {"name": "x" * 400})
        for i in range(8):
            mem.add_lesson(f"lesson number {i} about deploys and testing", 0.6)
        base = context.always_loaded(mem, limit)
        assert count_tokens(base.text) == base.tokens <= limit


def test_context_block_respects_the_budget_and_injects_relevant_memories(mem: Memory) -> None:
    fill_hot_to_the_limit(mem)
    for i in range(60):
        mem.store(f"The staging database password rotation happens on day {i}", "ops/db", 0.5)
    mem.store("Hackathon deadline is February 15 for the BSC integration", "projects/bsc", 0.8)
    for budget in (400, 1600, 3000):
        block = context.build_context(mem, "when is the hackathon deadline for bsc?", budget=budget)
        assert block.tokens == count_tokens(block.text) <= budget
        assert block.always_loaded_tokens <= min(budget, 1500)
    block = context.build_context(mem, "when is the hackathon deadline for bsc?", budget=3000)
    assert "Hackathon deadline is February 15" in block.text
    assert block.memory_ids and not block.trivial
    assert block.memory_tokens == block.tokens - block.always_loaded_tokens > 0


@pytest.mark.parametrize(
    ("message", "trivial"),
    [
        ("hi", True),
        ("ok thanks!", True),
        ("Yes, sure, sounds good to me", True),
        ("what is the deploy command?", False),  # a question: never trivial
        ("what was the deploy command for staging?", False),
        ("Remind me of Sarah's birthday party plans", False),
    ],
)
def test_trivial_filter(message: str, trivial: bool) -> None:
    assert context.is_trivial(message) is trivial


def test_trivial_message_injects_only_the_always_loaded_part(mem: Memory) -> None:
    fact = mem.store("thanks for the deploy fix on staging", "ops", 0.9).id
    block = context.build_context(mem, "thanks!")
    assert block.trivial and block.memory_ids == [] and block.memory_tokens == 0
    assert block.text == context.always_loaded(mem).text
    assert mem.get(fact).access_count == 0  # nothing was retrieved
    full = context.build_context(mem, "thanks for fixing the staging deploy")
    assert full.memory_ids == [fact] and mem.get(fact).access_count == 1


def test_recall_budget_is_real_and_reported(mem: Memory) -> None:
    for i in range(30):
        mem.store(f"Deploy note {i}: run the migration before restarting worker {i}", "ops", 0.5)
    full = context.recall(mem, "deploy migration worker", budget=100_000)
    assert len(full.entries) == full.total_entries_matched == 30
    small = context.recall(mem, "deploy migration worker", budget=300)
    assert 0 < len(small.entries) < 30
    small = context.recall(mem, "deploy migration worker", budget=60)
    assert 0 < len(small.entries) < 30
    cost = sum(count_tokens(e["content"]) for e in small.entries)  # one unit: text tokens
    assert small.token_count == cost <= 60
    assert small.as_dict()["budget_remaining"] == 60 - cost
    assert small.total_entries_matched == 30
    assert all("why" in e and "matched" in e["why"] for e in small.entries)
    detailed = context.recall(mem, "deploy migration worker", budget=100_000, fmt="detailed")
    assert detailed.entries[0]["explanation"]["matched_terms"]
    assert detailed.token_count == full.token_count  # the unit is the text, in any format
    with pytest.raises(InvalidInput):
        context.recall(mem, "deploy", budget=0)
    with pytest.raises(InvalidInput):
        context.recall(mem, "deploy", priority_min="urgent")


def test_recall_filters_by_categories_and_priority(mem: Memory) -> None:
    remember(mem, Entry("Standup moved to 10am on Mondays", "work/meetings", priority="low"))
    remember(mem, Entry("Standup notes go to the wiki page", "work/docs", priority="high"))
    remember(mem, Entry("Standup at the gym is yoga", "home/hobbies", priority="critical"))
    found = context.recall(mem, "standup", categories=["work"])
    assert {e["category"] for e in found.entries} == {"work/meetings", "work/docs"}
    found = context.recall(mem, "standup", categories=["work/docs", "home"])
    assert {e["category"] for e in found.entries} == {"work/docs", "home/hobbies"}
    found = context.recall(mem, "standup", priority_min="high")
    assert {e["priority"] for e in found.entries} == {"high", "critical"}


def test_remember_dedups_merges_tags_and_expires(mem: Memory, clock: Clock) -> None:
    first = remember(
        mem,
        Entry(
            "Use ruff format before committing",
            "instructions",
            priority="high",
            tags=["python"],
            expires="2026-01-10",
            urls=["https://docs.astral.sh/ruff"],
            commands=["ruff format ."],
        ),
    )
    assert (
        first.outcome.created
        and context.priority_of(mem.get(first.outcome.id).importance) == "high"
    )
    assert first.outcome.tokens == count_tokens("Use ruff format before committing")
    again = remember(mem, Entry("use ruff format before committing", "x", tags=["style"]))
    assert not again.outcome.created and again.outcome.id == first.outcome.id
    assert again.tags == ("python", "style")
    record = mem.get(first.outcome.id)
    assert record.urls == ("https://docs.astral.sh/ruff",) and record.importance == 0.8
    with pytest.raises(InvalidInput, match="priority or importance"):
        remember(mem, Entry("x", "y", priority="low", importance=0.2))
    with pytest.raises(InvalidInput, match="past"):
        remember(mem, Entry("x", "y", expires="2025-12-31"))
    with pytest.raises(InvalidInput, match="ISO"):
        remember(mem, Entry("x", "y", expires="next tuesday"))
    clock.advance(9)  # 2026-01-10: still valid that day
    assert context.recall(mem, "ruff format").entries
    clock.advance(1.01)  # past the end of 2026-01-10 UTC
    found = context.recall(mem, "ruff format")
    assert mem.get(first.outcome.id).tier == "cold"  # archived, still searchable
    assert found.entries and found.entries[0]["id"] == first.outcome.id


def test_index_status_and_audit_in_tokens(mem: Memory) -> None:
    mem.add_lesson("Always test on testnet before mainnet", 0.8)
    mem.store("Always test on the testnet before mainnet!", "lessons", 0.6)
    mem.store("Sarah likes green tea", "people/sarah", 0.5)
    mem.store("Deploy notes " + "lorem ipsum dolor " * 80, "ops", 0.5)
    status = audit.index_status(mem)
    assert set(status) == {"legacy", "progressive", "index"}
    assert status["progressive"]["total_entries"] == 3
    assert status["progressive"]["by_priority"]["high"] == 0
    assert status["index"]["always_loaded_tokens"] == context.always_loaded(mem).tokens
    assert {d["name"] for d in status["index"]["on_demand_domains"]} == {"lessons", "people", "ops"}
    report = audit.audit(mem)
    breakdown = report["analysis"]["breakdown"]
    assert sum(b["tokens"] for b in breakdown) == report["analysis"]["total_tokens"]
    assert abs(sum(b["percentage"] for b in breakdown) - 100) < 0.1
    (pair,) = report["analysis"]["duplicates"]
    assert {pair["sources"][0], pair["sources"][1]} == {"hot lesson", "warm: lessons"}
    actions = {r["action"]: r for r in report["recommendations"]}
    assert (
        actions["merge_duplicates"]["estimated_savings_tokens"] == pair["tokens_saved_by_merging"]
    )
    assert actions["distill_long_memories"]["estimated_savings_tokens"] > 100
    with pytest.raises(InvalidInput):
        audit.audit(mem, "everything")
