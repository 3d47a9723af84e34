"""Build the committed upgrade fixtures: one memory home per schema version below the newest.

    .venv/bin/python tests/reliability/make_homes.py

writes `tests/fixtures/homes/v<N>/` for N = 1 … len(MIGRATIONS) - 1: the database at schema
version N (`MIGRATIONS[:N]` applied, shipped libSQL driver, rollback journal so it is one file)
with representative rows inserted with plain SQL for every table that exists at that version,
and `expected.json`, what `tests/reliability/test_upgrade.py` checks after migrating a copy to
the newest version. Rerun it after appending a migration (existing homes are rebuilt the same
way: released migrations never change), and commit the new folder.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from tiermem.core.db import Database
from tiermem.core.migrations import MIGRATIONS, migrate
from tiermem.core.warm import SLOT_BITS, memory_id

HOMES = Path(__file__).resolve().parents[1] / "fixtures" / "homes"
T0 = 1_767_225_600.0  # 2026-01-01 00:00 UTC
AGENTS = {"default": 1, "phone": 2}
MEMORIES: list[dict[str, Any]] = [
    {
        "agent": "default",
        "text": "The BSC testnet RPC is https://bsc-testnet.example.org/rpc",
        "category": "projects/evoclaw/bsc",
        "tier": "warm",
        "importance": 0.8,
        "access": 3,
        "urls": "https://bsc-testnet.example.org/rpc",
    },
    {
        "agent": "default",
        "text": "Owner prefers oolong tea in the afternoon",
        "category": "preferences",
        "tier": "warm",
        "importance": 0.6,
        "access": 0,
        "urls": "",
    },
    {
        "agent": "default",
        "text": "Old hackathon deadline was moved to March",
        "category": "events/hackathon",
        "tier": "cold",
        "importance": 0.3,
        "access": 1,
        "urls": "",
    },
    {
        "agent": "default",
        "text": "Unused snippet about zebra migrations",
        "category": "misc",
        "tier": "frozen",
        "importance": 0.1,
        "access": 0,
        "urls": "",
    },
    {
        "agent": "phone",
        "text": "Phone agent remembers the kumquat certificate renewal",
        "category": "tasks",
        "tier": "warm",
        "importance": 0.7,
        "access": 2,
        "urls": "",
    },
]
HOT = {
    "default": {
        "identity": {"agent_name": "Claw", "role": "builder"},
        "owner_profile": {"tea": "oolong"},
        "active_context": {
            "projects": [
                {
                    "id": "p1",
                    "name": "EvoClaw",
                    "description": "agent framework",
                    "status": "active",
                    "updated_at": T0,
                }
            ],
            "events": [{"id": "e1", "text": "Shipped the upgrade fixtures", "timestamp": T0}],
            "tasks": [
                {
                    "id": "t1",
                    "text": "renew the kumquat certificate",
                    "status": "pending",
                    "timestamp": T0,
                }
            ],
        },
        "critical_lessons": [
            {
                "id": "l1",
                "text": "Always test on the zebra testnet first",
                "category": "blockchain",
                "importance": 0.9,
                "timestamp": T0,
                "source_id": "",
            }
        ],
        "updated_at": T0,
    },
    "phone": {"identity": {"agent_name": "Pocket"}, "updated_at": T0},
}
TREE = {
    "default": [
        ("projects", "Projects"),
        ("projects/evoclaw", "EvoClaw agent framework"),
        ("projects/evoclaw/bsc", "BSC integration"),
        ("preferences", "Owner preferences"),
    ],
    "phone": [("tasks", "Phone tasks")],
}
FORGOTTEN = {"agent": "default", "text": "A forgotten fact about pangolins"}


def tables(db: Database) -> set[str]:
    return {r[0] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(db: Database, table: str) -> set[str]:
    return {r[1] for r in db.query(f"PRAGMA table_info({table})")}


def fill(db: Database) -> dict[str, Any]:
    """Insert the representative rows that this schema version can hold; return what to expect."""
    have = tables(db)
    expected: dict[str, Any] = {"memories": [], "hot": HOT, "tree": TREE}
    with db.transaction():
        for agent, slot in AGENTS.items():
            db.execute("INSERT INTO agents (agent_id, slot) VALUES (?, ?)", (agent, slot))
        counters = dict.fromkeys(AGENTS, 0)
        pinned = "pinned" in columns(db, "memories")
        for n, m in enumerate(MEMORIES):
            counters[m["agent"]] += 1
            seq = (AGENTS[m["agent"]] << SLOT_BITS) | counters[m["agent"]]
            mid = memory_id(m["agent"], m["text"])
            db.execute(
                "INSERT INTO memories (seq, agent_id, id, text, category, importance, created_at, "
                "access_count, last_access, tier, tier_changed_at, urls, commands, paths, source, "
                "size_bytes, tokens) VALUES (CAST(? AS INTEGER),?,?,?,?,?,?,0,NULL,?,?,?,'','',"
                "'fixture',?,?)",
                (
                    str(seq),
                    m["agent"],
                    mid,
                    m["text"],
                    m["category"],
                    m["importance"],
                    T0 - 86_400 * (n + 1),
                    m["tier"],
                    T0,
                    m["urls"],
                    len(m["text"].encode()),
                    len(m["text"].split()),
                ),
            )
            for _ in range(m["access"]):  # one update per access: the v3 trigger logs each
                db.execute(
                    "UPDATE memories SET access_count = access_count + 1, last_access = ? "
                    "WHERE agent_id = ? AND id = ?",
                    (T0, m["agent"], mid),
                )
            if pinned and n == 0:
                db.execute("UPDATE memories SET pinned = 1 WHERE id = ?", (mid,))
            expected["memories"].append(
                {
                    "agent": m["agent"],
                    "id": mid,
                    "text": m["text"],
                    "tier": m["tier"],
                    "category": m["category"],
                    "access_count": m["access"],
                    "pinned": pinned and n == 0,
                    "urls": [m["urls"]] if m["urls"] else [],
                }
            )
        for agent, state in HOT.items():
            db.execute(
                "INSERT INTO hot_state (agent_id, data, updated_at) VALUES (?, ?, ?)",
                (agent, json.dumps(state), T0),
            )
        for agent, nodes in TREE.items():
            db.executemany(
                "INSERT INTO tree_nodes (agent_id, path, description, created_at, last_activity) "
                "VALUES (?, ?, ?, ?, ?)",
                [(agent, path, desc, T0, T0) for path, desc in nodes],
            )
        db.execute(
            "INSERT INTO metrics_daily (agent_id, day, retrievals, stores) VALUES (?, ?, ?, ?)",
            ("default", "2026-01-01", 7, 4),
        )
        expected["metrics"] = {"day": "2026-01-01", "retrievals": 7, "stores": 4}
        if "outbox" in have:
            db.execute(
                "INSERT INTO outbox (agent_id, kind, reason, created_at) VALUES (?, ?, ?, ?)",
                ("default", "critical", "hot", T0),
            )
            expected["outbox"] = 1
        if "forgotten" in have:
            fid = memory_id(FORGOTTEN["agent"], FORGOTTEN["text"])
            data = {
                "id": fid,
                "text": FORGOTTEN["text"],
                "category": "animals",
                "importance": 0.4,
                "created_at": T0,
                "access_count": 0,
                "last_access": None,
                "tier": "warm",
                "tier_changed_at": T0,
                "urls": "",
                "commands": "",
                "paths": "",
                "source": "fixture",
                "size_bytes": 33,
                "tokens": 6,
                "seq": str((1 << SLOT_BITS) | 99),
                "pinned": 0,
                "access_log": [],
            }
            db.execute(
                "INSERT INTO forgotten (agent_id, id, data, forgotten_at) VALUES (?, ?, ?, ?)",
                (FORGOTTEN["agent"], fid, json.dumps(data), T0),
            )
            expected["forgotten"] = [fid]
        if "ingest_sources" in have:
            first = memory_id("default", MEMORIES[1]["text"])
            db.execute(
                "INSERT INTO ingest_sources (agent_id, source, digest, ingested_at) "
                "VALUES (?, ?, ?, ?)",
                ("default", "daily/2026-01-01.md", "ab" * 32, T0),
            )
            db.execute(
                "INSERT INTO ingest_items (agent_id, source, item, memory_id, created) "
                "VALUES (?, ?, ?, ?, 1)",
                ("default", "daily/2026-01-01.md", "cd" * 12, first),
            )
            expected["ingest_sources"] = ["daily/2026-01-01.md"]
        if "episodes" in have:
            expected["graph"] = _fill_graph(db)
    return expected


def _fill_graph(db: Database) -> dict[str, list[str]]:
    """An episode and an entity with a name, a relation and a mention."""
    db.execute(
        "INSERT INTO episodes (agent_id, id, source, summary, abstract, topics, participants, "
        "fact_ids, started_at, ended_at, created_at, expires_at) "
        "VALUES ('default', 'ep-fixture0001', 'session:fixture', 'Tea talk.', 'Tea talk.', "
        "'tea', 'user', '', ?, ?, ?, ?)",
        (T0, T0, T0, T0 + 90 * 86_400),
    )
    db.execute(
        "INSERT INTO entities (agent_id, id, name, kind, created_at, updated_at) "
        "VALUES ('default', 'en-fixture01', 'Oolong', 'other', ?, ?)",
        (T0, T0),
    )
    db.execute(
        "INSERT INTO entity_names (agent_id, key, entity_id, name) "
        "VALUES ('default', 'oolong', 'en-fixture01', 'Oolong')"
    )
    db.execute(
        "INSERT INTO mentions (agent_id, entity_id, kind, ref) "
        "VALUES ('default', 'en-fixture01', 'episode', 'ep-fixture0001')"
    )
    return {"episodes": ["ep-fixture0001"], "entities": ["en-fixture01"]}


def build(version: int, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    db = Database(target / "tiermem.db")
    try:
        reached = migrate(db, MIGRATIONS[:version])
        assert reached == version, (reached, version)
        expected = fill(db) | {"schema_version": version}
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.query("PRAGMA journal_mode = DELETE")
        db.execute("VACUUM")
    finally:
        db.close()
    (target / "expected.json").write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    for version in range(1, len(MIGRATIONS)):
        target = HOMES / f"v{version}"
        build(version, target)
        print(f"{target}: schema version {version}")
    for stale in sorted(HOMES.glob("v*")):
        if not stale.name[1:].isdigit() or int(stale.name[1:]) >= len(MIGRATIONS):
            print(f"{stale}: no older than the newest schema; removed", file=sys.stderr)
            shutil.rmtree(stale)


if __name__ == "__main__":
    main()
