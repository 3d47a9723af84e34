"""Per-field clocks of the critical state (hot + tree), so two devices' edits merge per field.

The critical state is seen as *items* of *fields*: the mappings `identity` and `owner_profile`
(a field per key), `lesson/<id>`, `event/<id>`, `task/<id>`, `project/<id>` (their fields, plus
`alive`) and `tree/<path>` (its description, plus `alive`). Each field has the hybrid-logical-
clock stamp of its last change and a digest of its value (table `crit_clocks`). A deletion is a
change too: the removed mapping key, or the item's `alive` field, keeps a tombstone stamp (digest
''), so "deleted on the phone, edited on the desktop" is decided by time like any other edit.
An edit of any field of an item also restamps its `alive`, so an edit after a delete revives the
item and a delete after every edit removes it.

**Stamping is eager**: `stamp` runs in the transaction of every change of critical state
(`outbox.enqueue` calls it) and diffs the state against the stored digests, so a field gets
the clock of the moment it changed on this device, not of the next push (a phone offline for a
day must not win against an edit made on the desktop in between). A later `stamp` catches up
anything changed without one (it is also called before every merge and document).

Stamps here are ``wall_ms.counter`` (18 + 6 digits, so text order is time order), the HLC of
`tiermem.sync.hlc` without its device part (core does not import sync); the writer is a column,
'' for this device (its id is only known once sync is set up). `crit_seen` holds, per writer,
the newest stamp merged into this state: a version vector, so a merge can tell a value that was
overwritten knowingly from one that was written concurrently (a conflict).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from tiermem.core import hot as hotmod
from tiermem.core.db import Database

MAPPINGS = ("identity", "owner_profile")
ALIVE = "alive"
DEAD = ""
"""The digest of a deleted value (a tombstone)."""
LIVE = "alive"
"""The digest of a present item's `alive` field."""
LOCAL = ""
"""The writer column for this device's own stamps."""

FIELDS: dict[str, tuple[str, ...]] = {
    "lesson": ("text", "category", "importance", "timestamp", "source_id"),
    "event": ("text", "timestamp"),
    "task": ("text", "status", "timestamp"),
    "project": ("name", "description", "status", "updated_at"),
    "tree": ("description",),
}

TOMBSTONE_DAYS = 90
"""How long a deletion is remembered (see `forget_tombstones`)."""
_COUNTER_MAX = 999_999
_VERSION = re.compile(r"[0-9]{18}\.[0-9]{6}\.[0-9a-f]{32}")

Clocks = dict[str, dict[str, tuple[str, str]]]
"""item → field → (stamp, writer device hex or LOCAL)."""
Digests = dict[str, dict[str, str]]
"""item → field → the digest its clock was stamped for."""


def kind(item: str) -> str:
    """'lesson/ab12' → 'lesson'; a mapping item is its own kind."""
    return item.partition("/")[0]


