"""Warm and cold memories: one table, one row per fact, its tier a column.

A new fact's id is content-addressed (hash of agent and normalized text), so storing the same
fact again — a replayed conversation, a re-import — reinforces the existing row instead of adding
one. The id is given once: an edit keeps it (tags, expiry, session counts and links stay with
the memory) and records the new text's content id as an alias of it (`memory_aliases`), so
storing the pre-edit text (the id itself) or the edited text again still finds the memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from tiermem.core import reinforce
from tiermem.core.config import DedupConfig
from tiermem.core.db import Database, Row
from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.rows import (
    NAMES,
    STORED_DEFAULTS,
    MemoryRow,
    check_importance,
    column_list,
    insert_parts,
    newest_seq,
    next_seq,
)
from tiermem.core.rows import TIERS as TIERS
from tiermem.core.rows import Tier as Tier
from tiermem.core.rows import memory_id as memory_id
from tiermem.core.rows import normalize_text as normalize_text
from tiermem.core.tokens import UNCOUNTED, count_tokens, count_tokens_many, counted

if TYPE_CHECKING:
    from tiermem.core.dedup import NearIndex

MAX_TEXT_BYTES = 64 * 1024
MAX_METADATA_ITEMS = 50

COLUMNS = column_list()
FILL_WINDOW = 1000
"""How many of an agent's newest memories a write looks through for counts to store."""
INSERT_HEAD, INSERT_MARKS = insert_parts()
PROBE_BATCH = 32
"""Up to this many facts, a write without a kept near-duplicate index looks up candidates in
the full-text index instead of loading the whole window (`MemoryStore._near_index`)."""


SLOT_BITS = 32


def register_agent(db: Database, agent_id: str) -> int:
    """The agent's slot: its memories' row ids are `slot << 32 | n`.

    Each agent owning one contiguous rowid range is what scopes full-text search: FTS5 walks
    only the rows between the range bounds, so one agent's query costs what it would in a home
    of its own.
    """
    slot = db.scalar("SELECT slot FROM agents WHERE agent_id = ?", (agent_id,))
    if slot is None:
        with db.transaction():
            slot = db.scalar("SELECT slot FROM agents WHERE agent_id = ?", (agent_id,))
            if slot is None:
                slot = int(db.scalar("SELECT COALESCE(MAX(slot), 0) + 1 FROM agents"))
                db.execute("INSERT INTO agents (agent_id, slot) VALUES (?, ?)", (agent_id, slot))
    return int(slot)


def seq_range(slot: int) -> tuple[int, int]:
    low = slot << SLOT_BITS
    return low, low + (1 << SLOT_BITS) - 1


@dataclass(frozen=True)
class NewFact:
    """A fact to store, validated on construction."""

    text: str
    category: str
    importance: float = 0.5
    urls: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    source: str = ""
    created_at: float | None = None
    access_count: int = 0

    def __post_init__(self) -> None:
        text = " ".join(str(self.text).split())
        if not text:
            raise InvalidInput("text is empty")
        if len(text.encode()) > MAX_TEXT_BYTES:
            raise InvalidInput(f"text is longer than {MAX_TEXT_BYTES // 1024} KB: distill it first")
        if "\x00" in text:
            raise InvalidInput("text contains a NUL character")
        check_importance(self.importance)
        if self.access_count < 0:
            raise InvalidInput("access count cannot be negative")
        object.__setattr__(self, "text", text)
        for name in ("urls", "commands", "paths"):
            object.__setattr__(self, name, clean_metadata(getattr(self, name), name))


def clean_metadata(values: Iterable[str], what: str, cap: bool = False) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        item = " ".join(str(value).split())
        if item and item not in out:
            out.append(item)
    if cap:
        del out[MAX_METADATA_ITEMS:]
    if len(out) > MAX_METADATA_ITEMS:
        raise InvalidInput(f"more than {MAX_METADATA_ITEMS} {what}")
    return tuple(out)


def _join(values: Sequence[str]) -> str:
    return "\n".join(values)


def _split(value: str) -> tuple[str, ...]:
    if not value:  # most memories have no URLs, commands or paths
        return ()
    return tuple(v for v in value.split("\n") if v)


@dataclass
class StoreOutcome:
    """What storing one fact did: a new memory, or a known one reinforced."""

    id: str
    created: bool
    category: str
    tokens: int
    merged_into: str | None = None
    similarity: float | None = None
    """1.0 for an exact duplicate, the text similarity for a near-duplicate."""


