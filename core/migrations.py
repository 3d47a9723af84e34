"""Numbered, transactional schema migrations (`PRAGMA user_version` is the schema version).

A migration runs inside one transaction together with the version bump, so a failure leaves the
previous version in place. Append new steps; never edit a released one.
"""

from __future__ import annotations

import sqlite3

from tiermem.core.db import Database
from tiermem.core.errors import StorageError

MIGRATIONS: list[str] = [
    # 1: the memory model of seed 000.
    """
    CREATE TABLE memories (
        seq INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        id TEXT NOT NULL,
        text TEXT NOT NULL,
        category TEXT NOT NULL,
        importance REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
        created_at REAL NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        last_access REAL,
        tier TEXT NOT NULL CHECK (tier IN ('warm', 'cold', 'frozen')),
        tier_changed_at REAL NOT NULL,
        urls TEXT NOT NULL DEFAULT '',
        commands TEXT NOT NULL DEFAULT '',
        paths TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT '',
        size_bytes INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        UNIQUE (agent_id, id)
    );
    CREATE TABLE agents (
        agent_id TEXT PRIMARY KEY,
        slot INTEGER NOT NULL UNIQUE CHECK (slot BETWEEN 1 AND 1048575)
    );
    CREATE INDEX memories_tier ON memories (agent_id, tier, category);
    CREATE INDEX memories_created ON memories (agent_id, tier, created_at);
    CREATE VIRTUAL TABLE memories_fts USING fts5(
        text, category, urls, commands, paths,
        content = 'memories', content_rowid = 'seq',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text, category, urls, commands, paths)
        VALUES (new.seq, new.text, new.category, new.urls, new.commands, new.paths);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, category, urls, commands, paths)
        VALUES ('delete', old.seq, old.text, old.category, old.urls, old.commands, old.paths);
    END;
    CREATE TRIGGER memories_au AFTER UPDATE OF text, category, urls, commands, paths
    ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text, category, urls, commands, paths)
        VALUES ('delete', old.seq, old.text, old.category, old.urls, old.commands, old.paths);
        INSERT INTO memories_fts (rowid, text, category, urls, commands, paths)
        VALUES (new.seq, new.text, new.category, new.urls, new.commands, new.paths);
    END;
    CREATE TABLE hot_state (
        agent_id TEXT PRIMARY KEY,
        data TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE tree_nodes (
        agent_id TEXT NOT NULL,
        path TEXT NOT NULL,
        description TEXT NOT NULL,
        created_at REAL NOT NULL,
        last_activity REAL NOT NULL,
        PRIMARY KEY (agent_id, path)
    );
    CREATE TABLE metrics_daily (
        agent_id TEXT NOT NULL,
        day TEXT NOT NULL,
        retrievals INTEGER NOT NULL DEFAULT 0,
        evictions INTEGER NOT NULL DEFAULT 0,
        promotions INTEGER NOT NULL DEFAULT 0,
        stores INTEGER NOT NULL DEFAULT 0,
        context_tokens INTEGER NOT NULL DEFAULT 0,
        flat_tokens INTEGER NOT NULL DEFAULT 0,
        warm_bytes INTEGER NOT NULL DEFAULT 0,
        warm_count INTEGER NOT NULL DEFAULT 0,
        cold_count INTEGER NOT NULL DEFAULT 0,
        hot_bytes INTEGER NOT NULL DEFAULT 0,
        hot_tokens INTEGER NOT NULL DEFAULT 0,
        tree_nodes INTEGER NOT NULL DEFAULT 0,
        tree_bytes INTEGER NOT NULL DEFAULT 0,
        tree_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (agent_id, day)
    );
    """,
    # 2: the durable sync outbox: one row per change of critical state (hot + tree) to push.
    """
    CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        agent_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX outbox_agent ON outbox (agent_id, seq);
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def schema_version(db: Database) -> int:
    return int(db.scalar("PRAGMA user_version"))


def migrate(db: Database, migrations: list[str] | None = None) -> int:
    """Bring the database to the newest version; returns the version reached."""
    steps = MIGRATIONS if migrations is None else migrations
    current = schema_version(db)
    if current > len(steps):
        raise StorageError(
            f"database schema version {current} is newer than this tiermem ({len(steps)}); "
            "upgrade tiermem"
        )
    for version in range(current + 1, len(steps) + 1):
        with db.transaction():
            for statement in split_statements(steps[version - 1]):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version}")
    return schema_version(db)


def split_statements(script: str) -> list[str]:
    """Split a script into complete statements (trigger bodies kept whole).

    `executescript` cannot be used: stdlib sqlite3 commits any open transaction before it runs,
    which would make a migration non-atomic; and libsql's `execute` silently ignores all but
    the first statement of a string.
    """
    statements: list[str] = []
    start = 0
    for end, char in enumerate(script):
        if char == ";" and sqlite3.complete_statement(script[start : end + 1]):
            statement = script[start : end + 1].strip()
            if statement != ";":
                statements.append(statement)
            start = end + 1
    rest = script[start:].strip()
    if rest:
        raise ValueError(f"incomplete SQL statement in migration: {rest[:60]}")
    return statements
