"""The optional vector index (core/vectors.py): libSQL's vector column and index with the
all-MiniLM-L6-v2 model shipped in a wheel. The model tests run only where the `vector` extra is
installed (CI installs it); the 'unavailable' paths run everywhere."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from tiermem.core import curate, vectors
from tiermem.core.config import Config, RetrievalConfig
from tiermem.core.engine import Memory
from tiermem.core.vectors import VectorIndex, VectorUnavailable
from tiermem.core.warm import NewFact
from tiermem.tui.cli import run

needs_model = pytest.mark.skipif(
    not vectors.installed(), reason=f"the vector extra is not installed ({vectors.INSTALL_HINT})"
)

FACTS = [
    NewFact("I adopted a golden retriever puppy named Max", "life/family", 0.6),
    NewFact("The car needs an oil change before the trip", "life/car", 0.5),
    NewFact("Tax deadline is in April", "owner/finance", 0.7),
    NewFact("Booked flights to Lisbon for the conference", "work/travel", 0.5),
    NewFact("Prefers green tea over coffee in the morning", "owner/preferences", 0.4),
]


@pytest.fixture
def home(tmp_path, clock) -> Iterator[Memory]:
    mem = Memory(tmp_path / "home", clock=clock, driver="libsql")
    mem.store_many(FACTS)
    yield mem
    mem.close()


def vector_rows(mem: Memory) -> int:
    return int(mem.db.scalar("SELECT count(*) FROM memory_vectors"))


def test_sqlite3_driver_is_a_clear_error(tmp_path) -> None:
    with Memory(tmp_path / "home", driver="sqlite3") as mem:
        mem.store("Tax deadline is in April", "owner/finance", 0.7)
        for mode in ("vector", "hybrid"):
            with pytest.raises(VectorUnavailable, match="needs the libSQL driver"):
                mem.retrieve("taxes", mode=mode)
        fallback = Config(retrieval=RetrievalConfig(vector_fallback=True))
    with Memory(tmp_path / "home", driver="sqlite3", config=fallback) as mem:
        result = mem.retrieve("nothing matches this")
        assert result.notes[0].startswith("vector fallback unavailable: vector retrieval needs")


def test_missing_extra_names_the_install_command(home: Memory, monkeypatch) -> None:
    monkeypatch.setattr(vectors, "installed", lambda: False)
    monkeypatch.setattr(vectors, "_default", None)
    with pytest.raises(VectorUnavailable, match=r'pip install "tiermem\[vector\]"'):
        home.retrieve("pets", mode="vector")


def test_cli_mode_vector_on_sqlite3_exits_3(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("TIERMEM_DRIVER", "sqlite3")
    assert run(["--home", str(tmp_path / "h"), "store", "--text", "a cat", "--category", "p"]) == 0
    code = run(["--home", str(tmp_path / "h"), "retrieve", "pets", "--mode", "vector"])
    assert code == 3 and "needs the libSQL driver" in capsys.readouterr().err


@needs_model
def test_vector_mode_finds_a_paraphrase_keywords_cannot(home: Memory) -> None:
    assert home.retrieve("my dog", reinforce=False).hits == []  # no shared word
    result = home.retrieve("my dog", mode="vector", reinforce=False)
    top = result.hits[0]
    assert top.memory.text.startswith("I adopted a golden retriever")
    e = top.explanation
    assert e.found_by == "vector" and e.vector_rank == 1 and e.keyword_rank is None
    assert e.similarity is not None and 0 < e.similarity <= 1 and e.bm25 == 0.0
    assert (
        home.db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'memory_vectors_idx'") == 1
    )  # libSQL's DiskANN index
    assert vector_rows(home) == len(FACTS)


@needs_model
def test_hybrid_explanation_shows_both_parts(home: Memory) -> None:
    result = home.retrieve("puppy", mode="hybrid", reinforce=False)
    e = result.hits[0].explanation
    assert result.mode == "hybrid" and e.found_by == "both"
    assert e.keyword_rank == 1 and e.vector_rank == 1 and e.bm25 < 0
    assert e.relevance == pytest.approx(1.0)  # 'puppy' is its only term: keyword ranking kept
    assert "keyword ranking kept" in result.notes[0]
    assert {h.explanation.found_by for h in result.hits[1:]} == {"vector"}


@needs_model
def test_fallback_adds_vector_results_after_too_few_keyword_ones(tmp_path, clock) -> None:
    config = Config(retrieval=RetrievalConfig(vector_fallback=True, fallback_min_results=2))
    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        mem.store_many(FACTS)
        result = mem.retrieve("flights for my dog", limit=3, reinforce=False)
        assert result.notes == ["keyword search found 1 < 2: vector fallback used"]
        first, *rest = result.hits
        assert first.memory.text.startswith("Booked flights")  # keyword results stay first
        assert first.explanation.found_by == "keyword"
        assert [h.explanation.found_by for h in rest] == ["vector fallback"] * 2
        assert rest[0].memory.text.startswith("I adopted")
        assert mem.retrieve("trip or conference", limit=3, reinforce=False).notes == []


@needs_model
def test_weak_keyword_results_can_trigger_the_fallback(tmp_path, clock) -> None:
    config = Config(retrieval=RetrievalConfig(vector_fallback=True, fallback_min_coverage=0.5))
    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        mem.store_many(FACTS)
        result = mem.retrieve("green puppy veterinarian checkup", reinforce=False)
        assert "of the query's terms < 50%: vector fallback used" in result.notes[0]


@needs_model
def test_index_follows_edits_deletes_and_agents(home: Memory, tmp_path, clock) -> None:
    index = VectorIndex(home.memories)
    assert index.sync() == len(FACTS) and index.sync() == 0
    puppy = home.retrieve("puppy", reinforce=False).hits[0].memory
    tax = home.retrieve("tax", reinforce=False).hits[0].memory
    curate.edit(home, puppy.id, text="I adopted a tabby kitten named Max")
    curate.move_to_forgotten(home, tax.id)
    assert index.sync() == 1  # the edited one; the forgotten one's vector is dropped
    assert vector_rows(home) == len(FACTS) - 1
    top = home.retrieve("my cat", mode="vector", reinforce=False).hits[0]
    assert top.memory.text == "I adopted a tabby kitten named Max"
    with Memory(tmp_path / "home", "other-agent", clock=clock) as other:
        other.store("My cat is called Felix", "pets", 0.5)
        mine = {h.memory.text for h in home.retrieve("cat", mode="vector", limit=10).hits}
        theirs = [h.memory.text for h in other.retrieve("cat", mode="vector", limit=10).hits]
    assert "My cat is called Felix" not in mine and theirs == ["My cat is called Felix"]


@needs_model
def test_the_diskann_index_serves_large_agents(home: Memory, monkeypatch) -> None:
    index = VectorIndex(home.memories)
    exact = index.similar("pets and travel", pool=3)
    calls: list[str] = []
    query = home.db.query

    def spy(sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        calls.append(sql)
        return query(sql, params)

    monkeypatch.setattr(home.db, "query", spy)
    monkeypatch.setattr(vectors, "EXACT_BELOW", 1)  # as if the agent were large
    near = index.similar("pets and travel", pool=3)
    assert any("vector_top_k" in sql for sql in calls)
    assert [seq for seq, _ in near] == [seq for seq, _ in exact]
    assert [sim for _, sim in near] == pytest.approx([sim for _, sim in exact], abs=1e-4)
