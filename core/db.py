"""One typed layer over the database driver.

libSQL (`libsql_experimental`) is the default driver; stdlib `sqlite3` is the fallback where the
libSQL wheel is missing (phones under Termux) or when `TIERMEM_DRIVER=sqlite3`. Both speak the
same schema. Traps of libsql-experimental 0.0.55 this layer hides (pinned by tests):

- cursors are not iterable: rows are always taken with `fetchall()` / `fetchone()`;
- every error is a bare `ValueError`: driver errors are mapped to `StorageError` here;
- parameters must be a tuple (a list raises TypeError): they are converted here;
- Python ints outside the signed 32-bit range are bound as REAL: keep times as REAL seconds and
  never bind a 64-bit counter as an int (use TEXT).
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import quote

from tiermem.core.environment import environment
from tiermem.core.errors import StorageError

Row = tuple[Any, ...]
Params = Sequence[Any]
_MAX_PARAMS = 999
"""Parameters per statement: the limit of older SQLite builds (phones' stdlib sqlite3)."""


class _Cursor(Protocol):
    def fetchall(self) -> list[Row]: ...
    def fetchone(self) -> Row | None: ...


class _Connection(Protocol):
    def execute(self, sql: str, params: Params = ...) -> _Cursor: ...
    def executemany(self, sql: str, params: Iterable[Params]) -> _Cursor: ...
    def close(self) -> None: ...


def _driver_errors() -> tuple[type[BaseException], ...]:
    # libsql_experimental raises plain ValueError for SQL and I/O failures.
    return (sqlite3.Error, ValueError)


def available_driver() -> str:
    """'libsql' when the wheel imports (and is not disabled), else 'sqlite3'. A TIERMEM_DRIVER
    other than libsql or sqlite3 is a `ConfigError`."""
    wanted = environment().driver
    if wanted == "sqlite3":
        return "sqlite3"
    try:
        importlib.import_module("libsql_experimental")
    except ImportError:
        if wanted == "libsql":
            raise StorageError(
                "TIERMEM_DRIVER=libsql but libsql_experimental is not installed"
            ) from None
        import logging  # only a warning needs it: start-up stays fast

        logging.getLogger(__name__).debug(
            "libsql_experimental is not installed: using the sqlite3 driver"
        )
        return "sqlite3"
    return "libsql"


def _connect(path: Path, driver: str, read_only: bool) -> _Connection:
    # A read-only connection is a `file:…?mode=ro` URI; both drivers accept it.
    target = f"file:{quote(str(path.absolute()))}?mode=ro" if read_only else str(path)
    if driver == "libsql":
        libsql = importlib.import_module("libsql_experimental")
        return cast(_Connection, libsql.connect(target, isolation_level=None))
    return cast(
        _Connection,
        sqlite3.connect(target, isolation_level=None, check_same_thread=False, uri=read_only),
    )


CACHE_KIB = 32 * 1024
"""Page cache per connection, filled only as pages are read. SQLite's default 2 MiB makes a
search at 100,000 memories (about 40 MB) re-read the rows it ranks from the OS on every query;
32 MiB keeps them (`benchmarks`: retrieve at 100,000, about 0.5 ms less)."""


class Database:
    """A connection with explicit transactions (`BEGIN IMMEDIATE`), WAL and FULL sync.

    One `Database` may be shared by threads; a lock serialises use of the connection.
    `read_only` opens it for reading only (a home the user cannot write): writes then fail.
    """

    def __init__(self, path: Path, driver: str | None = None, *, read_only: bool = False) -> None:
        """Open `path`; a new file is created 0600 (it holds every memory in plaintext, and
        SQLite gives its -wal and -shm files the same mode)."""
        self.path = path
        self.read_only = read_only
        self.driver = driver or available_driver()
        self._lock = threading.RLock()
        self._depth = 0
        self.on_begin: Callable[[], None] | None = None
        """Runs first in every outermost write transaction (writes deferred by reads)."""
        self.on_rollback: Callable[[], None] | None = None
        """Runs after such a transaction rolled back."""
        if not read_only:
            _create_private(path)
        try:
            self._conn = _connect(path, self.driver, read_only)
            self._setup()
        except _driver_errors() as exc:
            raise StorageError(f"cannot open database {path}: {exc}") from None

    def _setup(self) -> None:
        self._conn.execute("PRAGMA busy_timeout = 10000").fetchall()
        self._conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}").fetchall()
        if self.read_only:  # a reader changes nothing, not even the journal mode
            self._conn.execute("PRAGMA query_only = ON").fetchall()
            return
        mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchall()
        if not mode or str(mode[0][0]).lower() != "wal":
            raise StorageError(f"cannot switch {self.path} to WAL mode")
        self._conn.execute("PRAGMA synchronous = FULL").fetchall()
        self._conn.execute("PRAGMA foreign_keys = ON").fetchall()

    @property
    def in_transaction(self) -> bool:
        """Whether a `transaction()` of this connection is open."""
        return self._depth > 0

    # -- reads and writes -------------------------------------------------------------------

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        with self._guard():
            return self._conn.execute(sql, tuple(params)).fetchall()

    def query_one(self, sql: str, params: Params = ()) -> Row | None:
        with self._guard():
            return self._conn.execute(sql, tuple(params)).fetchone()

    def scalar(self, sql: str, params: Params = ()) -> Any:
        row = self.query_one(sql, params)
        return None if row is None else row[0]

    def execute(self, sql: str, params: Params = ()) -> None:
        with self._guard():
            self._conn.execute(sql, tuple(params)).fetchall()

    def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        with self._guard():
            self._conn.executemany(sql, [tuple(r) for r in rows])

    def insert_values(self, head: str, marks: str, rows: Sequence[Params], tail: str = "") -> None:
        """`head VALUES marks, marks, … tail` for `rows`, a few dozen rows per statement. Into
        a table with triggers one statement per row costs about four times as much: each runs
        its triggers in a statement savepoint of its own (`benchmarks`: store batched)."""
        per_statement = max(1, _MAX_PARAMS // marks.count("?"))
        with self._guard():
            for lo in range(0, len(rows), per_statement):
                chunk = rows[lo : lo + per_statement]
                values = ", ".join([marks] * len(chunk))
                flat = tuple(value for row in chunk for value in row)
                self._conn.execute(f"{head} VALUES {values} {tail}", flat).fetchall()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """`BEGIN IMMEDIATE … COMMIT`, rolled back on any exception. Nested calls join the
        outer transaction, so a facade method can compose smaller atomic steps."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            # BEGIN and COMMIT sit inside the `try`: a ctrl-C landing between a statement and
            # the bookkeeping around it must not leave a transaction open behind depth 0.
            committed = False
            try:
                self.execute("BEGIN IMMEDIATE")
                self._depth = 1
                if self.on_begin is not None:
                    self.on_begin()
                yield
                self._depth = 0
                self.execute("COMMIT")
                committed = True
            except BaseException:
                self._depth = 0
                if not committed:
                    self._rollback()
                    if self.on_rollback is not None:
                        self.on_rollback()
                raise

    @contextmanager
    def relaxed_transaction(self) -> Iterator[None]:
        """A transaction whose commit does not wait for fsync (`synchronous = NORMAL`).

        For bookkeeping whose loss on power failure is harmless (access counts, metrics
        counters): WAL keeps the database consistent, only the last such commits may roll back.
        Everything a user or agent is told was stored uses `transaction()` (FULL).
        """
        with self._lock:
            if self._depth:
                with self.transaction():
                    yield
                return
            self.execute("PRAGMA synchronous = NORMAL")
            try:
                with self.transaction():
                    yield
            finally:
                self.execute("PRAGMA synchronous = FULL")

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK").fetchall()
        except _driver_errors():
            pass  # the failed statement may already have ended the transaction

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except _driver_errors():
                pass

    @contextmanager
    def _guard(self) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except _driver_errors() as exc:
                raise StorageError(f"database error: {exc}") from None


def _create_private(path: Path) -> None:
    """Create a missing database file readable by its owner only."""
    if str(path) == ":memory:" or path.exists():
        return
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StorageError(f"cannot create database {path}: {exc.strerror}") from None
