"""Token counts a one-shot store leaves to the first read: every read sees the exact count, and
the count a read made is kept by the next write."""

from __future__ import annotations

import json
from pathlib import Path

from tiermem.core.engine import Memory
from tiermem.core.tokens import count_tokens
from tiermem.tui.cli import run

LONG = (
    "the quokka deploy checklist has twelve steps and the rollback plan is in the wiki " * 3
).strip()
SHORT = "quokka deploy is on friday"


def stored_count(mem: Memory, memory_id: str) -> int:
    return int(mem.db.scalar("SELECT tokens FROM memories WHERE id = ?", (memory_id,)))


def test_a_fact_stored_uncounted_reads_with_its_exact_count(tmp_path: Path) -> None:
    with Memory(tmp_path / "home") as mem:
        out = mem.store(LONG, "projects", count_tokens=False)
        assert stored_count(mem, out.id) == 0
        assert mem.get(out.id).tokens == count_tokens(LONG)
        assert mem.memories.total_tokens() == count_tokens(LONG)


def test_budgets_and_ranking_are_the_same_as_for_counted_facts(tmp_path: Path) -> None:
    """The same facts stored counted and uncounted rank, fit and sum alike."""
    results = []
    for counted in (True, False):
        with Memory(tmp_path / f"home-{counted}") as mem:
            for text in (LONG, SHORT, "the wiki has the quokka rollback plan"):
                mem.store(text, "projects", count_tokens=counted)
            result = mem.retrieve("quokka deploy rollback", budget=30, reinforce=False)
            results.append(
                (
                    [h.memory.text for h in result.hits],
                    result.tokens,
                    [h.memory.tokens for h in result.hits],
                )
            )
    assert results[0] == results[1]
    assert results[0][1] <= 30


def test_the_count_a_read_made_is_kept(tmp_path: Path, capsys) -> None:
    home = tmp_path / "home"
    assert run(["--home", str(home), "store", "--text", LONG, "--category", "projects"]) == 0
    assert run(["--home", str(home), "--json", "retrieve", "quokka checklist"]) == 0
    found = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert found["tokens"] == count_tokens(LONG)
    with Memory(home) as mem:
        assert stored_count(mem, found["results"][0]["id"]) == count_tokens(LONG)


def test_store_in_json_reports_the_exact_count(tmp_path: Path, capsys) -> None:
    home = tmp_path / "home"
    assert run(["--home", str(home), "--json", "store", "--text", SHORT, "--category", "x"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == count_tokens(SHORT)


def test_a_read_that_returns_nothing_to_reinforce_still_keeps_the_count(
    tmp_path: Path, capsys
) -> None:
    home = tmp_path / "home"
    assert run(["--home", str(home), "--json", "store", "--text", SHORT, "--category", "x"]) == 0
    memory_id = json.loads(capsys.readouterr().out)["id"]
    with Memory(home) as mem:
        assert stored_count(mem, memory_id) == 0
    assert run(["--home", str(home), "get", memory_id]) == 0
    with Memory(home) as mem:
        assert stored_count(mem, memory_id) == count_tokens(SHORT)
