"""Dedup on every write: exact and near-duplicates reinforce the stored memory."""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.clikit import cli_json
from tests.conftest import Clock, MemoryFactory
from tiermem.core.config import Config, DedupConfig
from tiermem.core.dedup import (
    CHUNK_MAX_WORDS,
    PROBE_MAX_WORDS,
    NearIndex,
    candidates_index,
    guard,
    near_key,
    similarity,
    word_forms,
)
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.warm import NewFact


def count(mem: Memory) -> int:
    return sum(mem.memories.counts().values())


def test_exact_duplicate_reinforces(mem: Memory) -> None:
    first = mem.store("Deploy to BSC testnet before mainnet", "ops", 0.6)
    again = mem.store("  deploy to bsc TESTNET before mainnet ", "other", 0.9)
    assert again.created is False and again.merged_into == first.id and again.similarity == 1.0
    record = mem.get(first.id)
    assert count(mem) == 1 and record.access_count == 1 and record.importance == 0.9
    assert record.category == "ops"


def test_near_duplicate_reinforces_and_merges_metadata(mem: Memory) -> None:
    first = mem.store("Deploy to the BSC testnet before mainnet.", "ops", 0.6)
    near = mem.store(
        "Deploy to BSC testnet before the mainnet!", "ops", 0.7, urls=["https://x.org/bsc"]
    )
    assert near.created is False and near.merged_into == first.id == near.id
    assert near.similarity is not None and 0.9 <= near.similarity < 1.0
    record = mem.get(first.id)
    assert count(mem) == 1 and record.access_count == 1
    assert record.text == "Deploy to the BSC testnet before mainnet."  # the original text stays
    assert record.urls == ("https://x.org/bsc",) and record.importance == 0.7


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The API server listens on port 8080", "The API server listens on port 8081"),
        ("We use Postgres for the main database", "We do not use Postgres for the main database"),
        ("We don't deploy on Fridays at all", "We deploy on Fridays at all"),
        ("Docs are at https://a.example.org/x", "Docs are at https://a.example.org/y"),
        ("Sarah likes the blue theme for the app", "Sarah hates the blue theme for the app"),
        (
            "We decided to rename the deploy script job for the EvoClaw team",
            "We decided to rename the deploy script job for the blog team",
        ),
        ("Ship the release on Friday", "Ship the release on Friday afternoon"),
    ],
)
def test_different_facts_are_not_merged(mem: Memory, a: str, b: str) -> None:
    mem.store(a, "c")
    assert mem.store(b, "c").created is True
    assert count(mem) == 2


def test_near_dedup_within_one_batch_and_threshold_config(open_memory: MemoryFactory) -> None:
    mem = open_memory()
    outcomes = mem.store_many(
        [
            NewFact("Remember to renew the TLS certificate for the shop", "ops"),
            NewFact("Remember to renew the TLS certificates for the shop.", "ops"),
        ]
    )
    assert [o.created for o in outcomes] == [True, False]
    assert outcomes[1].merged_into == outcomes[0].id
    strict = open_memory("strict", config=Config(dedup=DedupConfig(similarity=0.995)))
    strict.store("Remember to renew the TLS certificate for the shop", "ops")
    assert strict.store("Remember to renew the TLS certificates for the shop.", "ops").created
    off = open_memory("off", config=Config(dedup=DedupConfig(near=False)))
    off.store("Remember to renew the TLS certificate for the shop", "ops")
    assert off.store("Remember to renew the TLS certificates for the shop.", "ops").created


def test_near_dedup_only_looks_at_the_window(open_memory: MemoryFactory) -> None:
    mem = open_memory(config=Config(dedup=DedupConfig(window=3)))
    mem.store("The garden hose is kept in the blue shed", "home")
    for i in range(3):
        mem.store(f"Unrelated note about topic {i} for the window", "misc")
    fresh = open_memory(config=Config(dedup=DedupConfig(window=3)))  # rebuilds its window
    assert fresh.store("The garden hose is kept in the blue shed!", "home").created is True


def test_another_connections_writes_are_seen(open_memory: MemoryFactory) -> None:
    one, two = open_memory(), open_memory()
    assert one.store("Buy oat milk and coffee beans on Saturday", "home").created
    assert two.store("Buy oat milk and coffee beans on saturday!", "home").created is False
    assert two.store("The car needs new winter tyres before December", "car").created
    merged = one.store("The car needs new winter tyres before december.", "car")
    assert merged.created is False  # one's window was rebuilt: two had committed
    assert count(one) == 2


def test_a_deleted_or_edited_candidate_is_never_merged_into(mem: Memory) -> None:
    kept = mem.store("Water the tomatoes every second morning", "garden")
    mem.db.execute("DELETE FROM memories WHERE id = ?", (kept.id,))  # behind the index's back
    again = mem.store("Water the tomatoes every second morning!", "garden")
    assert again.created is True and count(mem) == 1


def test_agents_do_not_dedup_into_each_other(open_memory: MemoryFactory) -> None:
    a, b = open_memory("a"), open_memory("b")
    a.store("Standup moved to 10am on Mondays", "work")
    assert b.store("Standup moved to 10am on Mondays!", "work").created
    assert b.store("Standup moved to 10am on Mondays", "work").created is False
    assert count(a) == count(b) == 1


