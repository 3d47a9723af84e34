"""A memory, defined once: `MemoryRow` declares its fields, types, defaults and checks; the
`memories` columns, the SQL, the stored form, the read view and the sync record body are all
derived from that one declaration.

Adding a field that syncs is one line in `MemoryRow` (with a default, in `ADDED_LATER` so
records and archives written before it still read), the migration adding its column, and the
group a sync merge keeps it in (`sync.kinds.memory_merge.GROUPS`; a test names a field without).
Core's store (`warm`) reads and writes through it; sync encodes, seals and applies the same
`MemoryRow`, and writes remote rows into the table only through `upsert`, `delete` and
`insert_staged`, so a value core would reject is refused on every path."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from tiermem.core.config import ScoringConfig
from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput
from tiermem.core.scoring import score
from tiermem.core.tokens import UNCOUNTED, counted

__all__ = [
    "ADDED_LATER",
    "COLUMNS",
    "NAMES",
    "TIERS",
    "MemoryRow",
    "Tier",
    "check_importance",
    "column_list",
    "counted_reads",
    "holds_memory",
    "insert_parts",
    "insert_sql",
    "insert_staged",
    "memory_id",
    "normalize_text",
    "upsert",
]

Tier = Literal["warm", "cold", "frozen"]
TIERS: tuple[Tier, ...] = ("warm", "cold", "frozen")

# Where the agent's memory lives: a home holding none of these rows for an agent is empty.
_AGENT_TABLES: Final = ("hot_state", "tree_nodes", "memories", "outbox")


def normalize_text(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def memory_id(agent_id: str, text: str) -> str:
    """The content id of a text: a new memory's id (it never changes afterwards)."""
    import hashlib  # only naming new items hashes: reads skip loading OpenSSL

    return hashlib.sha256(f"{agent_id}\0{normalize_text(text)}".encode()).hexdigest()[:16]


def check_importance(value: object) -> None:
    if not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"importance must be between 0 and 1 (got {value})")


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """One memory of one agent, as every layer sees it (metadata as tuples, not the stored
    newline form); checked on construction like core checks a new fact."""

    id: str
    text: str
    category: str
    importance: float
    created_at: float
    access_count: int
    last_access: float | None
    tier: Tier
    tier_changed_at: float
    urls: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    source: str = ""
    size_bytes: int = 0
    tokens: int = 0
    pinned: bool = False
    valid_from: float | None = None
    """When its fact became true, when the text names a date (else `created_at`)."""
    superseded_by: str = ""
    """The memory that replaced this one ('' when none)."""
    superseded_at: float | None = None
    """When its fact stopped being true (None while current)."""

    def __post_init__(self) -> None:
        check_importance(self.importance)
        if self.tier not in TIERS:
            raise InvalidInput(f"unknown tier {self.tier!r}")
        if self.access_count < 0:
            raise InvalidInput("access count cannot be negative")

    @classmethod
    def from_db(cls, row: Sequence[Any]) -> MemoryRow:
        """A row read with ``SELECT {column_list()}``, as stored (an uncounted token count
        stays `UNCOUNTED`: sync seals what is stored)."""
        return cls(*[read(value) for read, value in zip(_READERS, row, strict=True)])

    @classmethod
    def read(cls, row: Sequence[Any]) -> MemoryRow:
        """A row as front ends read it: a token count left uncounted is counted now."""
        memory = cls.from_db(row)
        if memory.tokens != UNCOUNTED:
            return memory
        return dataclasses.replace(memory, tokens=counted(memory.text, UNCOUNTED))

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> MemoryRow:
        """A row from its stored values by name (a forgotten archive entry): a field added
        after the entry was written takes its default."""
        return cls.from_db([data.get(n, STORED_DEFAULTS.get(n)) for n in NAMES])

    def stored(self) -> tuple[object, ...]:
        """Every column's stored value in `NAMES` order (metadata joined by newlines)."""
        return tuple(write(getattr(self, n)) for n, write in zip(NAMES, _WRITERS, strict=True))

    def columns(self) -> tuple[object, ...]:
        """The stored values from `text` on (`stored` without the id)."""
        return self.stored()[1:]

    @property
    def since(self) -> float:
        """When its fact became true."""
        return self.created_at if self.valid_from is None else self.valid_from

    def current_at(self, when: float) -> bool:
        """Whether its fact still held at `when` (not yet superseded or closed)."""
        return self.superseded_at is None or self.superseded_at > when

    def score(self, now: float, cfg: ScoringConfig) -> float:
        return score(self.importance, self.created_at, self.access_count, now, cfg)