class MemoryStore:
    """Warm/cold/frozen rows of one agent."""

    def __init__(self, db: Database, agent_id: str) -> None:
        self.db = db
        self.agent_id = agent_id
        self.slot = register_agent(db, agent_id)
        self.seq_low, self.seq_high = seq_range(self.slot)
        self._near: NearIndex | None = None
        self._near_mark: tuple[int, float] | None = None

    def put(
        self,
        facts: Sequence[tuple[NewFact, str]],
        now: float,
        dedup: DedupConfig | None = None,
        *,
        count: bool = True,
    ) -> list[StoreOutcome]:
        """Insert new facts (each with its normalized category) or reinforce existing ones.

        Must run inside a transaction. A fact already stored — the same normalized text, or with
        `dedup.near` a near-duplicate among the newest `dedup.window` memories — gains one
        access, the higher of the two importances and the union of the metadata; its text, tier
        and age do not change. `count=False` stores the token counts `UNCOUNTED` (`core.tokens`).
        """
        ids = self.resolve([memory_id(self.agent_id, f.text) for f, _ in facts])
        existing = {r[0]: r[1] for r in self._categories(ids)}
        seen_before = reinforce.totals_many(self.db, self.agent_id, ids)
        texts = [f.text for f, _ in facts]
        tokens = count_tokens_many(texts) if count else [UNCOUNTED] * len(texts)
        near = self._near_index(dedup, texts) if dedup is not None and dedup.near else None
        outcomes: list[StoreOutcome] = []
        rows: list[tuple[object, ...]] = []  # inserted with one executemany
        seq = next_seq(self)
        for (fact, category), fid, n_tokens in zip(facts, ids, tokens, strict=True):
            match = self._duplicate(fid, fact, existing, near, rows)
            if match is not None:
                target, target_category, ratio = match
                self._flush(rows)  # the duplicate may be a row of this batch
                self._reinforce_on_store(target, fact, now)
                outcomes.append(
                    StoreOutcome(
                        target,
                        False,
                        target_category,
                        n_tokens,
                        merged_into=target,
                        similarity=round(ratio, 4),
                    )
                )
                continue
            seen = seen_before.get(fid, (0, None))
            rows.append(_insert_row(seq, self.agent_id, fid, fact, category, now, n_tokens, seen))
            seq += 1
            existing[fid] = category
            if near is not None:
                near.add(fid, fact.text)
            outcomes.append(StoreOutcome(fid, True, category, n_tokens))
        self._flush(rows)
        return outcomes

    def _duplicate(
        self,
        fid: str,
        fact: NewFact,
        existing: dict[str, str],
        near: NearIndex | None,
        pending: list[tuple[object, ...]],
    ) -> tuple[str, str, float] | None:
        """(id, category, similarity) of the memory `fact` duplicates: the same content id
        (1.0) or, with `near`, a near-duplicate. Only a near candidate costs a query."""
        if fid in existing:
            return fid, existing[fid], 1.0
        candidates = near.find(fact.text) if near is not None else []
        if not candidates:
            return None
        assert near is not None
        self._flush(pending)
        return self._near_match(near, candidates)

    def _flush(self, rows: list[tuple[object, ...]]) -> None:
        """Insert the pending rows and forget them."""
        self.db.insert_values(INSERT_HEAD, INSERT_MARKS, rows)
        rows.clear()

    def _near_index(self, cfg: DedupConfig, texts: list[str]) -> NearIndex:
        """The newest `cfg.window` memories, indexed for near-duplicate lookups. Kept between
        writes of this connection; rebuilt when another connection committed (`data_version`)
        (the oldest entries leave as new ones come: it holds at most the window). Without a
        kept one, a write of a few facts indexes only the stored texts sharing half of their
        words (`dedup.candidates_index`) and keeps nothing."""
        version = float(self.db.scalar("PRAGMA data_version"))
        mark = (cfg.window, version)
        index = self._near
        if index is not None and self._near_mark == mark and index.threshold == cfg.similarity:
            return index
        from tiermem.core import dedup  # only a store looks for near-duplicates: reads skip it

        if len(texts) <= PROBE_BATCH:
            agent_rows = (self.seq_low, self.seq_high)
            found = dedup.candidates_index(self.db, agent_rows, cfg.window, texts, cfg.similarity)
            if found is not None:
                return found
        index = dedup.NearIndex(cfg.similarity, capacity=cfg.window)
        rows = self.db.query(
            "SELECT id, text FROM memories WHERE seq BETWEEN CAST(? AS INTEGER) "
            "AND CAST(? AS INTEGER) AND +agent_id = ? ORDER BY seq DESC LIMIT ?",
            (str(self.seq_low), str(self.seq_high), self.agent_id, cfg.window),
        )
        for row in reversed(rows):
            index.add(row[0], row[1])
        self._near, self._near_mark = index, mark
        return index

    def _near_match(
        self, index: NearIndex, candidates: list[tuple[str, float]]
    ) -> tuple[str, str, float] | None:
        """(id, category, similarity) of the first stored near-duplicate among `candidates`
        (`index.find`). A candidate is checked against the database first: an index entry
        whose row is gone or whose text changed is dropped, never merged into."""
        from tiermem.core import dedup  # only a store looks for near-duplicates: reads skip it

        for candidate, ratio in candidates:
            row = self.db.query_one(
                "SELECT text, category FROM memories WHERE agent_id = ? AND id = ?",
                (self.agent_id, candidate),
            )
            if row is None or dedup.near_key(row[0]) != index.key_of(candidate):
                index.remove(candidate)
                continue
            return candidate, row[1], ratio
        return None

    def _reinforce_on_store(self, fid: str, fact: NewFact, now: float) -> None:
        old = self.get_many([fid])
        if not old:
            return
        record = old[0]
        # The union keeps what the memory had first; beyond 50 of a kind the newest are dropped.
        urls = clean_metadata((*record.urls, *fact.urls), "urls", cap=True)
        commands = clean_metadata((*record.commands, *fact.commands), "commands", cap=True)
        paths = clean_metadata((*record.paths, *fact.paths), "paths", cap=True)
        self.db.execute(
            "UPDATE memories SET importance = MAX(importance, ?), urls = ?, commands = ?, "
            "paths = ? WHERE agent_id = ? AND id = ?",
            (
                float(fact.importance),
                _join(urls),
                _join(commands),
                _join(paths),
                self.agent_id,
                fid,
            ),
        )
        reinforce.add_local(self, [(fid, 1, [now])])

    def get(self, memory_id_: str) -> MemoryRow:
        found = self.get_many([memory_id_])
        if not found:
            raise NotFound(f"no memory {memory_id_!r}")
        return found[0]

    def get_many(self, ids: Sequence[str]) -> list[MemoryRow]:
        out: list[MemoryRow] = []
        for chunk in _chunks(list(dict.fromkeys(ids)), 500):
            marks = ",".join("?" * len(chunk))
            rows = self.db.query(
                f"SELECT {COLUMNS} FROM memories WHERE agent_id = ? AND id IN ({marks})",
                (self.agent_id, *chunk),
            )
            out += [MemoryRow.read(r) for r in rows]
        return out

    def _rows_by_seq(self, columns: str, seqs: Sequence[int]) -> list[Row]:
        if not seqs:
            return []
        marks = ",".join(["CAST(? AS INTEGER)"] * len(seqs))  # 64-bit row ids go as text
        return self.db.query(
            # `+agent_id` keeps the planner on rowid lookups instead of scanning the agent index.
            f"SELECT {columns} FROM memories WHERE +agent_id = ? AND seq IN ({marks})",
            (self.agent_id, *(str(s) for s in seqs)),
        )

    def in_tier(self, tier: Tier) -> list[MemoryRow]:
        """Every row of one tier. Only for warm (bounded by its size limit) or for chunks of
        cold via `iter_tier`."""
        rows = self.db.query(
            f"SELECT {COLUMNS} FROM memories WHERE agent_id = ? AND tier = ? ORDER BY seq",
            (self.agent_id, tier),
        )
        return [MemoryRow.read(r) for r in rows]

    def after(self, last: int) -> tuple[str, tuple[str, str, str]]:
        """The condition (and its parameters) for this agent's rows with `seq > last`: a walk
        of the rowid range. On `agent_id` a tier index is scanned and sorted for every chunk,
        which grows with the square of the archive."""
        low = str(max(last + 1, self.seq_low))
        return (
            "seq BETWEEN CAST(? AS INTEGER) AND CAST(? AS INTEGER) AND +agent_id = ?",
            (low, str(self.seq_high), self.agent_id),
        )

    def iter_tier(self, tier: Tier, chunk: int = 2000) -> Iterator[list[MemoryRow]]:
        """Rows of a tier in chunks by seq, so the archive is never loaded whole."""
        for rows in self._walk("+tier = ?", (tier,), chunk):
            yield [MemoryRow.read(r[1:]) for r in rows]

    def iter_all(self, chunk: int = 2000) -> Iterator[list[MemoryRow]]:
        for rows in self._walk("1", (), chunk):
            yield [MemoryRow.read(r[1:]) for r in rows]

    def _walk(self, where: str, params: tuple[object, ...], chunk: int) -> Iterator[list[Row]]:
        """The agent's rows matching `where`, `chunk` at a time in seq order (`after`)."""
        last = 0
        while True:
            rows_after, after = self.after(last)
            rows = self.db.query(
                f"SELECT seq, {COLUMNS} FROM memories WHERE {rows_after} AND {where} "
                "ORDER BY seq LIMIT ?",
                (*after, *params, chunk),
            )
            if not rows:
                return
            last = int(rows[-1][0])
            yield rows

    def move(self, ids: Sequence[str], tier: Tier, now: float) -> None:
        for chunk in _chunks(list(ids), 500):
            marks = ",".join("?" * len(chunk))
            self.db.execute(
                f"UPDATE memories SET tier = ?, tier_changed_at = ? "
                f"WHERE agent_id = ? AND id IN ({marks})",
                (tier, now, self.agent_id, *chunk),
            )

    def reinforce(self, ids: Sequence[str], now: float) -> None:
        """Count one read of each memory now (inside the caller's transaction): this device's
        counters and the rows' totals, never a mark for upload (`core.reinforce`)."""
        reinforce.add_local(self, [(memory_id_, 1, [now]) for memory_id_ in dict.fromkeys(ids)])

    def resolve(self, ids: Sequence[str]) -> list[str]:
        """Each content id (`memory_id` of a text) → the memory that holds or held that text:
        an edited memory keeps its id and takes its new text's content id as an alias, so
        storing any text it had again reinforces it instead of adding a duplicate. An alias
        whose memory is gone is ignored."""
        aliases: dict[str, str] = {}
        for chunk in _chunks(list(dict.fromkeys(ids)), 500):
            marks = ",".join("?" * len(chunk))
            aliases.update(
                (str(a), str(t))
                for a, t in self.db.query(
                    "SELECT a.alias, a.id FROM memory_aliases a JOIN memories m "
                    "ON m.agent_id = a.agent_id AND m.id = a.id "
                    f"WHERE a.agent_id = ? AND a.alias IN ({marks})",
                    (self.agent_id, *chunk),
                )
            )
        return [aliases.get(i, i) for i in ids]

    def add_alias(self, text: str, memory_id_: str) -> None:
        """`text` now belongs to `memory_id_` (inside the caller's transaction)."""
        alias = memory_id(self.agent_id, text)
        if alias == memory_id_:
            self.db.execute(
                "DELETE FROM memory_aliases WHERE agent_id = ? AND alias = ?",
                (self.agent_id, alias),
            )
            return
        self.db.execute(
            "INSERT INTO memory_aliases (agent_id, alias, id) VALUES (?, ?, ?) "
            "ON CONFLICT (agent_id, alias) DO UPDATE SET id = excluded.id",
            (self.agent_id, alias, memory_id_),
        )

    def delete(self, ids: Sequence[str]) -> None:
        if self._near is not None:
            for memory_id_ in ids:
                self._near.remove(memory_id_)
        for chunk in _chunks(list(ids), 500):
            marks = ",".join("?" * len(chunk))
            self.db.execute(
                f"DELETE FROM memories WHERE agent_id = ? AND id IN ({marks})",
                (self.agent_id, *chunk),
            )

    def delete_frozen_before(self, cutoff: float) -> int:
        n = int(
            self.db.scalar(
                "SELECT COUNT(*) FROM memories WHERE agent_id = ? AND tier = 'frozen' "
                "AND created_at < ?",
                (self.agent_id, cutoff),
            )
        )
        self.db.execute(
            "DELETE FROM memories WHERE agent_id = ? AND tier = 'frozen' AND created_at < ?",
            (self.agent_id, cutoff),
        )
        return n

    def warm_bytes(self) -> int:
        return int(
            self.db.scalar(
                "SELECT COALESCE(SUM(size_bytes), 0) FROM memories WHERE agent_id = ? AND tier = 'warm'",
                (self.agent_id,),
            )
        )

    def counts(self) -> dict[str, int]:
        rows = self.db.query(
            "SELECT tier, COUNT(*) FROM memories WHERE agent_id = ? GROUP BY tier",
            (self.agent_id,),
        )
        out: dict[str, int] = dict.fromkeys(TIERS, 0)
        out.update({r[0]: int(r[1]) for r in rows})
        return out

    def total_tokens(self) -> int:
        stored = int(
            self.db.scalar(
                "SELECT COALESCE(SUM(tokens), 0) FROM memories WHERE agent_id = ?", (self.agent_id,)
            )
        )
        rows = self.db.query(
            "SELECT text FROM memories WHERE agent_id = ? AND tokens = ? AND text != ''",
            (self.agent_id, UNCOUNTED),
        )
        return stored + sum(counted(r[0], UNCOUNTED) for r in rows)

    def store_counts(self, newest: int = FILL_WINDOW) -> None:
        """Store the token counts of the agent's `newest` memories stored uncounted (where
        one-shot stores leave them). Inside a write transaction."""
        low = max(self.seq_low, newest_seq(self) + 1 - newest)
        rows = self.db.query(
            "SELECT seq, text FROM memories WHERE seq BETWEEN CAST(? AS INTEGER) AND "
            "CAST(? AS INTEGER) AND tokens = ? AND text != ''",
            (str(low), str(self.seq_high), UNCOUNTED),
        )
        if rows:
            self.db.executemany(
                "UPDATE memories SET tokens = ? WHERE seq = CAST(? AS INTEGER) AND tokens = ?",
                [(count_tokens(r[1]), str(r[0]), UNCOUNTED) for r in rows],
            )

    def _categories(self, ids: Sequence[str]) -> list[Row]:
        """(id, category) of those of `ids` that are stored."""
        out: list[Row] = []
        for chunk in _chunks(list(dict.fromkeys(ids)), 500):
            marks = ",".join("?" * len(chunk))
            out += self.db.query(
                f"SELECT id, category FROM memories WHERE agent_id = ? AND id IN ({marks})",
                (self.agent_id, *chunk),
            )
        return out

    def metadata_of(self, memory_id_: str) -> tuple[tuple[str, ...], ...]:
        """(urls, commands, paths) of a stored memory."""
        row = self.db.query_one(
            "SELECT urls, commands, paths FROM memories WHERE agent_id = ? AND id = ?",
            (self.agent_id, memory_id_),
        )
        if row is None:
            raise NotFound(f"no memory {memory_id_!r}")
        return tuple(_split(v) for v in row)

    def search_url(self, fragment: str) -> list[MemoryRow]:
        rows = self.db.query(
            f"SELECT {COLUMNS} FROM memories WHERE agent_id = ? AND instr(lower(urls), lower(?)) > 0 "
            "ORDER BY created_at DESC",
            (self.agent_id, fragment),
        )
        return [MemoryRow.read(r) for r in rows]


