"""Merging a pulled memory version with this device's copy, field group by field group.

A memory record carries its lineage (`memory_record.Lineage`): the versions of the memory its
edit started from and the version of the last change of each field group. This device keeps,
per memory, the content it last pushed or pulled (`sync_memory_base`): the base its own edits
start from, so the groups that differ from it are changes made here and not pushed yet. A
pulled version is then

- already held, when this device's history covers it: nothing to do;
- an update, when its history covers everything held here and nothing changed here since:
  applied as it is;
- concurrent otherwise: each field group goes to the side that changed it; a group both sides
  changed to different values (a clash) keeps one value (a change not pushed yet from here,
  else the later change) and the other becomes a conflict record `memory/<id>`
  (`core.conflicts`), which the critical state carries to every device; a delete facing an edit
  keeps the memory and records the delete. A result that is not the pulled version is pushed
  again, so the server's newest version of the memory holds it (a restore reads only that).

Every device reaches the same result and the same records from the same two versions, so the
order of pushes and pulls does not matter. Tier moves, the source and the creation time merge
without a record (upkeep, not a person's edit); read counters merge apart (`core.reinforce`).
A record of an older device (no lineage) is ordered by its version alone, as it always was.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tiermem.core import clocks as clockmod
from tiermem.core import conflicts, outbox
from tiermem.core.db import Database
from tiermem.core.rows import MemoryRow
from tiermem.sync.memory_record import Extras, History, Lineage, MemoryVersion

__all__ = [
    "GROUPS",
    "UNGROUPED",
    "Outcome",
    "Synced",
    "content_of",
    "held_lineage",
    "load",
    "merge",
    "record_conflicts",
    "save",
    "seal_lineage",
]

GROUPS: Final[dict[str, tuple[str, ...]]] = {
    "text": ("text",),
    "category": ("category",),
    "importance": ("importance",),
    "metadata": ("urls", "commands", "paths"),
    "pinned": ("pinned",),
    "superseded": ("superseded_by", "superseded_at"),
    "valid_from": ("valid_from",),
    "tier": ("tier", "tier_changed_at"),
    "origin": ("source", "created_at"),
    "tags": (),
    "expires_at": (),
    "links": (),
}
"""The field groups a merge keeps apart (the last three are a record's extras)."""
UNGROUPED: Final = frozenset({"id", "access_count", "last_access", "size_bytes", "tokens"})
"""`MemoryRow` fields no group holds: the id, the read counters (merged apart, by device) and
the size and token count (they follow the text). Every other field needs a group: a test
fails on a new field that has none, so a synced field is never merged by accident."""
QUIET: Final = frozenset({"tier", "origin"})
"""Groups merged by their later change without a conflict record: upkeep, not a person's edit."""
ALIVE: Final = clockmod.ALIVE
REASON_CONCURRENT: Final = "changed on two devices"
REASON_DELETED: Final = "deleted on one device, changed on another"

Content = dict[str, Any]
"""A memory's value per field group (JSON values); None stands for a deleted memory."""


@dataclass(frozen=True)
class Synced:
    """The content this device last pushed or pulled of one memory."""

    version: str
    history: History
    clocks: dict[str, str]
    content: Content | None


@dataclass(frozen=True)
class Outcome:
    """What a pulled version does here. `content`: the result (None: deleted), written when
    `write`; `push`: the result is not the pulled version, so it goes out again; `synced`: the
    new base; `found`: conflict records (`core.conflicts` fields)."""

    write: bool
    content: Content | None
    push: bool
    synced: Synced
    found: list[dict[str, Any]] = field(default_factory=list)


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def content_of(row: MemoryRow, extras: Extras) -> Content:
    """A memory's value per field group."""
    out: Content = {}
    for group, names in GROUPS.items():
        values = {n: _json(getattr(row, n)) for n in names}
        if names:
            out[group] = values[names[0]] if len(names) == 1 else values
    return out | {
        "tags": list(extras.tags),
        "expires_at": extras.expires_at,
        "links": sorted(extras.links),
    }


def build(
    template: MemoryRow, content: Content, texts: list[MemoryRow]
) -> tuple[MemoryRow, Extras]:
    """The row and extras holding `content`, other fields from `template`; the size and token
    count follow the text from whichever row of `texts` holds it."""
    changes: dict[str, Any] = {}
    for group, names in GROUPS.items():
        for name in names:
            value = content[group] if len(names) == 1 else content[group][name]
            changes[name] = tuple(value) if isinstance(value, list) else value
    source = next((r for r in texts if r.text == content["text"]), template)
    changes |= {"size_bytes": source.size_bytes, "tokens": source.tokens}
    extras = Extras(tuple(content["tags"]), content["expires_at"], tuple(content["links"]))
    return dataclasses.replace(template, **changes), extras


# -- the stored base ------------------------------------------------------------------------


def load(db: Database, agent_id: str, memory_id: str) -> Synced | None:
    row = db.query_one(
        "SELECT version, history, clocks, content FROM sync_memory_base "
        "WHERE agent_id = ? AND id = ?",
        (agent_id, memory_id),
    )
    if row is None:
        return None
    content = None if row[3] is None else json.loads(row[3])
    return Synced(str(row[0]), json.loads(row[1]), json.loads(row[2]), content)


def save(db: Database, agent_id: str, memory_id: str, synced: Synced) -> None:
    """Keep `synced` as the base of the next local edit (inside the caller's transaction)."""
    content = None if synced.content is None else clockmod.canonical_json(synced.content)
    db.execute(
        "INSERT INTO sync_memory_base (agent_id, id, version, history, clocks, content) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, id) DO UPDATE SET "
        "version = excluded.version, history = excluded.history, clocks = excluded.clocks, "
        "content = excluded.content",
        (
            agent_id,
            memory_id,
            synced.version,
            clockmod.canonical_json(synced.history),
            clockmod.canonical_json(synced.clocks),
            content,
        ),
    )


def _device(version: str) -> str:
    return clockmod.split_version(version)[1]


def _union(*histories: Mapping[str, str]) -> History:
    out: History = {}
    for history in histories:
        for device, version in history.items():
            out[device] = max(out.get(device, ""), version)
    return out


def _with(history: Mapping[str, str], version: str) -> History:
    return _union(history, {_device(version): version}) if version else dict(history)


def seal_lineage(
    synced: Synced | None, content: Content | None, version: str, known: str
) -> tuple[Lineage, Synced]:
    """The lineage of a local change sealed as `version` (`content` None: a delete) and the
    base it leaves: it starts from the stored base `synced` (else from `known`, the content
    version held here, every group new); a group keeps its clock unless it differs from the
    base."""
    if synced is None:
        synced = Synced(known, _with({}, known), {}, None)
    stamps = {g: synced.clocks.get(g) or synced.version for g in GROUPS}  # a delete keeps them
    if content is not None:
        before = synced.content or {}
        for group in content:
            if group not in before or before[group] != content[group]:
                stamps[group] = version
    after = Synced(version, _with(synced.history, version), stamps, content)
    return Lineage(dict(synced.history), _compact(stamps, synced.history, version)), after


def held_lineage(synced: Synced) -> Lineage:
    """The lineage of the content held (`synced`), for a record that carries only read
    counters on it."""
    return Lineage(dict(synced.history), _compact(synced.clocks, synced.history, synced.version))


def _compact(stamps: dict[str, str], base: History, version: str) -> dict[str, str]:
    """The clocks as a record holds them (`memory_record.Lineage`): '' for `version`, none
    for the newest version of `base`."""
    implied = max(base.values(), default=version)
    return {g: "" if at == version else at for g, at in stamps.items() if at != implied}


def _expand(lineage: Lineage, version: str) -> dict[str, str]:
    """Every group's clock of a record of content `version` (undoing `_compact`)."""
    implied = max(lineage.base.values(), default=version)
    return {g: (lineage.clocks.get(g, implied) or version) for g in GROUPS}


# -- the merge ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One side of a merge: the versions it holds, each group's clock, its content (None:
    deleted) and, for this device, the groups changed here and not pushed yet."""

    version: str
    history: History
    clocks: dict[str, str]
    content: Content | None
    pending: frozenset[str] = frozenset()
    legacy: bool = False
    """A record of an older device: it holds every version up to its own."""

    def clock(self, group: str) -> str:
        return self.clocks.get(group) or self.version

    def covers(self, version: str) -> bool:
        if not version:
            return True
        if self.legacy:
            return version <= self.version
        return self.history.get(_device(version), "") >= version

    def newest(self) -> str:
        return max([self.version, *self.clocks.values()])


def local_side(
    synced: Synced | None, current: Content | None, known: str, dirty: bool
) -> Side | None:
    """This device's side: the stored base with what changed here since; None when this
    device holds nothing of the memory."""
    if synced is None:
        if current is None and not known:
            return None
        every = frozenset(current or {}) if dirty or not known else frozenset()
        return Side(known, _with({}, known), {}, current, every | ({ALIVE} if dirty else set()))
    base = synced.content
    if current is None or base is None:
        pending = frozenset({ALIVE}) if (current is None) != (base is None) else frozenset()
    else:
        pending = frozenset(g for g in current if base.get(g) != current[g])
    return Side(synced.version, synced.history, synced.clocks, current, pending)


def remote_side(got: MemoryVersion, version: str, content: Content | None) -> Side:
    lineage = got.lineage
    if lineage is None:
        return Side(version, {_device(version): version}, {}, content, legacy=True)
    return Side(version, _with(lineage.base, version), _expand(lineage, version), content)


def merge(local: Side | None, remote: Side, own_device: str) -> Outcome:
    """What the pulled side `remote` does to `local` (see the module docstring)."""
    if local is None:
        return _take(remote, remote)
    if local.covers(remote.version) and not (remote.legacy and local.pending):
        return Outcome(False, local.content, False, _kept(local, remote))
    seen = all(remote.covers(v) for v in local.history.values())
    if seen and not local.pending:
        return _take(remote, local)
    if local.content is None or remote.content is None:
        return _existence(local, remote, own_device)
    return _groups(local, remote, local.content, remote.content)


def _take(remote: Side, local: Side) -> Outcome:
    history = _union(local.history, remote.history)
    clocks = {g: remote.clock(g) for g in remote.content or {}}
    synced = Synced(remote.version, history, clocks, remote.content)
    return Outcome(True, remote.content, False, synced)


def _kept(local: Side, remote: Side) -> Synced:
    return Synced(local.version, _union(local.history, remote.history), local.clocks, local.content)


def _record(
    item: str, group: str, kept: tuple[Any, str], lost: tuple[Any, str], device: str, why: str
) -> dict[str, Any]:
    return {
        "item": item,
        "field": group,
        "kept": kept[0],
        "lost": lost[0],
        "kept_version": kept[1],
        "lost_version": lost[1],
        "lost_device": _device(lost[1]) if lost[1] else device,
        "reason": why,
    }


def _survives(live: Side, dead: Side, group: str) -> bool:
    """Whether the live side's change of `group` is one the deleting side had not seen and
    that would have won that group against the deleting side's own last change of it (a
    delete keeps its content's clocks): upkeep groups never keep a memory alive."""
    at = live.clock(group)
    if group in QUIET:
        return False
    return not dead.covers(at) and at > dead.clocks.get(group, "")


