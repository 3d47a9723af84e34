"""The server's queries stay flat as a vault's history grows: a pull's check that a row is its
writer's newest version reads that record's own versions, never every later row (a pull from
far behind then grew with the square of the history: 17.9 s a page at 100k, past the client's
read timeout). The plans are sqld's SQLite's, so the server schema in a local SQLite shows them."""

from __future__ import annotations

import sqlite3

from tiermem.sync.vault import store
from tiermem.sync.vault.schema import SCHEMA


def _plan(sql: str, params: tuple[object, ...]) -> list[str]:
    db = sqlite3.connect(":memory:")
    for statement in SCHEMA:
        db.execute(statement)
    return [str(row[3]) for row in db.execute("EXPLAIN QUERY PLAN " + sql, params)]


def test_a_pull_page_checks_newer_versions_by_the_record_s_own_index() -> None:
    sql, params = store.pull_page(b"tag", 0, 1000)
    inner = [step for step in _plan(sql, tuple(params)) if "SEARCH n " in step]
    assert inner, "the newer-version check is a search"
    assert all("record_id=?" in step and "seq>" not in step for step in inner), inner


def test_a_restore_page_checks_newer_versions_by_the_record_s_own_index() -> None:
    sql, params = store.restore_page(b"tag", (0, 10_000, None, ()), 1000)
    inner = [step for step in _plan(sql, tuple(params)) if "SEARCH n " in step]
    assert inner and all("record_id=?" in step for step in inner), inner


def test_warm_records_are_found_by_their_record_ids_and_windows_skip_them() -> None:
    ids = [bytes([n]) * 16 for n in range(200)]
    sql, params = store.restore_records(ids, b"tag", None, [(10, 20), (30, 40)], 0, 1000)
    plan = _plan(sql, tuple(params))
    outer = [step for step in plan if "SEARCH r " in step]
    assert outer and all("record_id=?" in step for step in outer), plan
    inner = [step for step in plan if "SEARCH n " in step]
    assert inner and all("record_id=?" in step for step in inner), plan
    sql, params = store.restore_page(b"tag", (0, 10_000, None, ()), 1000, [5, 7])
    inner = [step for step in _plan(sql, tuple(params)) if "SEARCH n " in step]
    assert inner and all("record_id=?" in step for step in inner), inner
