"""The knowledge graph through the CLI and the engine: extraction, temporal validity, entity
deduplication and merging, agent scoping, and the retrieval signal with its explanation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clikit import cli_result as cli
from tests.conftest import Clock
from tiermem.core import curate, graph
from tiermem.core.config import config_from_mapping
from tiermem.core.engine import Memory
from tiermem.core.llm import LLMError
from tiermem.core.transcript import parse
from tiermem.tui.cli import run
from tiermem.tui.mcp.home import Home
from tiermem.tui.mcp.tools.graph import knowledge_graph_search


def converse(mem: Memory, text: str) -> None:
    mem.conversation_end(parse(text), text)


def test_a_contradicting_fact_closes_the_old_relation_and_keeps_the_history(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    with Memory(home, clock=clock) as mem:
        converse(mem, "user: I live in Lisbon and I love the tram rides there.")
        clock.advance(60)
        converse(mem, "user: Big news, I moved to Porto last week and the flat is great.")
    code, out = cli(capsys, home, "graph", "relations", "--entity", "user")
    assert code == 0
    lives = {r["object"]: r for r in out["relations"] if r["predicate"] == "lives_in"}
    assert set(lives) == {"Lisbon", "Porto"}
    assert not lives["Lisbon"]["current"] and lives["Porto"]["current"]
    assert lives["Lisbon"]["valid_to"] == lives["Porto"]["valid_from"]
    assert run(["--home", str(home), "graph", "show", "User"]) == 0
    shown = capsys.readouterr().out
    assert "User → lives_in → Lisbon (" in shown and "User → lives_in → Porto (since" in shown


def test_dates_in_the_text_bound_the_relation(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        converse(mem, "user: I lived in Lisbon until 2026-03, then I moved to Porto in March 2026.")
        edges = graph.store_for(mem).edges()
        names = graph.store_for(mem).names({e.object for e in edges})
        spans = {names[e.object]: (e.valid_from, e.valid_to) for e in edges}
    march = 1772323200.0  # 2026-03-01 UTC
    assert spans["Lisbon"][1] == march and spans["Porto"] == (march, None)


def test_entities_are_deduplicated_by_case_alias_and_near_duplicate_name(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    with Memory(home, clock=clock) as mem:
        converse(mem, "user: Maya works on Ledgerly. Tom works on LEDGERLY too.")
        converse(mem, "user: Sam works on Ledgerley, the billing app, for a while now.")
    code, out = cli(capsys, home, "graph", "entities", "--kind", "project")
    assert code == 0 and [e["name"] for e in out["entities"]] == ["Ledgerly"]
    assert "Ledgerley" in out["entities"][0]["aliases"]
    code, shown = cli(capsys, home, "graph", "show", "ledgerley")
    assert code == 0 and shown["name"] == "Ledgerly"


def test_the_owner_merges_two_entities(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    with Memory(home, clock=clock) as mem:
        converse(
            mem, "user: Maya Silva works on Ledgerly. Later Maya said Mo reviews Ledgerly too."
        )
        converse(mem, "user: Our designer Mai works on Billboard since 2026-02.")
    code, merged = cli(capsys, home, "graph", "merge", "Maya Silva", "Mai")
    assert code == 0 and merged["name"] == "Maya Silva" and "Mai" in merged["aliases"]
    code, shown = cli(capsys, home, "graph", "show", "mai")
    assert code == 0 and shown["id"] == merged["id"]
    objects = {r["object"] for r in shown["relations"]}
    assert {"Ledgerly", "Billboard"} <= objects
    assert run(["--home", str(home), "graph", "merge", "Mai", "Maya Silva"]) == 3
    assert "already one entity" in capsys.readouterr().err
    assert run(["--home", str(home), "graph", "merge", "Mai", "Nobody"]) == 4


def test_the_graph_is_scoped_per_agent(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", "alpha", clock=clock) as mem:
        converse(mem, "user: Maya works on Ledgerly since March 2026.")
    with Memory(tmp_path / "home", "beta", clock=clock) as other:
        assert graph.store_for(other).count() == (0, 0)
        assert other.retrieve("what does Maya do", reinforce=False).hits == []


def test_retrieval_explains_a_memory_reached_through_the_graph(
    tmp_path: Path, clock: Clock
) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        converse(mem, "user: Maya works on Ledgerly since March 2026.")
        mem.store("Ledgerly release 2.0 ships the new invoice editor", "projects")
        graph.index_memories(mem)
        hits = mem.retrieve("What is Maya busy with?", reinforce=False).hits
    reached = {h.memory.text: h.explanation.via for h in hits}
    assert reached["Ledgerly release 2.0 ships the new invoice editor"] == (
        "Maya → works_on → Ledgerly"
    )


def test_a_graph_built_after_a_search_raises_the_next_search(tmp_path: Path, clock: Clock) -> None:
    """A search remembers that the agent has no graph; a write that builds one is seen."""
    with Memory(tmp_path / "home", clock=clock) as mem:
        mem.store("Maya likes the invoice editor", "people")
        before = mem.retrieve("What is Maya busy with?", reinforce=False).hits
        converse(mem, "user: Maya works on Ledgerly since March 2026.")
        mem.store("Ledgerly release 2.0 ships the new invoice editor", "projects")
        graph.index_memories(mem)
        hits = mem.retrieve("What is Maya busy with?", reinforce=False).hits
    assert all(h.explanation.via is None for h in before)
    reached = {h.memory.text: h.explanation.via for h in hits}
    assert reached["Ledgerly release 2.0 ships the new invoice editor"] == (
        "Maya → works_on → Ledgerly"
    )


def test_a_memory_stored_after_the_newest_one_was_forgotten_is_indexed(
    tmp_path: Path, clock: Clock
) -> None:
    """Graph indexing walks memories by row id from its progress mark (a store indexes a
    statement of change at once): a new memory must not take the row id of a forgotten one the
    mark has passed, or it is never indexed."""

    def refs() -> set[str]:
        return {r[0] for r in mem.db.query("SELECT ref FROM mentions WHERE kind = 'memory'")}

    with Memory(tmp_path / "home", clock=clock) as mem:
        newest = mem.store("The invoice editor of Ledgerly ships with release 2.0", "projects")
        graph.index_memories(mem)
        assert newest.id in refs()
        curate.move_to_forgotten(mem, newest.id)
        later = mem.store("Bank sync ships with Ledgerly next week", "projects")
        graph.index_memories(mem)
        assert later.id in refs()
        undone = curate.undo_forget(mem)
        assert graph.index_memories(mem).texts == 0  # indexed before it was forgotten
        assert undone.id == newest.id and undone.id in refs()


RELEASE = "Ledgerly release 2.0 ships the new invoice editor"


def _reached(mem: Memory) -> dict[str, str | None]:
    hits = mem.retrieve("What is Maya busy with?", reinforce=False).hits
    return {h.memory.text: h.explanation.via for h in hits}


@pytest.mark.parametrize("writer", ["this connection", "another connection"])
def test_a_search_after_a_write_sees_the_graph_and_the_rows_as_written(
    tmp_path: Path, clock: Clock, writer: str
) -> None:
    """Searches keep the graph's lookups and rows while nothing is written; a forget, a new
    memory and its indexing, by this connection or another one, are all seen by the next."""
    with Memory(tmp_path / "home", clock=clock) as mem:
        converse(mem, "user: Maya works on Ledgerly since March 2026.")
        release = mem.store(RELEASE, "projects").id
        graph.index_memories(mem)
        assert _reached(mem)[RELEASE] == "Maya → works_on → Ledgerly"
        assert _reached(mem)[RELEASE] == "Maya → works_on → Ledgerly"  # from the memo
        other = Memory(tmp_path / "home", clock=clock) if writer != "this connection" else mem
        try:
            curate.move_to_forgotten(other, release)
            assert RELEASE not in _reached(mem)
            other.store("Bank sync ships with Ledgerly next week", "projects")
            graph.index_memories(other)
        finally:
            if other is not mem:
                other.close()
        assert (
            _reached(mem)["Bank sync ships with Ledgerly next week"] == "Maya → works_on → Ledgerly"
        )


def test_without_the_signal_retrieval_ranks_as_before(tmp_path: Path, clock: Clock) -> None:
    config = config_from_mapping({"graph": {"retrieval_signal": False}}, "test")
    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        converse(mem, "user: Maya works on Ledgerly since March 2026.")
        mem.store("Ledgerly release 2.0 ships the new invoice editor", "projects")
        graph.index_memories(mem)
        hits = mem.retrieve("What is Maya busy with?", reinforce=False).hits
    assert all(h.explanation.via is None for h in hits)
    assert "Ledgerly release 2.0 ships the new invoice editor" not in [h.memory.text for h in hits]


def test_knowledge_graph_search_over_mcp(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        converse(mem, "user: Maya works on Ledgerly since March 2026.")
    home = Home(tmp_path / "home", "default", None)
    try:
        found = knowledge_graph_search(home, "led", entity=True)
    finally:
        home.close()
    assert [e["name"] for e in found["entities"]] == ["Ledgerly"]
    assert found["entity"]["relations"][0]["span"] == "since 2026-03-01"


def test_llm_extraction_falls_back_to_the_patterns_and_says_so(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "m")
    config = config_from_mapping({"graph": {"extractor": "llm"}}, "test")

    def failing(url: str, body: bytes, headers: dict[str, str], timeout: float) -> bytes:
        raise LLMError("HTTP 500 from the LLM endpoint")

    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        report = graph.index_episode(mem, "ep-x", "Maya works on Ledgerly.", failing)
        assert any("pattern extraction used" in n for n in report.notes)
        assert graph.store_for(mem).count() == (2, 1)


def test_graph_build_reads_stored_memories_and_search_finds_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    code, _ = cli(
        capsys, home, "store", "--text", "Tom leads Orbit since 2025-11", "--category", "people"
    )
    assert code == 0
    code, built = cli(capsys, home, "graph", "build")
    assert code == 0 and built["texts"] == 0  # the store indexed it already: read once
    code, found = cli(capsys, home, "graph", "search", "orb")
    assert code == 0 and [e["name"] for e in found["entities"]] == ["Orbit"]
    assert found["relations"][0]["span"] == "since 2025-11-01"
    assert run(["--home", str(home), "graph", "search", "  "]) == 3
    assert "query is empty" in capsys.readouterr().err


def test_with_no_graph_and_no_episode_the_signal_changes_nothing(
    tmp_path: Path, clock: Clock
) -> None:
    texts = ["the invoices are late again", "reviews of the invoices happen on fridays", "tea"]
    results = []
    for signal in (True, False):
        config = config_from_mapping({"graph": {"retrieval_signal": signal}}, "test")
        with Memory(tmp_path / f"home-{signal}", clock=clock, config=config) as mem:
            for text in texts:
                mem.store(text, "notes")
            assert not graph.store_for(mem).edges()  # nothing a graph could hold
            hits = mem.retrieve("invoices reviews", reinforce=False).hits
            results.append([(h.memory.text, h.explanation.score, h.explanation.via) for h in hits])
    assert results[0] == results[1]


def test_he_or_she_stands_for_the_person_named_before(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        converse(mem, "user: Maya works on Ledgerly. She moved to Porto in April 2026.")
        converse(mem, "user: I work on Quillmark. She said hello.")  # no person before: nothing
        store = graph.store_for(mem)
        edges = store.edges()
        names = store.names({e.subject for e in edges} | {e.object for e in edges})
        said = {(names[e.subject], e.predicate, names[e.object]) for e in edges}
    assert ("Maya", "lives_in", "Porto") in said and ("Maya", "works_on", "Ledgerly") in said
    assert not any(s in ("She", "User") and p == "lives_in" for s, p, _ in said)


def test_an_episode_raises_its_facts_in_a_home_with_no_entity(tmp_path: Path, clock: Clock) -> None:
    """A search remembers what the agent has (no entity, no episode); the episode a
    conversation then writes is searched, though the graph still has no entity."""
    with Memory(tmp_path / "home", clock=clock) as mem:
        mem.store("water the basil on the balcony daily", "garden")
        before = mem.retrieve("water the tomatoes", reinforce=False).hits
        converse(mem, "user: remember to water the tomatoes every second morning")
        assert graph.store_for(mem).count() == (0, 0)
        hits = mem.retrieve("water the tomatoes", reinforce=False).hits
    assert all(h.explanation.via is None for h in before)
    via = {h.memory.text: h.explanation.via or "" for h in hits}
    assert any("tomatoes" in text and v.startswith("episode ") for text, v in via.items()), via