FIELDS: Final = dataclasses.fields(MemoryRow)
NAMES: Final = tuple(f.name for f in FIELDS)
TYPES: Final[dict[str, str]] = {f.name: str(f.type) for f in FIELDS}
"""Each field's declared type, as written in `MemoryRow` (what the converters go by)."""
ADDED_LATER: Final[frozenset[str]] = frozenset({"valid_from", "superseded_by", "superseded_at"})
"""Fields newer than the first record format: a record or archive entry without one holds
the field's default (the other fields must all be present)."""
DEFAULTS: Final[dict[str, Any]] = {
    f.name: f.default for f in FIELDS if f.default is not dataclasses.MISSING
}


def _split(value: str) -> tuple[str, ...]:
    return tuple(v for v in value.split("\n") if v) if value else ()


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


_READ_BY_TYPE: Final[dict[str, Callable[[Any], Any]]] = {
    "str": str,
    "float": float,
    "int": int,
    "bool": bool,
    "Tier": str,
    "float | None": _optional_float,
    "tuple[str, ...]": _split,
}
_WRITE_BY_TYPE: Final[dict[str, Callable[[Any], object]]] = {
    "bool": int,
    "tuple[str, ...]": "\n".join,
}


def _as_is(value: Any) -> object:
    return value


_READERS: Final = tuple(_READ_BY_TYPE[TYPES[n]] for n in NAMES)
_WRITERS: Final[tuple[Callable[[Any], object], ...]] = tuple(
    _WRITE_BY_TYPE.get(TYPES[n], _as_is) for n in NAMES
)
STORED_DEFAULTS: Final[dict[str, object]] = {
    n: _WRITE_BY_TYPE.get(TYPES[n], _as_is)(v) for n, v in DEFAULTS.items()
}
COLUMNS: Final[tuple[tuple[str, str], ...]] = tuple((n, TYPES[n]) for n in NAMES)
"""The agent-owned columns of `memories` (besides `seq` and `agent_id`) with their types."""


def column_list(names: Sequence[str] = NAMES, alias: str = "") -> str:
    """``id, text, …`` (or ``m.id, m.text, …`` with an alias) for a SELECT."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in names)


def insert_parts(names: Sequence[str] = NAMES) -> tuple[str, str]:
    """The head of an INSERT into `memories` and one row's marks (`Database.insert_values`):
    the 64-bit `seq` is bound as text (driver trap), then the agent, then `names`."""
    marks = ", ".join("?" * (len(names) + 2))
    marks = "(CAST(? AS INTEGER)" + marks[1:] + ")"
    return f"INSERT INTO memories (seq, agent_id, {column_list(names)})", marks


def insert_sql(names: Sequence[str] = NAMES) -> str:
    """An INSERT of one row (`insert_parts`)."""
    head, marks = insert_parts(names)
    return f"{head} VALUES {marks}"


class AgentRows(Protocol):
    """An agent's slice of `memories` (`warm.MemoryStore`): its rows' `seq` range."""

    db: Database
    agent_id: str
    seq_low: int
    seq_high: int


_NEWEST_SEQ = (
    "SELECT coalesce(MAX(seq), CAST(?1 AS INTEGER)) FROM memories "
    "WHERE seq BETWEEN CAST(?1 AS INTEGER) AND CAST(?2 AS INTEGER)"
)
_LAST_SEQ = (
    f"SELECT max(({_NEWEST_SEQ}), "
    "coalesce((SELECT memory_seq FROM graph_progress WHERE agent_id = ?3), 0))"
)


def newest_seq(store: AgentRows) -> int:
    """The agent's newest row id (the floor of its range when it has no row)."""
    return int(store.db.scalar(_NEWEST_SEQ, (str(store.seq_low), str(store.seq_high))))


def last_seq(store: AgentRows) -> int:
    """The highest row id a new memory must go above: the agent's newest row's, or the
    knowledge graph's progress mark when newer rows were deleted since (reusing their ids
    would hide the next memories from graph indexing, which walks rows by id)."""
    return int(
        store.db.scalar(_LAST_SEQ, (str(store.seq_low), str(store.seq_high), store.agent_id))
    )


def next_seq(store: AgentRows) -> int:
    """The row id for the agent's next new memory."""
    return last_seq(store) + 1