def test_index_and_guard_units() -> None:
    index = NearIndex(0.9)
    index.add("1", "Ship the release on Friday afternoon")
    assert index.find("ship the release on friday afternoon!!") == [("1", 1.0)]
    assert index.find("Ship the release on Monday morning") == []
    index.remove("1")
    assert index.find("Ship the release on Friday afternoon") == []
    assert guard("port 80 isn't open")[:2] == (("80",), frozenset({"n't"}))
    assert similarity("A-B c", "a b C") == 1.0


def test_cli_store_says_where_it_merged(capsys, home: Path) -> None:
    first = cli_json(
        capsys, home, "store", "--text", "Backups run nightly at 2am", "--category", "ops"
    )
    near = cli_json(
        capsys, home, "store", "--text", "Backups run nightly at 2am.", "--category", "ops"
    )
    assert first["deduplicated"] is False and first["merged_into"] is None
    assert near["deduplicated"] is True and near["merged_into"] == first["id"]
    assert near["similarity"] == 1.0  # punctuation only: the same once normalized


AgentFactory = Callable[..., Memory]


@pytest.fixture
def new_agent(tmp_path: Path, clock: Clock, driver: str) -> AgentFactory:
    """A `Memory` of a new agent on one home, for one example of a property: used with `with`,
    so a run of hundreds of examples does not keep hundreds of connections open."""

    def factory(**kwargs: Any) -> Memory:
        agent = f"agent-{uuid.uuid4().hex}"
        return Memory(tmp_path / "home", agent, clock=clock, driver=driver, **kwargs)

    return factory


_VOCAB = [
    "deploy",
    "Deploy",
    "deploys",
    "the",
    "shop",
    "certificate",
    "certificates",
    "renew",
    "TLS",
    "port",
    "8080",
    "8081",
    "not",
    "café",
    "cafe",
    "team",
    "blog",
    "garden",
    "hose",
    "Friday",
]
_text = st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=8).map(" ".join)


def _variant(text: str, how: int) -> str:
    """A near copy of `text`: punctuation, case, a word in the plural, one word dropped or
    doubled."""
    words = text.split()
    if how >= 4:
        at = how % len(words)
        return " ".join([*words[:at], words[at] + "s", *words[at + 1 :]])
    if how == 0:
        return text + "!"
    if how == 1:
        return text.upper()
    if how == 2 and len(words) > 1:
        return " ".join(words[:-1])
    return " ".join([*words, words[-1]])


@settings(max_examples=250, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    stored=st.lists(_text, min_size=1, max_size=25),
    pick=st.integers(0, 24),
    how=st.integers(0, 12),
    window=st.integers(1, 30),
)
def test_the_word_lookup_finds_what_the_whole_window_finds(
    new_agent: AgentFactory, stored: list[str], pick: int, how: int, window: int
) -> None:
    """A one-fact store indexes only the stored texts sharing half of its words, counted through
    the full-text index; it must find every near-duplicate the whole window's index finds."""
    with new_agent(config=Config(dedup=DedupConfig(near=False))) as mem:
        _finds_what_the_window_finds(mem, stored, _variant(stored[pick % len(stored)], how), window)


def _finds_what_the_window_finds(mem: Memory, stored: list[str], new: str, window: int) -> None:
    mem.store_many([NewFact(t, "c") for t in stored])
    store = mem.memories
    rows = mem.db.query(
        "SELECT id, text FROM memories WHERE agent_id = ? ORDER BY seq DESC LIMIT ?",
        (mem.agent_id, window),
    )
    whole = NearIndex(0.9)
    for memory_id, text in reversed(rows):
        whole.add(memory_id, text)
    lookup = candidates_index(mem.db, (store.seq_low, store.seq_high), window, [new], 0.9)
    assert lookup is not None and lookup.find(new) == whole.find(new)


def test_a_long_fact_is_looked_up_in_the_whole_window(open_memory: MemoryFactory) -> None:
    """Past `PROBE_MAX_WORDS` content words the word lookup steps aside; the near-duplicate is
    still found (by a second connection, which has no index kept from the first store)."""
    words = [f"term{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(PROBE_MAX_WORDS + 6)]
    first = open_memory().store(" ".join(words), "long")
    again = open_memory().store(" ".join(words[:-1]) + " " + words[-1] + "s", "long")
    assert again.created is False and again.merged_into == first.id


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(min_size=1, max_size=60))
def test_the_word_lookup_takes_any_text(new_agent: AgentFactory, text: str) -> None:
    """Whatever a fact holds (symbols, quotes, FTS5 syntax, any script), the lookup's
    full-text query is well formed, and it finds the fact's own copy once stored."""
    with new_agent() as mem:
        _finds_its_copy(mem, text)


def _finds_its_copy(mem: Memory, text: str) -> None:
    store = mem.memories
    rows = (store.seq_low, store.seq_high)
    empty = candidates_index(mem.db, rows, 2000, [text], 0.9)
    if empty is None:  # the whole window is searched instead
        runs = [len(near_key(chunk).split()) for chunk in text.split()]
        assert not unicodedata.is_normalized("NFKC", text) or max(runs) > CHUNK_MAX_WORDS
        return
    assert empty.find(text) == []
    try:
        stored = mem.store(text, "c")
    except InvalidInput:  # empty, or a NUL: refused before any lookup
        return
    lookup = candidates_index(mem.db, rows, 2000, [text], 0.9)
    expected = [stored.id] if word_forms(text) else []
    assert lookup is not None and [m for m, _ in lookup.find(text)] == expected
