"""The tree index: category paths (`projects/evoclaw/bsc`) that retrieval navigates.

Invariants after every operation (config `[tree]`): ≤ 50 nodes (the root is implicit and not
counted), depth ≤ 4, ≤ 10 children per node, ≤ 2 KB serialized. An explicit `add` that would
break one is refused; a category met while storing folds into its deepest allowed ancestor.
Warm/cold counts are not stored: they are counted from the memories (subtree-inclusive).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from tiermem.core.config import TreeConfig
from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput, LimitExceeded, NotFound
from tiermem.core.scoring import DAY

MAX_DESCRIPTION = 100
_SEGMENT_SPACE = re.compile(r"\s+")


@lru_cache(maxsize=4096)
def normalize_path(raw: str) -> str:
    """'Projects / EvoClaw /BSC' → 'projects/evoclaw/bsc'. Raises on an empty path (a batch
    names a few categories many times, so results are cached)."""
    segments = [_SEGMENT_SPACE.sub("-", s.strip().casefold()) for s in raw.split("/")]
    segments = [s for s in segments if s]
    if not segments:
        raise InvalidInput("category is empty")
    for segment in segments:
        if segment in (".", "..") or any(ord(c) < 32 for c in segment):
            raise InvalidInput(f"invalid category segment {segment!r}")
        if len(segment) > 64:
            raise InvalidInput(f"category segment longer than 64 characters: {segment[:20]}…")
    return "/".join(segments)


def ancestors(path: str) -> list[str]:
    """'a/b/c' → ['a', 'a/b', 'a/b/c']."""
    parts = path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def parent(path: str) -> str:
    return path.rpartition("/")[0]


def default_description(path: str) -> str:
    return path.rpartition("/")[2].replace("-", " ").replace("_", " ").title()


@dataclass
class TreeNode:
    """A category of the tree index with its description."""

    path: str
    description: str
    created_at: float
    last_activity: float
    warm: int = 0
    cold: int = 0

    @property
    def depth(self) -> int:
        return self.path.count("/") + 1


@dataclass
class TreeIndex:
    """The nodes of one agent's tree, as a pure value; checks limits without touching the DB."""

    nodes: dict[str, TreeNode]
    cfg: TreeConfig
    root_warm: int = 0
    root_cold: int = 0
    extra: dict[str, int] = field(default_factory=dict)

    def serialize(self) -> str:
        """The tree as the agent's context holds it (what the 2 KB limit measures)."""
        body = {p: self.nodes[p].description for p in sorted(self.nodes)}
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"))

    def size_bytes(self) -> int:
        return len(self.serialize().encode())

    def children(self, path: str) -> list[str]:
        return sorted(p for p in self.nodes if parent(p) == path)

    def problem_adding(self, path: str, description: str) -> str | None:
        """Why `path` (with any missing ancestors) cannot be added, or None if it can."""
        missing = [p for p in ancestors(path) if p not in self.nodes]
        if not missing:
            return None
        depth = path.count("/") + 1
        if depth > self.cfg.max_depth:
            return f"depth {depth} is over the limit of {self.cfg.max_depth}"
        if len(self.nodes) + len(missing) > self.cfg.max_nodes:
            return f"the tree would have {len(self.nodes) + len(missing)} nodes (limit {self.cfg.max_nodes})"
        first = missing[0]
        siblings = len(self.children(parent(first)))
        if siblings + 1 > self.cfg.max_children:
            where = parent(first) or "the root"
            return f"{where} already has {siblings} children (limit {self.cfg.max_children})"
        trial = dict(self.nodes)
        for p in missing:
            desc = description if p == path else default_description(p)
            trial[p] = TreeNode(p, desc, 0.0, 0.0)
        size = TreeIndex(trial, self.cfg).size_bytes()
        if size > self.cfg.max_bytes:
            return f"the tree would be {size} bytes (limit {self.cfg.max_bytes})"
        return None

    def fold(self, path: str) -> str:
        """The deepest prefix of `path` that exists or could be added ('' for the root)."""
        best = ""
        for prefix in ancestors(path):
            if (
                prefix in self.nodes
                or self.problem_adding(prefix, default_description(prefix)) is None
            ):
                best = prefix
            else:
                break
        return best

    def node_for(self, category: str) -> str:
        """The existing node a memory of `category` belongs to ('' for the root)."""
        if category in self.nodes:
            return category
        for prefix in reversed(ancestors(category)):
            if prefix in self.nodes:
                return prefix
        return ""

    def check(self) -> list[str]:
        """Every broken invariant (empty when the tree is valid)."""
        problems = []
        if len(self.nodes) > self.cfg.max_nodes:
            problems.append(f"{len(self.nodes)} nodes > {self.cfg.max_nodes}")
        for p in self.nodes:
            if p.count("/") + 1 > self.cfg.max_depth:
                problems.append(f"{p}: depth > {self.cfg.max_depth}")
            if parent(p) and parent(p) not in self.nodes:
                problems.append(f"{p}: parent missing")
        counts = Counter(parent(p) for p in self.nodes)
        problems += [
            f"{p or 'root'}: {n} children > {self.cfg.max_children}"
            for p, n in counts.items()
            if n > self.cfg.max_children
        ]
        if self.size_bytes() > self.cfg.max_bytes:
            problems.append(f"{self.size_bytes()} bytes > {self.cfg.max_bytes}")
        return problems


