"""Merging the critical state (hot + tree) of two devices, per item and field, by HLC.

Both devices may change hot memory or the tree while apart. Their critical documents
(`critical_document`: the state, each field's hybrid-logical-clock version from `core.clocks`,
the seen vector, the conflict records) merge like this:

- every item is matched by id (`identity` and `owner_profile` keys, `lesson/<id>`, `event/<id>`,
  `task/<id>`, `project/<id>`, `tree/<path>`), every field is last-writer-wins by version (ties:
  a present value beats a deletion, then the larger value, so the result never depends on the
  order of the arguments);
- an item's existence is its `alive` field, restamped by every edit: a delete after the other
  side's last edit removes the item, an edit after the delete brings it back;
- the losing value is recorded as a conflict (`core.conflicts`) unless the winner had already
  seen it (the seen vector covers its version: then it was overwritten knowingly, an ordinary
  update); so nothing a device wrote is silently lost;
- the merged state keeps the limits: a tree node whose parent was deleted while a child was
  added gets its parent back, a tree or hot state over its limits is pruned by the rules the
  local code uses (`hot.enforce_limits`, critical lessons last; the newest tree leaves first),
  and every item pruned
  or restored is recorded too;
- seen vectors merge by maximum, conflict records by id (resolved on either side = resolved).

`merge_documents` is pure: deterministic, commutative (conflicts included) and idempotent; it is
associative as long as no pruning happens (pruning removes items from the lattice). The
created / last-activity times of a tree node are not clocked: they follow the side whose
`alive` version is newer (the larger times on a tie); the hot `updated_at` merges by maximum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tiermem.core import clocks, snapshot
from tiermem.core import conflicts as conflictmod
from tiermem.core import hot as hotmod
from tiermem.core.config import HotConfig, TreeConfig
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, LimitExceeded
from tiermem.core.tree import TreeIndex, TreeNode, ancestors, default_description, parent

__all__ = [
    "MergeOutcome",
    "MergeResult",
    "critical_document",
    "merge_documents",
    "merge_remote",
]

_DEVICE = re.compile(r"[0-9a-f]{32}")
_STRUCTS: dict[str, type[msgspec.Struct]] = {
    "lesson": hotmod.Lesson,
    "event": hotmod.Event,
    "task": hotmod.Task,
    "project": hotmod.Project,
}

REASON_CONCURRENT = "changed on two devices"
REASON_DELETED = "deleted on one device, changed on another"
REASON_PARENT = "parent restored: a node was added under it"
REASON_TREE_LIMIT = "pruned: the merged tree was over its limits"
REASON_HOT_LIMIT = "pruned: the merged hot memory was over its limits"


@dataclass(frozen=True)
class MergeResult:
    """The merged document and the conflict records this merge found (not already in either
    input), sorted by id. Unpacks as ``merged, conflicts``."""

    merged: dict[str, Any]
    conflicts: list[dict[str, Any]]

    def __iter__(self) -> Any:
        return iter((self.merged, self.conflicts))


@dataclass(frozen=True)
class MergeOutcome:
    """``changed``: the local state changed. ``conflicts``: conflict records found by this
    merge. ``pushed_back``: the merged state differs from the remote one, so an outbox row was
    queued to push it."""

    changed: bool
    conflicts: int
    pushed_back: bool = False


# -- documents ------------------------------------------------------------------------------


def _device(device_id_hex: str) -> str:
    if not _DEVICE.fullmatch(device_id_hex):
        raise InvalidInput("a device id is 32 lowercase hex digits")
    return device_id_hex


def critical_document(mem: Memory, device_id_hex: str) -> dict[str, Any]:
    """The critical-state payload (hot + tree + per-field clocks + seen vector + conflicts)
    that the sync engine seals as the `critical` record. Stamps pending changes first."""
    return snapshot.stamped_document(mem, _device(device_id_hex))


@dataclass
class _Side:
    """A document as items of fields (see `core.clocks`)."""

    agent_id: str
    values: dict[str, dict[str, Any]]
    extra: dict[str, tuple[float, float]]  # tree item → (created_at, last_activity)
    clocks: dict[str, dict[str, str]]  # item → field → full version text
    seen: dict[str, str]  # device → newest version merged in
    conflicts: dict[str, dict[str, Any]]
    updated_at: float = 0.0
    found: list[dict[str, Any]] = field(default_factory=list)
    shadow: dict[str, _Side] = field(default_factory=dict)
    """Deleted items whose live version lost: where it is, in case the item comes back."""


def _side(doc: Any) -> _Side:
    if not isinstance(doc, dict) or doc.get("format") != snapshot.DOCUMENT_FORMAT:
        raise InvalidInput("not a critical-state document with clocks")
    hot, nodes = snapshot.parse(doc)
    try:
        clock_map = snapshot.clock_table(doc, hot, nodes)
        seen = {str(d): str(v) for d, v in doc["seen"].items()}
        records = {str(c["id"]): dict(c) for c in doc["conflicts"]}
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise InvalidInput(f"malformed critical state ({exc})") from None
    return _Side(
        agent_id=str(doc.get("agent_id", "")),
        values=clocks.item_values(hot, [(n[0], n[1]) for n in nodes]),
        extra={f"tree/{n[0]}": (n[2], n[3]) for n in nodes},
        clocks=clock_map,
        seen=seen,
        conflicts=records,
        updated_at=hot.updated_at,
    )


def _hot_state(s: _Side) -> hotmod.HotState:
    groups: dict[str, list[Any]] = {k: [] for k in _STRUCTS}
    for item, values in s.values.items():
        kind = clocks.kind(item)
        if kind in _STRUCTS:
            key = item.partition("/")[2]
            groups[kind].append(msgspec.convert({**values, "id": key}, _STRUCTS[kind]))
    return hotmod.HotState(
        identity=dict(s.values.get("identity", {})),
        owner_profile=dict(s.values.get("owner_profile", {})),
        active_context=hotmod.ActiveContext(
            projects=groups["project"], events=groups["event"], tasks=groups["task"]
        ),
        critical_lessons=groups["lesson"],
        updated_at=s.updated_at,
    )


def _tree(s: _Side) -> dict[str, TreeNode]:
    out = {}
    for item, values in s.values.items():
        if clocks.kind(item) == "tree":
            path = item.partition("/")[2]
            created, last = s.extra.get(item, (0.0, 0.0))
            out[path] = TreeNode(path, str(values["description"]), created, last)
    return out


def _document(s: _Side) -> dict[str, Any]:
    nodes = _tree(s)
    return {
        "format": snapshot.DOCUMENT_FORMAT,
        "agent_id": s.agent_id,
        "hot": snapshot.canonical_hot(_hot_state(s)),
        "tree": [
            {
                "path": n.path,
                "description": n.description,
                "created_at": n.created_at,
                "last_activity": n.last_activity,
            }
            for _, n in sorted(nodes.items())
        ],
        "clocks": clocks.compact(s.clocks, s.values),
        "seen": dict(sorted(s.seen.items())),
        "conflicts": [s.conflicts[cid] for cid in sorted(s.conflicts)],
    }


# -- the merge ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cand:
    side: _Side
    version: str
    present: bool
    value: Any

    @property
    def key(self) -> tuple[str, bool, str]:
        return (
            self.version,
            self.present,
            clocks.canonical_json(self.value) if self.present else "",
        )


def _seen_by(side: _Side, version: str) -> bool:
    """Had `side` merged in the write `version` (so overwriting it was an ordinary update)?"""
    _, device = clocks.split_version(version)
    return side.seen.get(device, "") >= version


def _record(out: _Side, item: str, fld: str, kept: _Cand | None, lost: _Cand, reason: str) -> None:
    kept_version = kept.version if kept is not None else ""
    out.found.append(
        {
            "id": conflictmod.conflict_id(item, fld, kept_version, lost.version),
            "item": item,
            "field": fld,
            "kept": kept.value if kept is not None and kept.present else None,
            "lost": lost.value if lost.present else None,
            "kept_version": kept_version,
            "lost_version": lost.version,
            "lost_device": clocks.split_version(lost.version)[1],
            "reason": reason,
            "resolved": False,
        }
    )


def _pick(out: _Side, item: str, fld: str, x: _Cand, y: _Cand, reason: str) -> _Cand:
    """Last writer wins; the loser is recorded unless the winner had seen it."""
    win, lose = (x, y) if x.key >= y.key else (y, x)
    if lose.version and lose.key[1:] != win.key[1:] and not _seen_by(win.side, lose.version):
        _record(out, item, fld, win, lose, reason)
    return win


def _merge_fields(
    out: _Side, item: str, x: _Side, y: _Side, names: set[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    fx, fy = x.values.get(item, {}), y.values.get(item, {})
    cx, cy = x.clocks.get(item, {}), y.clocks.get(item, {})
    values: dict[str, Any] = {}
    versions: dict[str, str] = {}
    for name in sorted(names):
        win = _pick(
            out,
            item,
            name,
            _Cand(x, cx.get(name, ""), name in fx, fx.get(name)),
            _Cand(y, cy.get(name, ""), name in fy, fy.get(name)),
            REASON_CONCURRENT,
        )
        if win.present:
            values[name] = win.value
        if win.version:
            versions[name] = win.version
    return values, versions


def _take(out: _Side, item: str, s: _Side) -> None:
    if item in s.values:
        out.values[item] = dict(s.values[item])
    if item in s.extra:
        out.extra[item] = s.extra[item]
    if s.clocks.get(item):
        out.clocks[item] = dict(s.clocks[item])


def _merge_item(out: _Side, item: str, x: _Side, y: _Side) -> None:
    known_x = item in x.values or item in x.clocks
    known_y = item in y.values or item in y.clocks
    if not known_x or not known_y:
        _take(out, item, x if known_x else y)
        return
    if item in clocks.MAPPINGS:
        names = set(x.values.get(item, {})) | set(y.values.get(item, {}))
        names |= set(x.clocks.get(item, {})) | set(y.clocks.get(item, {}))
        values, versions = _merge_fields(out, item, x, y, names)
        out.values[item] = values
        if versions:
            out.clocks[item] = versions
        return
    alive_x = _Cand(x, x.clocks.get(item, {}).get(clocks.ALIVE, ""), item in x.values, None)
    alive_y = _Cand(y, y.clocks.get(item, {}).get(clocks.ALIVE, ""), item in y.values, None)
    if alive_x.present and alive_y.present:
        names = set(clocks.FIELDS[clocks.kind(item)])
        values, versions = _merge_fields(out, item, x, y, names)
        versions[clocks.ALIVE] = max(alive_x.version, alive_y.version)
        out.values[item], out.clocks[item] = values, versions
        times = [
            (alive.version, side.extra[item])
            for alive, side in ((alive_x, x), (alive_y, y))
            if item in side.extra
        ]
        if times:  # unclocked times follow the newer life of the item (associative)
            out.extra[item] = max(times)[1]
        return
    if not alive_x.present and not alive_y.present:
        out.clocks[item] = {clocks.ALIVE: max(alive_x.version, alive_y.version)}
        return
    live, dead = (alive_x, alive_y) if alive_x.present else (alive_y, alive_x)
    live = _Cand(live.side, live.version, True, live.side.values[item])
    if live.key[:2] >= dead.key[:2]:
        _take(out, item, live.side)
        if dead.version and not _seen_by(live.side, dead.version):
            _record(out, item, clocks.ALIVE, live, dead, REASON_DELETED)
    else:
        out.clocks[item] = {clocks.ALIVE: dead.version}
        out.shadow[item] = live.side
        if live.version and not _seen_by(dead.side, live.version):
            _record(out, item, clocks.ALIVE, dead, live, REASON_DELETED)


def _repair_tree(out: _Side, cfg: TreeConfig) -> None:
    """Parents of surviving nodes come back; a tree over its limits loses its newest leaves."""
    alive = {item.partition("/")[2] for item in out.values if clocks.kind(item) == "tree"}
    for path in sorted(alive, key=lambda p: (p.count("/"), p)):
        for anc in ancestors(path)[:-1]:
            if anc in alive:
                continue
            item = f"tree/{anc}"
            under = [p for p in alive if p.startswith(anc + "/")]
            tomb = out.clocks.get(item, {}).get(clocks.ALIVE, "")
            version = max([tomb, *(out.clocks[f"tree/{p}"].get(clocks.ALIVE, "") for p in under)])
            times = [out.extra.get(f"tree/{p}", (0.0, 0.0)) for p in under]
            old = out.shadow.get(item)
            if old is not None:  # the live side's node comes back as it was
                _take(out, item, old)
                times.append(old.extra.get(item, times[0]))
                out.clocks[item][clocks.ALIVE] = version
                out.found = [
                    r for r in out.found if (r["item"], r["field"]) != (item, clocks.ALIVE)
                ]
            else:
                out.values[item] = {"description": default_description(anc)}
                out.clocks[item] = {clocks.ALIVE: version, "description": version}
            out.extra[item] = (min(t[0] for t in times), max(t[1] for t in times))
            alive.add(anc)
            if tomb:
                kept = _Cand(out, version, True, out.values[item])
                _record(out, item, clocks.ALIVE, kept, _Cand(out, tomb, False, None), REASON_PARENT)
    while TreeIndex(_tree(out), cfg).check():
        leaves = [p for p in alive if not any(parent(q) == p for q in alive)]

        def rank(path: str) -> tuple[bool, str, str]:
            version = out.clocks.get(f"tree/{path}", {}).get(clocks.ALIVE, "")
            return (path.count("/") + 1 > cfg.max_depth, version, path)

        victim = max(leaves, key=rank)
        _prune(out, f"tree/{victim}", REASON_TREE_LIMIT)
        alive.discard(victim)


def _prune(out: _Side, item: str, reason: str) -> None:
    """Drop an item from the merged state (values and clocks: a later merge with a side that
    still has it prunes it again, deterministically) and record the loss."""
    version = out.clocks.get(item, {}).get(clocks.ALIVE, "")
    _record(out, item, clocks.ALIVE, None, _Cand(out, version, True, out.values[item]), reason)
    out.values.pop(item, None)
    out.extra.pop(item, None)
    out.clocks.pop(item, None)


def _repair_hot(out: _Side, cfg: HotConfig) -> None:
    """The local pruning rules (`hot.enforce_limits`) on the merged hot state; if identity and
    owner profile alone are too big, their oldest fields go first."""
    while True:
        state = _hot_state(out)
        try:
            _enforce_keeping_critical(state, cfg)
            break
        except LimitExceeded:
            fields = [
                (version, item, name)
                for item in clocks.MAPPINGS
                for name, version in out.clocks.get(item, {}).items()
                if name in out.values.get(item, {})
            ]
            if not fields:
                raise
            version, item, name = min(fields)
            lost = _Cand(out, version, True, out.values[item].pop(name))
            _record(out, item, name, None, lost, REASON_HOT_LIMIT)
            out.clocks[item].pop(name)
    kept = set(clocks.item_values(state, []))
    for item in sorted(out.values):
        if clocks.kind(item) in _STRUCTS and item not in kept:
            _prune(out, item, REASON_HOT_LIMIT)


def _enforce_keeping_critical(state: hotmod.HotState, cfg: HotConfig) -> None:
    """Critical lessons (importance ≥ 0.9) stay while anything else can go, as on a local save;
    only when they alone overflow does the least important of them go."""
    critical = {x.id for x in state.critical_lessons if x.importance >= hotmod.CRITICAL_IMPORTANCE}
    try:
        hotmod.enforce_limits(state, cfg, protected=critical)
    except LimitExceeded:  # the pruning so far stands; go on without the protection
        hotmod.enforce_limits(state, cfg)


def merge_documents(
    a: dict[str, Any],
    b: dict[str, Any],
    hot_cfg: HotConfig | None = None,
    tree_cfg: TreeConfig | None = None,
) -> MergeResult:
    """Merge two critical documents (pure; see the module docstring for the rules)."""
    x, y = _side(a), _side(b)
    if x.agent_id != y.agent_id:
        raise InvalidInput("the two critical documents belong to different agents")
    seen = dict(x.seen)
    for device, version in y.seen.items():
        seen[device] = max(seen.get(device, ""), version)
    out = _Side(
        agent_id=x.agent_id,
        values={},
        extra={},
        clocks={},
        seen=seen,
        conflicts={},
        updated_at=max(x.updated_at, y.updated_at),
    )
    items = set(x.values) | set(y.values) | set(x.clocks) | set(y.clocks)
    for item in sorted(items):
        _merge_item(out, item, x, y)
    _repair_tree(out, tree_cfg or TreeConfig())
    _repair_hot(out, hot_cfg or HotConfig())
    for cid in set(x.conflicts) | set(y.conflicts):
        both = [c for c in (x.conflicts.get(cid), y.conflicts.get(cid)) if c is not None]
        first = min(both, key=lambda c: clocks.canonical_json({**c, "resolved": False}))
        out.conflicts[cid] = {**first, "resolved": any(bool(c.get("resolved")) for c in both)}
    new: dict[str, dict[str, Any]] = {}
    for record in out.found:
        if record["id"] not in out.conflicts:
            new.setdefault(record["id"], record)
    out.conflicts.update(new)
    if len(out.conflicts) > conflictmod.SYNCED:
        newest = sorted(
            out.conflicts.values(),
            key=lambda c: (str(c.get("lost_version", "")), str(c["id"])),
            reverse=True,
        )[: conflictmod.SYNCED]
        out.conflicts = {str(c["id"]): c for c in newest}
    return MergeResult(_document(out), [new[cid] for cid in sorted(new)])


# -- into a home ----------------------------------------------------------------------------


def merge_remote(mem: Memory, remote_doc: dict[str, Any], device_id_hex: str) -> MergeOutcome:
    """Merge a pulled critical document into the local state, in one transaction: the merged
    hot state, tree, clocks and conflict records are written, MEMORY.md is regenerated (hand
    edits of it are read back first), and an outbox row is queued only when the merged state
    differs from the remote one (so the merge is pushed back once, and no device answers an
    identical state with another push)."""
    device = _device(device_id_hex)
    if isinstance(remote_doc, dict) and remote_doc.get("agent_id") != mem.agent_id:
        raise InvalidInput("the remote critical state belongs to another agent")
    _side(remote_doc)  # validate before touching anything
    mem.read_back_memory_md()
    now = mem.now()
    with mem.db.transaction():
        clocks.stamp(mem.db, mem.agent_id, now)
        local = snapshot.document(mem, device)
        result = merge_documents(local, remote_doc, mem.cfg.hot, mem.cfg.tree)
        merged = result.merged
        changed = snapshot.canonical(merged) != snapshot.canonical(local)
        if changed:
            hot, nodes = snapshot.parse(merged)
            snapshot.write_state(mem, hot, nodes)
            table, seen = snapshot.local_clocks(merged, device)
            values = clocks.item_values(hot, [(n[0], n[1]) for n in nodes])
            clocks.write(mem.db, mem.agent_id, values, table, seen)
            conflictmod.absorb(mem.db, mem.agent_id, list(merged["conflicts"]), now)
        push_back = snapshot.canonical(merged) != snapshot.canonical(remote_doc)
        if push_back:
            snapshot.enqueue(mem.db, mem.agent_id, "merge", now)
    if changed:
        mem.write_memory_md()
    return MergeOutcome(changed, len(result.conflicts), push_back)