def _existence(local: Side, remote: Side, own_device: str) -> Outcome:
    """A delete on one side facing the other: a change the deleting side had not seen, and
    that survives its own changes, keeps the memory (and the delete is recorded); otherwise
    the memory stays deleted. Both sides decide the same from the same two versions."""
    history = _union(local.history, remote.history)
    newest = remote if remote.version > local.version else local
    if local.content is None and remote.content is None:
        return Outcome(False, None, False, _kept(local, remote))
    live, dead = (remote, local) if local.content is None else (local, remote)
    assert live.content is not None
    unseen = any(_survives(live, dead, g) for g in live.content)
    unseen |= live is local and bool(local.pending - QUIET)
    dead_version = "" if dead is local and ALIVE in local.pending else dead.version
    if not unseen:
        clocks = {g: max(live.clock(g), dead.clocks.get(g, "")) for g in GROUPS}
        synced = Synced(max(local.version, remote.version), history, clocks, None)
        pushed = newest.content is not None or (dead is local and ALIVE in local.pending)
        return Outcome(local.content is not None, None, pushed, synced)
    live_version = "" if live is local and local.pending else live.newest()
    text = live.content["text"]
    found = _record("", ALIVE, (text, live_version), (None, dead_version), "", REASON_DELETED)
    clocks = {g: live.clock(g) for g in live.content}
    base = remote.content if live is local and local.pending and remote.content else live.content
    synced = Synced(max(local.version, remote.version), history, clocks, base)
    pushed = newest is dead or (live is local and bool(local.pending))
    return Outcome(live is remote, live.content, pushed, synced, [found])


