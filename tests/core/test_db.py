"""The database layer: both drivers, transactions, migrations, and the libSQL driver traps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem.core.db import Database
from tiermem.core.errors import StorageError
from tiermem.core.migrations import (
    MIGRATIONS,
    SCHEMA_VERSION,
    migrate,
    schema_version,
    split_statements,
)


@pytest.fixture
def db(tmp_path: Path, driver: str):
    database = Database(tmp_path / "t.db", driver)
    yield database
    database.close()


def test_wal_and_full_sync(db: Database) -> None:
    assert db.scalar("PRAGMA journal_mode") == "wal"
    assert db.scalar("PRAGMA synchronous") == 2  # FULL


def test_fts5_available(db: Database) -> None:
    db.execute("CREATE VIRTUAL TABLE f USING fts5(t, tokenize='porter unicode61')")
    db.execute("INSERT INTO f VALUES (?)", ("running fast",))
    assert db.query("SELECT rowid FROM f WHERE f MATCH ?", ('"run"',)) == [(1,)]


def test_transaction_rolls_back_on_error(db: Database) -> None:
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("boom")
    assert db.scalar("SELECT COUNT(*) FROM t") == 0


def test_nested_transactions_join_the_outer_one(db: Database) -> None:
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    with pytest.raises(RuntimeError), db.transaction():
        with db.transaction():
            db.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("outer fails after inner finished")
    assert db.scalar("SELECT COUNT(*) FROM t") == 0


@pytest.mark.parametrize("statement", ["BEGIN IMMEDIATE", "COMMIT"])
def test_a_ctrl_c_after_begin_or_before_commit_leaves_no_transaction_open(
    db: Database, monkeypatch: pytest.MonkeyPatch, statement: str
) -> None:
    db.execute("CREATE TABLE t (a INTEGER PRIMARY KEY)")
    execute = db.execute

    def interrupted(sql: str, params: object = ()) -> object:
        """ctrl-C just after BEGIN ran, or just before COMMIT would have."""
        if sql == "COMMIT" == statement:
            raise KeyboardInterrupt
        result = execute(sql, params)  # type: ignore[arg-type]
        if sql == "BEGIN IMMEDIATE" == statement:
            raise KeyboardInterrupt
        return result

    monkeypatch.setattr(db, "execute", interrupted)
    with pytest.raises(KeyboardInterrupt), db.transaction():
        execute("INSERT INTO t VALUES (1)")
    monkeypatch.undo()
    with db.transaction():  # the connection is usable: no transaction was left open
        db.execute("INSERT INTO t VALUES (2)")
    assert [r[0] for r in db.query("SELECT a FROM t")] == [2]  # the interrupted one rolled back


def test_driver_errors_become_storage_errors(db: Database) -> None:
    with pytest.raises(StorageError, match="no such table"):
        db.query("SELECT * FROM nowhere")


def test_list_parameters_are_accepted(db: Database) -> None:
    # libsql_experimental itself rejects a list (TypeError); the layer converts to a tuple.
    assert db.query("SELECT ? + ?", [1, 2]) == [(3,)]


def test_insert_values_stores_every_row_across_statements_and_applies_the_tail(
    db: Database,
) -> None:
    db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, a TEXT, b REAL, c BLOB)")
    rows = [(k, f"text {k}", k / 7, bytes([k % 256])) for k in range(1000)]  # 250 per statement
    db.insert_values("INSERT INTO t (k, a, b, c)", "(?, ?, ?, ?)", rows)
    assert db.query("SELECT k, a, b, c FROM t ORDER BY k") == rows
    again = [(k, "new", 0.0, b"") for k in (0, 999)]
    db.insert_values("INSERT INTO t (k, a, b, c)", "(?, ?, ?, ?)", again, "ON CONFLICT DO NOTHING")
    assert db.scalar("SELECT COUNT(*) FROM t WHERE a = 'new'") == 0


def test_times_as_real_round_trip_exactly(db: Database) -> None:
    db.execute("CREATE TABLE t (ts REAL)")
    ts = 1_767_225_600.123456
    db.execute("INSERT INTO t VALUES (?)", (ts,))
    assert db.scalar("SELECT ts FROM t") == ts


def test_migrations_reach_latest_version_once(db: Database) -> None:
    assert migrate(db) == SCHEMA_VERSION == len(MIGRATIONS)
    assert migrate(db) == SCHEMA_VERSION  # idempotent


def test_failing_migration_leaves_previous_version(db: Database) -> None:
    steps = ["CREATE TABLE a (x);", "CREATE TABLE b (x); CREATE TABLE broken (;"]
    with pytest.raises(StorageError):
        migrate(db, steps)
    assert schema_version(db) == 1
    assert db.query("SELECT name FROM sqlite_master WHERE name = 'b'") == []


def test_newer_schema_is_refused(db: Database) -> None:
    db.execute("PRAGMA user_version = 999")
    with pytest.raises(StorageError, match="newer"):
        migrate(db)


def test_split_statements_keeps_trigger_bodies_whole() -> None:
    statements = split_statements(MIGRATIONS[0])
    triggers = [s for s in statements if s.startswith("CREATE TRIGGER")]
    assert len(triggers) == 3
    assert all(s.rstrip().endswith("END;") for s in triggers)


def test_corrupt_database_file_is_a_clear_error(tmp_path: Path, driver: str) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StorageError):
        database = Database(path, driver)
        try:
            migrate(database)
        finally:
            database.close()


class TestLibsqlTraps:
    """Pin the raw behaviour of libsql_experimental 0.0.55 that db.py works around."""

    @pytest.fixture
    def raw(self, tmp_path: Path):
        libsql = pytest.importorskip("libsql_experimental")
        conn = libsql.connect(str(tmp_path / "raw.db"), isolation_level=None)
        yield conn
        conn.close()

    def test_cursor_is_not_iterable(self, raw) -> None:
        cursor = raw.execute("SELECT 1")
        with pytest.raises(TypeError):
            iter(cursor)
        assert cursor.fetchall() == [(1,)]

    def test_big_ints_are_bound_as_real(self, raw) -> None:
        raw.execute("CREATE TABLE t (i INTEGER, r)")
        raw.execute("INSERT INTO t VALUES (?, ?)", (2**62 + 1, 2**40))
        i, r, type_r = raw.execute("SELECT i, r, typeof(r) FROM t").fetchone()
        assert type_r == "real" and r == float(2**40)
        assert i == 2**62 != 2**62 + 1  # precision lost beyond 2^53

    def test_big_ints_survive_as_text_cast(self, raw) -> None:
        raw.execute("CREATE TABLE t (i INTEGER)")
        raw.execute("INSERT INTO t VALUES (CAST(? AS INTEGER))", (str(2**62 + 1),))
        assert raw.execute("SELECT i FROM t").fetchone()[0] == 2**62 + 1

    def test_errors_are_plain_value_errors(self, raw) -> None:
        with pytest.raises(ValueError, match="no such table"):
            raw.execute("SELECT * FROM nowhere")

    def test_list_parameters_raise_type_error(self, raw) -> None:
        with pytest.raises(TypeError):
            raw.execute("SELECT ?", [1])

    def test_only_first_statement_of_a_string_runs(self, raw) -> None:
        raw.execute("CREATE TABLE a (x); CREATE TABLE b (x)")
        names = raw.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
        assert names == [("a",)]


def test_relaxed_transaction_restores_full_sync(db: Database) -> None:
    db.execute("CREATE TABLE t (a)")
    with db.relaxed_transaction():
        assert db.scalar("PRAGMA synchronous") == 1  # NORMAL inside
        db.execute("INSERT INTO t VALUES (1)")
    assert db.scalar("PRAGMA synchronous") == 2
    with pytest.raises(RuntimeError), db.relaxed_transaction():
        db.execute("INSERT INTO t VALUES (2)")
        raise RuntimeError("rolled back")
    assert db.scalar("PRAGMA synchronous") == 2
    assert db.query("SELECT a FROM t") == [(1,)]
