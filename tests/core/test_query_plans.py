"""Query plans that stay flat as the archive grows. Without statistics SQLite prefers an
equality on a tier index over a list of keys or a rowid walk: picking 30 rows by id then walked
every row of a tier (5 ms instead of 0.04 at 20k), and each chunk of an archive walk sorted the
whole archive again. The plans are the same on a small store, so a small one shows them."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import Clock
from tests.graph.test_graph import converse
from tiermem.core import graph
from tiermem.core.engine import Memory
from tiermem.core.scoped import Filters
from tiermem.core.warm import NewFact

_BY_KEYS = re.compile(r"\b(?:m\.)?(?:id|seq) IN \(\s*(?:'|\?|CAST|\d)", re.IGNORECASE)
_WALK = re.compile(r"ORDER BY seq LIMIT", re.IGNORECASE)
_TIER_INDEXES = ("memories_tier", "memories_created")


def _plan(mem: Memory, sql: str, params: tuple[object, ...] = ()) -> str:
    return " | ".join(str(r[3]) for r in mem.db.query("EXPLAIN QUERY PLAN " + sql, params))


def _statements(tmp_path: Path, clock: Clock) -> tuple[Memory, list[str]]:
    """What a search with the graph signal, a full consolidation and the archive walks ran."""
    mem = Memory(tmp_path / "home", clock=clock, driver="sqlite3")
    converse(mem, "user: Maya works on Ledgerly since March 2026.")
    mem.store_many(NewFact(f"note {i} about https://x.test/{i}", "notes", 0.3) for i in range(40))
    for feature in ("invoice editor", "tax export", "bank sync", "receipt scanner", "dark mode"):
        mem.store(f"Ledgerly release 2.0 ships the new {feature}", "projects")
    graph.index_memories(mem)
    seen: list[str] = []
    mem.db._conn.set_trace_callback(seen.append)  # type: ignore[attr-defined]
    mem.retrieve("What is Maya busy with?")
    mem.retrieve("invoice editor", tier="cold")
    mem.consolidate("full")
    mem.all_urls()
    mem.store("Maya reviews the Ledgerly invoice editor on Fridays", "people")
    graph.index_memories(mem)
    mem.db._conn.set_trace_callback(None)  # type: ignore[attr-defined]
    return mem, [s for s in seen if "memories" in s and s.lstrip().upper().startswith("SELECT")]


def test_rows_picked_by_key_and_archive_walks_never_scan_a_tier(
    tmp_path: Path, clock: Clock
) -> None:
    mem, statements = _statements(tmp_path, clock)
    try:
        by_keys = [s for s in statements if _BY_KEYS.search(s)]
        walks = [s for s in statements if _WALK.search(s)]
        assert by_keys and walks  # the workload ran both kinds
        for sql in by_keys:
            plan = _plan(mem, sql)
            assert not any(name in plan for name in _TIER_INDEXES), (sql, plan)
            assert "SCAN m" not in plan, (sql, plan)
        for sql in walks:
            plan = _plan(mem, sql)
            assert "TEMP B-TREE" not in plan and "INTEGER PRIMARY KEY" in plan, (sql, plan)
    finally:
        mem.close()


def test_vector_candidates_are_looked_up_by_rowid(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        mem.store("a fact", "notes")
        filters = Filters(mem.memories, ("warm", "cold", "frozen"), None)
        where, params = filters.sql(picked_by="seq")
        seqs = (str(mem.memories.seq_low + 1), str(mem.memories.seq_low + 2))
        plan = _plan(
            mem,
            f"SELECT m.seq FROM memories m WHERE m.seq IN "
            f"(CAST(? AS INTEGER), CAST(? AS INTEGER)){where}",
            (*seqs, *params),
        )
    assert plan == "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)", plan
