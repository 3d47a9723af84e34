"""The facade every front end uses: `Memory(home, agent_id)`.

Each public method is one unit of work on one agent's rows: it validates its input, runs in a
single transaction, and leaves every invariant (hot ≤ 5 KB, tree limits, agent isolation) true.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from tiermem.core import agents, lookup, outbox, spaces, tokens
from tiermem.core import hot as hotmod
from tiermem.core.config import Config, load_config
from tiermem.core.db import Database
from tiermem.core.deferred_reads import DeferredReads
from tiermem.core.errors import InvalidInput, MemoryOff, StorageError
from tiermem.core.files import replace_private
from tiermem.core.hot import HotState, HotStore
from tiermem.core.lookup import TIER_CHOICES as TIER_CHOICES
from tiermem.core.lookup import tiers_for as tiers_for
from tiermem.core.metrics import DayMetrics, MetricsStore
from tiermem.core.migrations import SCHEMA_VERSION, migrate, schema_version
from tiermem.core.paths import DEFAULT_AGENT, Home, default_home, validate_agent_id
from tiermem.core.readcache import ReadCache
from tiermem.core.rows import MemoryRow
from tiermem.core.tree import TreeIndex, TreeNode, TreeStore, normalize_path
from tiermem.core.warm import MAX_METADATA_ITEMS, MemoryStore, NewFact, StoreOutcome

if TYPE_CHECKING:
    from tiermem.core.consolidate import ConsolidationReport
    from tiermem.core.conversation import ConversationReport
    from tiermem.core.ingest import IngestReport
    from tiermem.core.memory_md import MemoryMdReport
    from tiermem.core.retrieve import RetrievalResult
    from tiermem.core.transcript import Transcript

T = TypeVar("T")


class Memory:
    """One agent's memory in one home. Open, use, `close()` (or use it as a context manager)."""

    def __init__(
        self,
        home: Path | str | None = None,
        agent_id: str = DEFAULT_AGENT,
        *,
        config: Config | None = None,
        clock: Callable[[], float] = time.time,
        driver: str | None = None,
        create: bool = True,
        space: str | None = None,
    ) -> None:
        """`create=False` is a read: the home, its database and the agent must exist (nothing is
        created), and a home the user cannot write is opened read-only. `space`: the shared
        space's own scope instead of an agent (`open_space`)."""
        self.agent_id = spaces.scope(space) if space is not None else validate_agent_id(agent_id)
        self.home = Home(Path(home) if home is not None else default_home())
        self.created_home = create and not self.home.db_path.exists()
        self.read_only = False if create else self.home.require()
        if create:
            self.home.ensure()
        self.cfg = config if config is not None else load_config(self.home.config_path)
        self._clock = clock
        self.db = Database(self.home.db_path, driver, read_only=self.read_only)
        try:
            self._prepare(create)
        except BaseException:
            self.db.close()
            raise
        self.memories = MemoryStore(self.db, self.agent_id)
        self.hot_store = HotStore(self.db, self.agent_id, self.cfg.hot, self._move_to_warm)
        self.trees = TreeStore(self.db, self.agent_id, self.cfg.tree)
        self.reads = ReadCache(self.db, self.trees)
        self.metrics = MetricsStore(self.db, self.agent_id)
        self.last_memory_md: MemoryMdReport | None = None
        self._reads = DeferredReads(self.memories, self.trees, self.metrics)
        self.db.on_begin = self._reads.on_begin
        self.db.on_rollback = self._reads.on_rollback

    def _prepare(self, create: bool) -> None:
        """Bring the schema up to date (a read-only home must already be), then check the agent:
        a read needs it to exist; a write creates it (`created_agent` says so)."""
        if not self.read_only:
            migrate(self.db)
        elif schema_version(self.db) != SCHEMA_VERSION:
            raise StorageError(
                f"{self.home.db_path} is read-only and at schema version "
                f"{schema_version(self.db)} (this tiermem uses {SCHEMA_VERSION}): make it "
                "writable once so it can be upgraded"
            )
        self.created_agent = not agents.agent_exists(self.db, self.agent_id)
        if self.created_agent and not create:
            agents.require_agent(self.db, self.agent_id, self.home.root)

    def undo_creation(self) -> None:
        """After a failed first write: an agent (and home) this `Memory` created and nothing
        was stored in goes again, so a mistyped name leaves no trace. Closes the memory."""
        if self.created_agent and agents.only_registered(self.db, self.agent_id):
            with self.db.transaction():
                self.db.execute("DELETE FROM agents WHERE agent_id = ?", (self.agent_id,))
        gone = self.created_home and not agents.known_agents(self.db)
        self.close()
        if gone:
            for suffix in ("", "-wal", "-shm"):
                self.home.root.joinpath(f"tiermem.db{suffix}").unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.home.root.rmdir()

    def now(self) -> float:
        return float(self._clock())

    def open_space(self, name: str) -> Memory:
        """The shared space `name` of this home as a memory of its own (its scope, with this
        memory's config and clock): where a write into the space goes. Close it after use."""
        return Memory(
            self.home.root,
            config=self.cfg,
            clock=self._clock,
            create=not self.read_only,
            space=name,
        )

    def require_memory(self) -> None:
        """Refuse a store or a search when memory is off for this agent (`[agents.NAME]`)."""
        require_memory_on(self.cfg, self.agent_id)

    def close(self) -> None:
        """Write the reads not written yet (see `flush_reinforcement`), then close."""
        try:
            self.flush_reinforcement()
        except StorageError as exc:  # the home is locked or read-only: only counts are lost
            import logging  # only a warning needs it: start-up stays fast

            logging.getLogger(__name__).warning("reinforcement of recent reads not saved: %s", exc)
        self.db.close()

    def reinforce_later(self, ids: Sequence[str], paths: Iterable[str], tokens: int) -> None:
        """Reinforce what a read returned, without a write now (`core.deferred_reads`): written
        by the next write transaction of this `Memory`, `flush_reinforcement` or `close`."""
        self._reads.add(ids, paths, tokens, self.now())

    def reads_pending(self) -> bool:
        """Whether reads of this `Memory` wait to be written (`reinforce_later`)."""
        return bool(self._reads)

    def flush_reinforcement(self) -> None:
        """Write the pending reinforcement of reads, and the token counts reads made, in one
        short transaction (no fsync wait: counts are bookkeeping)."""
        if self._reads or (self._reads.counts_changed() and not self.read_only):
            with self.db.relaxed_transaction():
                pass  # the transaction's start writes them (`DeferredReads.on_begin`)

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- warm / cold -----------------------------------------------------------------------

    def store(
        self,
        text: str,
        category: str,
        importance: float = 0.5,
        *,
        urls: Sequence[str] = (),
        commands: Sequence[str] = (),
        paths: Sequence[str] = (),
        source: str = "",
        count_tokens: bool = True,
    ) -> StoreOutcome:
        """One fact (`store_many`). `count_tokens=False` leaves its token count to the first
        read that needs it (`core.tokens.UNCOUNTED`): a one-shot command then never loads the
        tokenizer."""
        fact = NewFact(
            text=text,
            category=category,
            importance=importance,
            urls=tuple(urls),
            commands=tuple(commands),
            paths=tuple(paths),
            source=source,
        )
        return self.store_many([fact], count_tokens=count_tokens)[0]

    def store_many(
        self, facts: Iterable[NewFact], *, count_tokens: bool = True
    ) -> list[StoreOutcome]:
        """Store facts in one transaction; their categories grow the tree where limits allow.

        URLs, commands and paths in a fact's text join the metadata given with it; a duplicate
        (exact, or near with `[dedup] near`) reinforces the stored memory instead (its outcome
        says `merged_into`)."""
        now = self.now()
        batch = [(with_metadata(fact), normalize_path(fact.category)) for fact in facts]
        if not batch:
            return []
        with self.db.transaction():
            index = self.trees.load()
            known = len(index.nodes)
            categories = dict.fromkeys(category for _, category in batch)
            nodes = {self.trees.ensure(category, now, index) for category in categories}
            outcomes = self.memories.put(batch, now, self.cfg.dedup, count=count_tokens)
            stored = zip(batch, outcomes, strict=True)
            from tiermem.core import supersession  # the graph's and the frames' code load there

            supersession.after_store(
                self, [(o.id, f.text, o.category) for (f, _), o in stored if o.created]
            )
            self.trees.touch(nodes, now)
            self.metrics.bump(now, stores=sum(o.created for o in outcomes))
            if len(index.nodes) != known:
                outbox.enqueue(self.db, self.agent_id, "tree", now)
        return outcomes

    def get(self, memory_id: str) -> MemoryRow:
        """The memory, with the reads of this `Memory` not written yet counted in."""
        record = self.memories.get(memory_id)
        count, times = self._reads.hits(memory_id)
        if not count:
            return record
        last = max(times) if record.last_access is None else max(record.last_access, *times)
        return dataclasses.replace(
            record, access_count=record.access_count + count, last_access=last
        )

    def retrieve(
        self,
        query: str,
        *,
        limit: int | None = None,
        tier: str | None = None,
        category: str | None = None,
        budget: int | None = None,
        reinforce: bool = True,
        mode: str | None = None,
        llm: bool = False,
        tags: Sequence[str] = (),
        as_of: float | None = None,
    ) -> RetrievalResult:
        """Explained retrieval; what it returns is reinforced (access count, recency) later,
        without taking the write lock now (see `reinforce_later`). `as_of`: what was true
        then (memories whose fact started later left out, supersessions after it undone).

        `mode`: keyword (default, `[retrieval] mode`), vector or hybrid (the `vector` extra and
        the libSQL driver). `llm`: LLM tree search (the `[llm]` endpoint chooses categories);
        any failure of it falls back to keyword mode, and the result's notes say why."""
        self.require_memory()
        return lookup.retrieve(
            self,
            query,
            limit=limit,
            tier=tier,
            category=category,
            budget=budget,
            reinforce=reinforce,
            mode=mode,
            llm=llm,
            tags=tags,
            as_of=as_of,
        )

    # -- hot -------------------------------------------------------------------------------

    def hot(self) -> HotState:
        return self.hot_store.load()

    def edit_hot(
        self, change: Callable[[HotState], T], *, must_fit: bool = False
    ) -> tuple[T, list[str]]:
        """Apply `change` to the hot state, enforce the limits, save, regenerate MEMORY.md.

        Returns what `change` returned and what the limits moved to warm memory. If the limits
        cannot hold (with `must_fit`: without moving out an item the change adds), nothing is
        saved."""
        self.read_back_memory_md()  # hand edits of MEMORY.md first: never overwritten unread
        now = self.now()
        with self.db.transaction():
            state = self.hot_store.load()
            value = change(state)
            pruned = self.hot_store.save(state, now, must_fit=must_fit)
            outbox.enqueue(self.db, self.agent_id, "hot", now)
        self.write_memory_md()
        return value, pruned

    def _move_to_warm(self, moved: list[hotmod.Pruned]) -> None:
        """What the hot limits push out becomes warm facts; a lesson promoted from a memory
        that still exists just goes back to it."""
        sources = [p.item.source_id for p in moved if isinstance(p.item, hotmod.Lesson)]
        existing = {m.id for m in self.memories.get_many([s for s in sources if s])}
        self.store_many(
            p.as_fact()
            for p in moved
            if not (isinstance(p.item, hotmod.Lesson) and p.item.source_id in existing)
        )

    def read_back_memory_md(self) -> MemoryMdReport:
        """Read hand edits of MEMORY.md into the hot state (unparsed lines become warm facts)
        and regenerate it; the report is also kept as `last_memory_md`."""
        from tiermem.core import memory_md  # the parser and the distiller load on first use

        self.last_memory_md = memory_md.read_back(self)
        return self.last_memory_md

    def update_hot(self, key: str, values: dict[str, Any]) -> list[str]:
        return self.edit_hot(lambda s: HotStore.update_mapping(s, key, values), must_fit=True)[1]

    def add_lesson(
        self, text: str, importance: float = 0.7, category: str = "general"
    ) -> tuple[hotmod.Lesson, list[str]]:
        return self.edit_hot(
            lambda s: HotStore.add_lesson(s, text, importance, category, self.now()), must_fit=True
        )

    def add_event(self, text: str) -> tuple[hotmod.Event, list[str]]:
        return self.edit_hot(lambda s: HotStore.add_event(s, text, self.now()), must_fit=True)

    def add_task(self, text: str, status: str = "pending") -> tuple[hotmod.Task, list[str]]:
        return self.edit_hot(
            lambda s: HotStore.add_task(s, text, self.now(), status), must_fit=True
        )

    def complete_task(self, task: str) -> tuple[hotmod.Task, list[str]]:
        return self.edit_hot(lambda s: HotStore.complete_task(s, task, self.now()), must_fit=True)

    def add_project(
        self, name: str, description: str = "", status: str = ""
    ) -> tuple[hotmod.Project, list[str]]:
        return self.edit_hot(
            lambda s: HotStore.upsert_project(s, name, description, status, self.now()),
            must_fit=True,
        )

    def remove_hot_item(self, item: str) -> str:
        return self.edit_hot(lambda s: HotStore.remove_item(s, item))[0]

    def memory_md(self) -> str:
        return hotmod.render_markdown(self.hot())

    def hot_size_bytes(self) -> int:
        return hotmod.size_bytes(self.hot())

    def write_memory_md(self) -> Path:
        """Regenerate MEMORY.md atomically (temp file + rename): a reader never sees half."""
        path = self.home.memory_md(self.agent_id)
        replace_private(path, self.memory_md(), durable=True)
        return path

    # -- tree ------------------------------------------------------------------------------

    def tree(self) -> TreeIndex:
        return self.trees.load(with_counts=True)

    def tree_add(self, path: str, description: str) -> TreeNode:
        with self.db.transaction():
            node = self.trees.add(path, description, self.now())
            outbox.enqueue(self.db, self.agent_id, "tree", self.now())  # after: it stamps
            return node

    def tree_remove(self, path: str) -> list[str]:
        with self.db.transaction():
            removed = self.trees.remove(path)
            outbox.enqueue(self.db, self.agent_id, "tree", self.now())  # after: it stamps
            return removed

    def tree_prune(self) -> list[str]:
        with self.db.transaction():
            removed = self.trees.prune(self.now())
            if removed:
                outbox.enqueue(self.db, self.agent_id, "tree", self.now())
            return removed

    # -- maintenance and metrics -----------------------------------------------------------

    def consolidate(
        self, mode: str = "quick", progress: Callable[[str, int, int], None] | None = None
    ) -> ConsolidationReport:
        """Maintenance (see `core.consolidate`). Hand edits of MEMORY.md are read back first;
        daily, monthly and full also ingest the daily notes (seed v2.2). `progress(step, done,
        total)` hears of each consolidation step (a progress bar's feed)."""
        from tiermem.core import consolidate, ingest  # the write path: reads never load it

        chosen = consolidate.check_mode(mode)
        memory_md = self.read_back_memory_md()
        ingested = None
        if chosen != "quick":
            ingested = ingest.ingest_daily(self, memory_md=False)
        report = consolidate.consolidate(self, chosen, progress)
        report.memory_md, report.ingested = memory_md, ingested
        return report

    # -- the write path --------------------------------------------------------------------

    def ingest_daily(self, folder: Path | None = None) -> IngestReport:
        """Ingest daily notes (idempotent) and read back MEMORY.md edits."""
        from tiermem.core import ingest  # the write path: reads never load it

        return ingest.ingest_daily(self, folder)

    def conversation_end(
        self,
        transcript: Transcript,
        text: str,
        *,
        mode: str | None = None,
        session: str | None = None,
    ) -> ConversationReport:
        from tiermem.core import conversation  # the write path: reads never load it

        return conversation.conversation_end(self, transcript, text, mode=mode, session=session)

    def search_url(self, fragment: str) -> list[MemoryRow]:
        """Memories (every tier) with a URL containing `fragment`, newest first."""
        if not fragment.strip():
            raise InvalidInput("URL fragment is empty")
        return self.memories.search_url(fragment.strip())

    def all_urls(self) -> dict[str, list[str]]:
        """Every stored URL (every tier) → the ids of the memories holding it, read in chunks."""
        out: dict[str, list[str]] = {}
        last = 0
        while True:
            rows_after, params = self.memories.after(last)
            rows = self.db.query(
                f"SELECT seq, id, urls FROM memories WHERE {rows_after} AND urls != '' "
                "ORDER BY seq LIMIT 2000",
                params,
            )
            if not rows:
                return out
            last = int(rows[-1][0])
            for _, memory_id_, urls in rows:
                for url in str(urls).split("\n"):
                    if url:
                        out.setdefault(url, []).append(memory_id_)

    def gauges(self) -> dict[str, int]:
        """Today's sizes and token counts, measured now (nothing is written)."""
        memory_md = self.memory_md()
        tree = self.trees.load()
        counts = self.memories.counts()
        return {
            "flat_tokens": self.memories.total_tokens(),
            "warm_bytes": self.memories.warm_bytes(),
            "warm_count": counts["warm"],
            "cold_count": counts["cold"] + counts["frozen"],
            "hot_bytes": self.hot_size_bytes(),
            "hot_tokens": tokens.count_tokens(memory_md),
            "tree_nodes": len(tree.nodes),
            "tree_bytes": tree.size_bytes(),
            "tree_tokens": tokens.count_tokens(tree.serialize()),
        }

    def snapshot_metrics(self) -> DayMetrics:
        """Record today's gauges (sizes, tokens) and return today's metrics."""
        gauges = self.gauges()
        with self.db.transaction():
            self.metrics.snapshot(self.now(), **gauges)
        return self.metrics.history(1)[-1]

    def metrics_history(self, days: int = 30) -> list[DayMetrics]:
        if days < 1:
            raise InvalidInput(f"days must be at least 1 (got {days})")
        if not self.read_only:
            self.snapshot_metrics()
        return self.metrics.history(days)

    def context_block(self, results: RetrievalResult | None = None) -> str:
        """What sits in the agent's context: MEMORY.md, the tree index, retrieved memories."""
        parts = [self.memory_md(), "## Memory tree\n\n" + self.trees.load().serialize() + "\n"]
        if results and results.hits:
            lines = [f"- [{h.explanation.path or 'root'}] {h.memory.text}" for h in results.hits]
            parts.append("## Relevant memories\n\n" + "\n".join(lines) + "\n")
        return "\n".join(parts)