class TreeStore:
    """One agent's tree in the database."""

    def __init__(self, db: Database, agent_id: str, cfg: TreeConfig) -> None:
        self.db = db
        self.agent_id = agent_id
        self.cfg = cfg

    def load(self, with_counts: bool = False) -> TreeIndex:
        rows = self.db.query(
            "SELECT path, description, created_at, last_activity FROM tree_nodes "
            "WHERE agent_id = ?",
            (self.agent_id,),
        )
        index = TreeIndex({r[0]: TreeNode(r[0], r[1], r[2], r[3]) for r in rows}, self.cfg)
        if with_counts:
            self._count(index)
        return index

    def _count(self, index: TreeIndex) -> None:
        rows = self.db.query(
            "SELECT category, tier, COUNT(*) FROM memories WHERE agent_id = ? "
            "GROUP BY category, tier",
            (self.agent_id,),
        )
        for category, tier, n in rows:
            is_warm = tier == "warm"
            if is_warm:
                index.root_warm += n
            else:
                index.root_cold += n
            for prefix in ancestors(category):
                node = index.nodes.get(prefix)
                if node is None:
                    continue
                if is_warm:
                    node.warm += n
                else:
                    node.cold += n

    def add(self, path: str, description: str, now: float) -> TreeNode:
        """Explicit add: refused (LimitExceeded) if it would break an invariant."""
        path = normalize_path(path)
        description = " ".join(description.split())[:MAX_DESCRIPTION] or default_description(path)
        index = self.load()
        if path in index.nodes:
            self.db.execute(
                "UPDATE tree_nodes SET description = ?, last_activity = ? "
                "WHERE agent_id = ? AND path = ?",
                (description, now, self.agent_id, path),
            )
            trial = self.load()
            if trial.size_bytes() > self.cfg.max_bytes:
                raise LimitExceeded(
                    f"the tree would be {trial.size_bytes()} bytes (limit {self.cfg.max_bytes})"
                )
            return trial.nodes[path]
        problem = index.problem_adding(path, description)
        if problem:
            raise LimitExceeded(f"cannot add {path}: {problem}")
        self._insert_missing(index, path, description, now)
        self.touch({path}, now)
        return self.load().nodes[path]

    def ensure(self, category: str, now: float, index: TreeIndex | None = None) -> str:
        """Create what is allowed of `category`'s path; return the node it lives under."""
        index = index or self.load()
        target = index.fold(category)
        if target and target not in index.nodes:
            self._insert_missing(index, target, default_description(target), now)
        return target

    def _insert_missing(self, index: TreeIndex, path: str, description: str, now: float) -> None:
        for prefix in ancestors(path):
            if prefix in index.nodes:
                continue
            desc = description if prefix == path else default_description(prefix)
            self.db.execute(
                "INSERT INTO tree_nodes (agent_id, path, description, created_at, last_activity) "
                "VALUES (?, ?, ?, ?, ?)",
                (self.agent_id, prefix, desc, now, now),
            )
            index.nodes[prefix] = TreeNode(prefix, desc, now, now)

    def touch(self, paths: set[str], now: float) -> None:
        """Mark activity on nodes and their ancestors."""
        every = sorted({a for p in paths if p for a in ancestors(p)})
        if every:
            marks = ",".join("?" * len(every))
            self.db.execute(
                f"UPDATE tree_nodes SET last_activity = ? WHERE agent_id = ? AND path IN ({marks})",
                (now, self.agent_id, *every),
            )

    def remove(self, path: str) -> list[str]:
        """Remove a node and its descendants, only if no memory lives under it."""
        path = normalize_path(path)
        index = self.load(with_counts=True)
        node = index.nodes.get(path)
        if node is None:
            raise NotFound(f"no tree node {path}")
        if node.warm or node.cold:
            raise InvalidInput(
                f"{path} holds {node.warm} warm and {node.cold} cold memories: only empty "
                "nodes can be removed"
            )
        return self._delete_subtree(path)

    def _delete_subtree(self, path: str) -> list[str]:
        removed = [
            r[0]
            for r in self.db.query(
                "SELECT path FROM tree_nodes WHERE agent_id = ? AND (path = ? OR path LIKE ? ESCAPE '\\')",
                (self.agent_id, path, _like_prefix(path)),
            )
        ]
        self.db.execute(
            "DELETE FROM tree_nodes WHERE agent_id = ? AND (path = ? OR path LIKE ? ESCAPE '\\')",
            (self.agent_id, path, _like_prefix(path)),
        )
        return sorted(removed)

    def prune(self, now: float) -> list[str]:
        """Remove nodes idle for `prune_idle_days` that hold no warm memory (subtrees whole)."""
        index = self.load(with_counts=True)
        cutoff = now - self.cfg.prune_idle_days * DAY
        removed: list[str] = []
        for path in sorted(index.nodes, key=lambda p: p.count("/")):
            node = index.nodes[path]
            if any(path.startswith(r + "/") for r in removed):
                continue
            if node.last_activity < cutoff and node.warm == 0:
                removed += self._delete_subtree(path)
        return sorted(removed)


def _like_prefix(path: str) -> str:
    escaped = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"