def item_values(
    hot: hotmod.HotState, nodes: Iterable[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """The clocked fields of every present item. `nodes`: (path, description) of the tree."""
    ctx = hot.active_context
    out: dict[str, dict[str, Any]] = {
        "identity": dict(hot.identity),
        "owner_profile": dict(hot.owner_profile),
    }
    groups: list[tuple[str, Iterable[Any]]] = [
        ("lesson", hot.critical_lessons),
        ("event", ctx.events),
        ("task", ctx.tasks),
        ("project", ctx.projects),
    ]
    for name, entries in groups:
        for entry in entries:
            out[f"{name}/{entry.id}"] = {f: getattr(entry, f) for f in FIELDS[name]}
    for path, description in nodes:
        out[f"tree/{path}"] = {"description": description}
    return out


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""`json.dumps` with these options, built once (every push digests every clocked field)."""


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


def _digest(value: Any) -> str:
    import hashlib  # only naming new items hashes: reads skip loading OpenSSL

    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


_DIGESTS: dict[tuple[type, Any], str] = {}
"""Digests of scalar values by (type, value): a push digests every clocked field of the state
to find what changed, and nearly all of them are the same texts and numbers as last time."""
_DIGESTS_MAX = 16_384


def digest(value: Any) -> str:
    """The first 16 hex digits of SHA-256 of the value's canonical JSON (what `crit_clocks`
    stores). Texts, integers and non-zero floats are remembered by type and value (1, 1.0 and
    True differ in JSON, and so do 0.0 and -0.0, which are equal keys: zeros are not kept)."""
    cls = value.__class__
    if not (cls is str or cls is int or (cls is float and value)):
        return _digest(value)
    key = (cls, value)
    known = _DIGESTS.get(key)
    if known is None:
        if len(_DIGESTS) >= _DIGESTS_MAX:
            _DIGESTS.clear()
        known = _DIGESTS[key] = _digest(value)
    return known


def field_digests(values: dict[str, dict[str, Any]], clocks: Clocks) -> dict[tuple[str, str], str]:
    """The digest each clocked field should have for `values` (tombstones for the rest)."""
    out: dict[tuple[str, str], str] = {}
    for item, fields in clocks.items():
        present = values.get(item)
        for field in fields:
            if present is None:
                out[item, field] = DEAD
            elif field == ALIVE and item not in MAPPINGS:
                out[item, field] = LIVE
            else:
                out[item, field] = digest(present[field]) if field in present else DEAD
    return out


# -- hybrid logical clock stamps -------------------------------------------------------------


def stamp_text(wall_ms: int, counter: int) -> str:
    return f"{wall_ms:018d}.{counter:06d}"


def next_stamp(last: str | None, now_ms: int) -> str:
    """After `last` (the newest stamp seen), at the wall clock when that is later (HLC tick)."""
    if not last:
        return stamp_text(max(now_ms, 0), 0)
    wall, _, counter = last.partition(".")
    last_wall, last_counter = int(wall), int(counter)
    if now_ms > last_wall:
        return stamp_text(now_ms, 0)
    if last_counter < _COUNTER_MAX:
        return stamp_text(last_wall, last_counter + 1)
    return stamp_text(last_wall + 1, 0)


def version(stamp: str, device: str) -> str:
    """The full HLC text (`tiermem.sync.hlc` format) of a stamp by `device`."""
    return f"{stamp}.{device}"


def split_version(text: str) -> tuple[str, str]:
    """'wall.counter.device' → ('wall.counter', 'device')."""
    stamp, _, device = text.rpartition(".")
    return stamp, device


def check_version(text: Any) -> str:
    """A document's version text, validated (ValueError if it is not an HLC)."""
    if not isinstance(text, str) or not _VERSION.fullmatch(text):
        raise ValueError("a clock is not a hybrid-logical-clock version")
    return text


# -- clocks in a document ---------------------------------------------------------------------


_FIELD_SETS: Final = {name: frozenset((ALIVE, *fields)) for name, fields in FIELDS.items()}
_ALIVE_ONLY: Final = frozenset((ALIVE,))


def _field_set(item: str, values: dict[str, dict[str, Any]]) -> frozenset[str]:
    """The clocked fields of a (non-mapping) item: all of them if present, else `alive`."""
    expected = _FIELD_SETS.get(kind(item))
    if expected is None:
        raise ValueError(f"unknown critical-state item {item[:40]!r}")
    return expected if item in values else _ALIVE_ONLY


def compact(table: dict[str, dict[str, str]], values: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A document's `clocks`: per item one version text when all its fields share it (an item
    written once, a tombstone), else {field: version}. Keeps the document small."""
    out: dict[str, Any] = {}
    for item, fields in sorted(table.items()):
        if not fields:
            continue
        versions = set(fields.values())
        if (
            item not in MAPPINGS
            and len(versions) == 1
            and fields.keys() == _field_set(item, values)
        ):
            out[item] = versions.pop()
        else:
            out[item] = dict(sorted(fields.items()))
    return out


_Entry = tuple[dict[str, tuple[str, str]], bool, str, "str | dict[str, str] | None"]
_ENTRIES: dict[str, _Entry] = {}
"""Per item, its last `document_clocks` entry and what it was made from: every push builds the
clocks of every item, and all but the ones just changed come out as the time before."""
_ENTRIES_MAX = 16_384


def document_clocks(rows: Clocks, values: dict[str, dict[str, Any]], device: str) -> dict[str, Any]:
    """`compact` of the clocks `read` gives, with this device's own stamps under `device`."""
    out: dict[str, Any] = {}
    for item, fields in sorted(rows.items()):
        present = item in values
        known = _ENTRIES.get(item)
        if known is not None and known[1] is present and known[2] == device and known[0] == fields:
            entry = known[3]
        else:
            texts = {
                field: version(stamp, writer or device) for field, (stamp, writer) in fields.items()
            }
            entry = compact({item: texts}, values).get(item)
            if len(_ENTRIES) >= _ENTRIES_MAX:
                _ENTRIES.clear()
            _ENTRIES[item] = (dict(fields), present, device, entry)
        if entry is not None:
            out[item] = entry if isinstance(entry, str) else dict(entry)
    return out


def expand(doc_clocks: Any, values: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The inverse of `compact`, validated (ValueError if malformed)."""
    if not isinstance(doc_clocks, dict):
        raise ValueError("clocks are not an object")
    out: dict[str, dict[str, str]] = {}
    for item, entry in doc_clocks.items():
        if isinstance(entry, str) and item not in MAPPINGS:
            out[str(item)] = {f: check_version(entry) for f in _field_set(str(item), values)}
        elif isinstance(entry, dict):
            out[str(item)] = {str(f): check_version(v) for f, v in entry.items()}
        else:
            raise ValueError(f"malformed clock of {str(item)[:40]!r}")
    return out


# -- the tables ------------------------------------------------------------------------------


def current_values(db: Database, agent_id: str) -> dict[str, dict[str, Any]]:
    raw = db.scalar("SELECT data FROM hot_state WHERE agent_id = ?", (agent_id,))
    hot = hotmod.HotState() if raw is None else hotmod.decode(raw)
    nodes = db.query("SELECT path, description FROM tree_nodes WHERE agent_id = ?", (agent_id,))
    return item_values(hot, [(str(p), str(d)) for p, d in nodes])


def read(db: Database, agent_id: str) -> tuple[Clocks, dict[str, str]]:
    """(clocks, seen): seen maps writer device (LOCAL for this one) → newest stamp merged."""
    stored = _Stored.read(db, agent_id)
    return stored.clocks, stored.seen


_READ_ALL: Final = (
    # Every column is text, so JSON carries them exactly: one value through the driver
    # instead of five per clock (a few hundred clocks: about half the time).
    "SELECT (SELECT json_group_array(json_array(item, field, stamp, device, digest)) "
    "FROM crit_clocks WHERE agent_id = ?1), "
    "(SELECT json_group_array(json_array(device, stamp)) FROM crit_seen WHERE agent_id = ?1)"
)


@dataclass(frozen=True)
class _Stored:
    """Both tables as read in one statement."""

    clocks: Clocks
    digests: Digests
    seen: dict[str, str]
    oldest_tombstone: str | None

    @classmethod
    def read(cls, db: Database, agent_id: str) -> _Stored:
        row = db.query_one(_READ_ALL, (agent_id,))
        assert row is not None
        table: Clocks = {}
        digests: Digests = {}
        oldest: str | None = None
        for item, field, stamp_, device, d in msgspec.json.decode(row[0], type=_ClockRows):
            table.setdefault(item, {})[field] = (stamp_, device)
            digests.setdefault(item, {})[field] = d
            if d == DEAD and (oldest is None or stamp_ < oldest):
                oldest = stamp_
        seen = dict(msgspec.json.decode(row[1], type=list[tuple[str, str]]))
        return cls(table, digests, seen, oldest)

    @property
    def newest_seen(self) -> str | None:
        """The newest stamp merged from any device (what a new stamp must follow)."""
        return max(self.seen.values()) if self.seen else None


_ClockRows = list[tuple[str, str, str, str, str]]


def write(
    db: Database,
    agent_id: str,
    values: dict[str, dict[str, Any]],
    clocks: Clocks,
    seen: dict[str, str],
) -> None:
    """Replace the agent's clocks and seen vector (digests computed from `values`)."""
    digests = field_digests(values, clocks)
    db.execute("DELETE FROM crit_clocks WHERE agent_id = ?", (agent_id,))
    db.execute("DELETE FROM crit_seen WHERE agent_id = ?", (agent_id,))
    rows = [
        (agent_id, item, field, stamp, device, digests[item, field])
        for item, fields in sorted(clocks.items())
        for field, (stamp, device) in sorted(fields.items())
    ]
    if rows:
        db.executemany(
            "INSERT INTO crit_clocks (agent_id, item, field, stamp, device, digest) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
    if seen:
        db.executemany(
            "INSERT INTO crit_seen (agent_id, device, stamp) VALUES (?, ?, ?)",
            [(agent_id, d, s) for d, s in sorted(seen.items())],
        )


_NONE: Final[dict[str, str]] = {}


def changes(
    values: dict[str, dict[str, Any]], stored: dict[tuple[str, str], str]
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """What to stamp to make `stored` (digest per (item, field)) describe `values`:
    ([(item, field, new digest)], [(item, field) clocks to drop: fields of deleted items])."""
    by_item: Digests = {}
    for (item, field), d in stored.items():
        by_item.setdefault(item, {})[field] = d
    return _changes(values, by_item)


def _changes(
    values: dict[str, dict[str, Any]], stored: Digests
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """`changes`, the digests by item."""
    stamp: list[tuple[str, str, str]] = []
    drop: list[tuple[str, str]] = []
    for item, fields in values.items():
        known = stored.get(item, _NONE)
        touched = False
        for field, value in fields.items():
            d = digest(value)
            if known.get(field) != d:
                stamp.append((item, field, d))
                touched = True
        if item not in MAPPINGS and (touched or known.get(ALIVE) != LIVE):
            stamp.append((item, ALIVE, LIVE))
    for item, known in stored.items():
        present = values.get(item)
        if item in MAPPINGS:
            for field, d in known.items():
                if (present is None or field not in present) and d != DEAD:
                    stamp.append((item, field, DEAD))
        elif present is None:
            for field, d in known.items():
                if field != ALIVE:
                    drop.append((item, field))
                elif d != DEAD:
                    stamp.append((item, ALIVE, DEAD))
    return stamp, drop


def forget_tombstones(db: Database, agent_id: str, newest: str) -> None:
    """Drop tombstones older than `TOMBSTONE_DAYS` before the newest stamp seen (not the wall
    clock, so every device holding the same state drops the same ones). Without this the
    document would grow forever (events roll over every conversation). A device that was
    offline for longer may bring such an item back: the usual price of a bounded history."""
    horizon = _tombstone_horizon(newest)
    if horizon is not None:
        db.execute(
            "DELETE FROM crit_clocks WHERE agent_id = ? AND digest = ? AND stamp < ?",
            (agent_id, DEAD, horizon),
        )


def _tombstone_horizon(newest: str) -> str | None:
    """The stamp before which `forget_tombstones(newest)` drops tombstones (None: none)."""
    wall = int(newest.partition(".")[0]) - TOMBSTONE_DAYS * 86_400_000
    return stamp_text(wall, 0) if wall > 0 else None


def stamp(db: Database, agent_id: str, now: float) -> str | None:
    """Stamp every field changed since the last stamp with one new HLC stamp (inside the
    caller's transaction). Returns the stamp, or None when nothing changed."""
    stored = _Stored.read(db, agent_id)
    todo, drop = _changes(current_values(db, agent_id), stored.digests)
    return _stamp(db, agent_id, now, stored.newest_seen, todo, drop)


def stamped(
    db: Database, agent_id: str, now: float, values: dict[str, dict[str, Any]]
) -> tuple[Clocks, dict[str, str]]:
    """`stamp` for the state `values` (inside the caller's transaction), then the clocks and
    seen vector as `read` gives them; the tables are read once when there is nothing to write,
    the usual case (every change is stamped when it is made)."""
    stored = _Stored.read(db, agent_id)
    last = stored.newest_seen
    todo, drop = _changes(values, stored.digests)
    if todo or drop or _forgettable(stored.oldest_tombstone, last):
        _stamp(db, agent_id, now, last, todo, drop)
        stored = _Stored.read(db, agent_id)
    return stored.clocks, stored.seen


def _forgettable(oldest: str | None, newest: str | None) -> bool:
    """Whether `forget_tombstones(newest)` would drop the tombstone stamped `oldest`."""
    if oldest is None or newest is None:
        return False
    horizon = _tombstone_horizon(newest)
    return horizon is not None and oldest < horizon


def _stamp(
    db: Database,
    agent_id: str,
    now: float,
    last: str | None,
    todo: list[tuple[str, str, str]],
    drop: list[tuple[str, str]],
) -> str | None:
    """Write the stamps `changes` found, one new stamp after `last` for all of them."""
    if not todo and not drop:
        if last is not None:
            forget_tombstones(db, agent_id, last)
        return None
    new = next_stamp(last, int(now * 1000))
    if todo:
        db.executemany(
            "INSERT INTO crit_clocks (agent_id, item, field, stamp, device, digest) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, item, field) DO UPDATE SET "
            "stamp = excluded.stamp, device = excluded.device, digest = excluded.digest",
            [(agent_id, item, field, new, LOCAL, d) for item, field, d in todo],
        )
    if drop:
        db.executemany(
            "DELETE FROM crit_clocks WHERE agent_id = ? AND item = ? AND field = ?",
            [(agent_id, item, field) for item, field in drop],
        )
    db.execute(
        "INSERT INTO crit_seen (agent_id, device, stamp) VALUES (?, ?, ?) "
        "ON CONFLICT (agent_id, device) DO UPDATE SET stamp = max(stamp, excluded.stamp)",
        (agent_id, LOCAL, new),
    )
    forget_tombstones(db, agent_id, max(new, last or ""))
    return new