def with_metadata(fact: NewFact) -> NewFact:
    """The fact with the URLs, commands and paths of its text added to its metadata (at most 50
    of each kind: what was given explicitly comes first)."""
    from tiermem.core import metadata  # only a store reads URLs, commands and paths

    found = metadata.extract(fact.text)
    if not found:
        return fact
    return dataclasses.replace(
        fact,
        urls=tuple(metadata.fit((*fact.urls, *found.urls), MAX_METADATA_ITEMS)),
        commands=tuple(metadata.fit((*fact.commands, *found.commands), MAX_METADATA_ITEMS)),
        paths=tuple(metadata.fit((*fact.paths, *found.paths), MAX_METADATA_ITEMS)),
    )


def require_memory_on(cfg: Config, agent_id: str) -> None:
    """`MemoryOff` when `[agents.NAME] memory = false` for `agent_id`: checked before a home is
    opened too (the MCP server), so an agent whose memory is off is never created."""
    if not cfg.memory_on(agent_id):
        raise MemoryOff(
            f"memory is off for agent {agent_id!r} "
            f"([agents.{agent_id}] memory = false in config.toml): nothing is stored or searched"
        )


def open_scope(
    home: Path | str,
    scope: str,
    *,
    clock: Callable[[], float] = time.time,
    driver: str | None = None,
) -> Memory:
    """The memory of `scope` in `home`: an agent's, or a shared space's (`space:NAME`)."""
    space = spaces.space_of(scope)
    if space is None:
        return Memory(home, scope, clock=clock, driver=driver)
    return Memory(home, space=space, clock=clock, driver=driver)