def upsert(store: AgentRows, row: MemoryRow) -> None:
    """Write a row as another device holds it (inside the caller's transaction): update it in
    place, or insert it. The table's triggers keep full-text search current. The row's access
    count is its base: the reads counted here (`core.reinforce`) are added to it."""
    db, agent = store.db, store.agent_id
    count, last = counted_reads(db, agent, row.id)
    values = (
        *row.columns()[:4],
        row.access_count + count,
        _later(row.last_access, last),
        *row.columns()[6:],
    )
    _alias(db, agent, row.id, row.text)
    if db.scalar("SELECT 1 FROM memories WHERE agent_id = ? AND id = ?", (agent, row.id)):
        assignments = ", ".join(f"{name} = ?" for name in NAMES[1:])
        db.execute(
            f"UPDATE memories SET {assignments} WHERE agent_id = ? AND id = ?",
            (*values, agent, row.id),
        )
        return
    db.execute(insert_sql(), (str(next_seq(store)), agent, row.id, *values))


def insert_staged(store: AgentRows, staging: str) -> int:
    """Insert, in one statement, the rows of table `staging` (the same columns, plus
    `agent_id` and a `deleted` flag) that are not deleted and whose id is not in `memories`
    yet, in the staging table's order (inside the caller's transaction). Returns how many."""
    base = last_seq(store)
    store.db.execute(
        f"INSERT INTO memories (seq, agent_id, {column_list()}) "
        f"SELECT CAST(? AS INTEGER) + s.rowid, agent_id, {_staged_columns()} "
        f"FROM {staging} s WHERE agent_id = ? AND deleted = 0 "
        "AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.agent_id = s.agent_id "
        "AND m.id = s.id) ORDER BY s.rowid",
        (str(base), store.agent_id),
    )
    added = int(store.db.scalar("SELECT changes()"))
    # The staged access counts are bases: add the reads counted here, as `upsert` does.
    store.db.execute(
        "UPDATE memories SET access_count = access_count + (SELECT COALESCE(SUM(r.count), 0) "
        "FROM reinforcement r WHERE r.agent_id = memories.agent_id AND r.id = memories.id), "
        "last_access = (SELECT max(COALESCE(memories.last_access, 0), "
        "COALESCE(MAX(r.last_access), 0)) FROM reinforcement r "
        "WHERE r.agent_id = memories.agent_id AND r.id = memories.id) "
        "WHERE seq > CAST(? AS INTEGER) AND seq <= CAST(? AS INTEGER) AND EXISTS "
        "(SELECT 1 FROM reinforcement r WHERE r.agent_id = memories.agent_id "
        "AND r.id = memories.id)",
        (str(base), str(store.seq_high)),
    )
    for memory_id_, text in store.db.query(
        f"SELECT id, text FROM {staging} WHERE agent_id = ? AND deleted = 0", (store.agent_id,)
    ):
        _alias(store.db, store.agent_id, str(memory_id_), str(text))
    return added


def _staged_columns() -> str:
    """The staged columns for an INSERT … SELECT: a field added after a restore was staged
    (an upgrade mid-restore) takes its default."""
    return ", ".join(
        f"coalesce(s.{n}, {STORED_DEFAULTS[n]!r})"
        if n in ADDED_LATER and STORED_DEFAULTS[n] is not None
        else f"s.{n}"
        for n in NAMES
    )


def counted_reads(db: Database, agent_id: str, memory_id_: str) -> tuple[int, float | None]:
    """(reads counted on every device, newest read) of one memory (`core.reinforce`)."""
    row = db.query_one(
        "SELECT COALESCE(SUM(count), 0), MAX(last_access) FROM reinforcement "
        "WHERE agent_id = ? AND id = ?",
        (agent_id, memory_id_),
    )
    return (0, None) if row is None else (int(row[0]), None if row[1] is None else float(row[1]))


def _later(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _alias(db: Database, agent_id: str, memory_id_: str, text: str) -> None:
    """A row whose text is not its id's (an edited memory): its text's content id → it, so
    storing that text here reinforces it instead of adding a duplicate."""
    alias = memory_id(agent_id, text)
    if alias != memory_id_:
        db.execute(
            "INSERT INTO memory_aliases (agent_id, alias, id) VALUES (?, ?, ?) "
            "ON CONFLICT (agent_id, alias) DO UPDATE SET id = excluded.id",
            (agent_id, alias, memory_id_),
        )


def holds_memory(db: Database, agent_id: str) -> bool:
    """Whether the home holds any memory of the agent (critical state, tree, memories, or
    changes waiting in the outbox)."""
    return any(
        int(db.scalar(f"SELECT count(*) FROM {table} WHERE agent_id = ?", (agent_id,)))
        for table in _AGENT_TABLES
    )
