"""Upgrades: a committed home of every older schema version migrates with its data intact, and
a migration that fails leaves the previous version in place (nothing half-applied).

The homes are built by `tests/reliability/make_homes.py` (rerun it after appending a migration);
the first test fails, naming that command, when a version has no home.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.invariants import domain_problems, storage_problems
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import StorageError
from tiermem.core.migrations import MIGRATIONS, migrate, schema_version

HOMES = Path(__file__).resolve().parents[1] / "fixtures" / "homes"
OLDER = list(range(1, len(MIGRATIONS)))
REGENERATE = ".venv/bin/python tests/reliability/make_homes.py"


def copy_home(version: int, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    source = HOMES / f"v{version}"
    home = tmp_path / f"v{version}"
    shutil.copytree(source, home)
    expected = json.loads((source / "expected.json").read_text(encoding="utf-8"))
    return home, expected


def schema(db: Database) -> list[tuple[str, str]]:
    rows = db.query("SELECT name, COALESCE(sql, '') FROM sqlite_master ORDER BY name")
    return [(str(r[0]), str(r[1])) for r in rows]


def counts(db: Database) -> dict[str, int]:
    names = [r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {n: int(db.scalar(f'SELECT count(*) FROM "{n}"')) for n in names}


def test_a_home_for_every_older_schema_version() -> None:
    missing = [v for v in OLDER if not (HOMES / f"v{v}" / "tiermem.db").is_file()]
    assert not missing, f"no upgrade fixture for schema version(s) {missing}: run `{REGENERATE}`"
    for version in OLDER:  # opened immutable: checking a fixture must not change its file
        path = HOMES / f"v{version}" / "tiermem.db"
        with contextlib.closing(sqlite3.connect(f"file:{path}?immutable=1", uri=True)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == version


@pytest.mark.parametrize("version", OLDER)
def test_upgrade_keeps_every_row(version: int, tmp_path: Path) -> None:
    home, expected = copy_home(version, tmp_path)
    for agent in expected["hot"]:
        with Memory(home, agent) as mem:
            assert schema_version(mem.db) == len(MIGRATIONS)
            assert storage_problems(mem.db) == []
            assert domain_problems(mem) == []
            mine = [m for m in expected["memories"] if m["agent"] == agent]
            for m in mine:
                record = mem.get(m["id"])
                assert (record.text, record.tier, record.category) == (
                    m["text"],
                    m["tier"],
                    m["category"],
                )
                assert record.access_count == m["access_count"]
                assert list(record.urls) == m["urls"]
                found = mem.retrieve(m["text"].split()[-1], tier="all", reinforce=False, limit=20)
                assert m["id"] in {h.memory.id for h in found.hits}, f"v{version}: FTS lost {m}"
            state = mem.hot()
            hot = expected["hot"][agent]
            assert state.identity == hot["identity"]
            assert state.owner_profile == hot.get("owner_profile", {})
            lessons = [x["text"] for x in hot.get("critical_lessons", [])]
            assert [x.text for x in state.critical_lessons] == lessons
            ctx = hot.get("active_context", {})
            assert [e.text for e in state.active_context.events] == [
                e["text"] for e in ctx.get("events", [])
            ]
            assert [t.text for t in state.active_context.tasks] == [
                t["text"] for t in ctx.get("tasks", [])
            ]
            assert [p.name for p in state.active_context.projects] == [
                p["name"] for p in ctx.get("projects", [])
            ]
            nodes = mem.trees.load().nodes
            assert {p: nodes[p].description for p in nodes} == dict(expected["tree"][agent])
            outcome = mem.store(f"written after the upgrade from v{version}", "upgrade")
            assert mem.get(outcome.id).tier == "warm"
            assert domain_problems(mem) == []
    db = Database(home / "tiermem.db")
    try:
        metrics = expected["metrics"]
        row = db.query_one(
            "SELECT retrievals, stores FROM metrics_daily WHERE agent_id = 'default' AND day = ?",
            (metrics["day"],),
        )
        assert row == (metrics["retrievals"], metrics["stores"])
        if "outbox" in expected:
            outbox = db.scalar("SELECT count(*) FROM outbox WHERE agent_id = 'default'")
            assert outbox >= expected["outbox"]
        if "forgotten" in expected:
            assert [r[0] for r in db.query("SELECT id FROM forgotten")] == expected["forgotten"]
        if "ingest_sources" in expected:
            sources = [r[0] for r in db.query("SELECT source FROM ingest_sources")]
            assert sources == expected["ingest_sources"]
        if "graph" in expected:  # kept; not marked for upload (no agent of the home syncs)
            graph = expected["graph"]
            assert [r[0] for r in db.query("SELECT id FROM episodes")] == graph["episodes"]
            assert [r[0] for r in db.query("SELECT id FROM entities")] == graph["entities"]
            assert db.scalar("SELECT count(*) FROM graph_dirty") == 0
        pinned = [m["id"] for m in expected["memories"] if m["pinned"]]
        assert [r[0] for r in db.query("SELECT id FROM memories WHERE pinned = 1")] == pinned
    finally:
        db.close()


@pytest.mark.parametrize("version", OLDER)
def test_failing_migration_keeps_the_previous_version(version: int, tmp_path: Path) -> None:
    home, _ = copy_home(version, tmp_path)
    db = Database(home / "tiermem.db")
    try:
        before_schema, before_counts = schema(db), counts(db)
        # The real next step, then a statement that fails: the whole step must roll back.
        broken = [
            *MIGRATIONS[:version],
            MIGRATIONS[version] + "\nINSERT INTO no_such_table_for_this_test VALUES (1);",
        ]
        with pytest.raises(StorageError):
            migrate(db, broken)
        assert schema_version(db) == version
        assert schema(db) == before_schema
        assert counts(db) == before_counts
        assert storage_problems(db) == []
        assert migrate(db) == len(MIGRATIONS)  # and the real upgrade still works afterwards
    finally:
        db.close()


SYNCED = "INSERT INTO sync_state (agent_id, status, url, device_id, epoch, secret_ref, \
secret_store, device_wrap, recovery_wrap, created_at) VALUES (?, 'ready', 'http://127.0.0.1:9', \
'00', 1, 'ref', 'file', x'00', x'00', 0)"


# Homes from version 13 (read counters) up to 15: from 16 on, changes are tracked only for
# agents that sync, so those homes hold no marks to drop.
@pytest.mark.parametrize("version", [v for v in OLDER if 13 <= v <= 15])
def test_upgrade_drops_upload_marks_only_of_agents_that_never_synced(
    version: int, tmp_path: Path
) -> None:
    """A home whose agent never set up sync loses its upload marks (they only cost space and
    time) but keeps its outbox; an agent that syncs keeps its marks and goes on being tracked."""
    home, _ = copy_home(version, tmp_path)
    db = Database(home / "tiermem.db")
    try:
        db.execute(SYNCED, ("phone",))
        marked = {str(r[0]) for r in db.query("SELECT agent_id FROM sync_dirty")}
        assert marked >= {"default", "phone"}
        outbox = db.query("SELECT * FROM outbox ORDER BY seq")
        migrate(db)
        assert {str(r[0]) for r in db.query("SELECT agent_id FROM sync_dirty")} == {"phone"}
        assert db.query("SELECT * FROM outbox ORDER BY seq") == outbox and outbox
    finally:
        db.close()
    with Memory(home, "default") as mem:
        mem.store("stored by an agent that does not sync", "upgrade")
        assert mem.db.scalar("SELECT count(*) FROM sync_dirty WHERE agent_id = 'default'") == 0
    with Memory(home, "phone") as mem:
        fid = mem.store("stored by an agent that syncs", "upgrade").id
        assert mem.db.scalar("SELECT id FROM sync_dirty ORDER BY seq DESC LIMIT 1") == fid