def _groups(local: Side, remote: Side, mine: Content, theirs: Content) -> Outcome:
    """Both sides hold the memory: each group goes to the side that changed it."""
    result: Content = {}
    base: Content = {}
    stamps: dict[str, str] = {}
    found: list[dict[str, Any]] = []
    for group in theirs:
        ours, other = mine.get(group), theirs[group]
        ours_at, other_at = local.clock(group), remote.clock(group)
        if ours == other:
            result[group], base[group], stamps[group] = ours, ours, max(ours_at, other_at)
            continue
        pending = group in local.pending
        changed_here = pending or not remote.covers(ours_at)
        changed_there = not local.covers(other_at)
        if changed_here == changed_there:  # a clash (or sides that disagree on the past)
            here_wins = pending or (ours_at, _key(ours)) > (other_at, _key(other))
            if changed_here and group not in QUIET:
                kept, lost = ((ours, "" if pending else ours_at), (other, other_at))
                if not here_wins:
                    kept, lost = (other, other_at), (ours, ours_at)
                found.append(_record("", group, kept, lost, "", REASON_CONCURRENT))
        else:
            here_wins = changed_here
        result[group] = ours if here_wins else other
        keep_here = here_wins and not pending
        base[group] = ours if keep_here else other
        stamps[group] = ours_at if keep_here else other_at
    history = _union(local.history, remote.history)
    synced = Synced(max(local.version, remote.version), history, stamps, base)
    # pushed again when the server's newest version does not hold the result (a change made
    # here and not pushed yet is pushed anyway)
    on_server = theirs if local.pending or remote.version > local.version else mine
    return Outcome(result != mine, result, result != on_server, synced, found)


def _key(value: Any) -> str:
    return clockmod.canonical_json(value)


def record_conflicts(
    db: Database,
    agent_id: str,
    memory_id: str,
    found: list[dict[str, Any]],
    own_device: str,
    now: float,
) -> int:
    """Keep the records a merge found (inside the caller's transaction) and queue the
    critical state, which carries them to every device. Returns how many."""
    for r in found:
        conflicts.record_conflict(
            db,
            agent_id,
            f"memory/{memory_id}",
            r["field"],
            r["kept"],
            r["lost"],
            r["kept_version"],
            r["lost_version"],
            r["lost_device"] or own_device,
            now,
            reason=r["reason"],
        )
    if found:
        outbox.enqueue(db, agent_id, "conflict", now)
    return len(found)