def _insert_row(
    seq: int,
    agent_id: str,
    fid: str,
    fact: NewFact,
    category: str,
    now: float,
    n_tokens: int,
    seen: tuple[int, float | None],
) -> tuple[object, ...]:
    """The parameters of an insert (`INSERT_HEAD`) of a new memory (`seen`: reads counted before)."""
    size = len(fact.text.encode()) + sum(
        len(v.encode()) for v in (*fact.urls, *fact.commands, *fact.paths)
    )
    return (
        str(seq),  # 64-bit: bound as text (driver trap)
        agent_id,
        fid,
        fact.text,
        category,
        float(fact.importance),
        now if fact.created_at is None else fact.created_at,
        fact.access_count + seen[0],
        seen[1],
        "warm",
        now,
        _join(fact.urls),
        _join(fact.commands),
        _join(fact.paths),
        fact.source,
        size,
        n_tokens,
        *_NEW_ROW_DEFAULTS,
    )


_NEW_ROW_GIVEN: Final = NAMES[: NAMES.index("tokens") + 1]
_NEW_ROW_DEFAULTS: Final = tuple(STORED_DEFAULTS[n] for n in NAMES[len(_NEW_ROW_GIVEN) :])
"""What a new row holds in the columns after `tokens` (pinned, supersession): their defaults."""


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
