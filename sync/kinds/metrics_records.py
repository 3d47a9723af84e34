"""Daily metrics across devices: each device pushes its own counts as one ``metrics`` record
(key: its device id), end-to-end encrypted like every record.

**Merge.** Counters (retrievals, stores, evictions, promotions, context tokens) are summed per
device: each device counts only its own events, so the vault's day is the sum of every device's
latest record; a record applied twice or out of order replaces that device's share and never
counts twice. Gauges (sizes of the shared state: memories, hot bytes, tree nodes, …) take the
maximum: every device holds the same state after a sync, so adding them would multiply it, and
the maximum is order-free and idempotent.

Locally `metrics_daily` keeps what `tiermem stats` shows (this device's counts plus every other
device's share); ``sync_metrics`` keeps each other device's latest share, so this device's own
counts are the difference.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

from tiermem.core.db import Database
from tiermem.core.metrics import COUNTERS, GAUGES
from tiermem.sync import crypto
from tiermem.sync.records import FORMAT, METRICS_TABLE, canonical

__all__ = ["METRICS_TABLE", "apply_metrics", "decode_metrics", "own_metrics"]

Days = dict[str, dict[str, int]]
_NAMES: Final = COUNTERS + GAUGES


def own_metrics(db: Database, agent_id: str, device_hex: str) -> tuple[bytes, str] | None:
    """This device's own daily metrics as a record payload and its digest (None: no metrics)."""
    days: Days = {}
    for r in db.query(
        f"SELECT day, {', '.join(_NAMES)} FROM metrics_daily WHERE agent_id = ? ORDER BY day",
        (agent_id,),
    ):
        days[str(r[0])] = {n: int(v) for n, v in zip(_NAMES, r[1:], strict=True)}
    for r in db.query(
        f"SELECT day, {', '.join(COUNTERS)} FROM sync_metrics WHERE agent_id = ?", (agent_id,)
    ):
        mine = days.get(str(r[0]))
        if mine is not None:
            for n, v in zip(COUNTERS, r[1:], strict=True):
                mine[n] = max(0, mine[n] - int(v))
    if not days:
        return None
    body = canonical({"format": FORMAT, "device": device_hex, "days": days})
    return body, hashlib.sha256(body).hexdigest()


def decode_metrics(plaintext: bytes, device_hex: str) -> Days:
    """A metrics payload, checked (a malformed one is damage)."""
    try:
        data = json.loads(plaintext)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a metrics record")
        if data.get("device") != device_hex:
            raise crypto.TamperedData("a metrics record names another device")
        days: Days = {}
        for day, values in data["days"].items():
            if not isinstance(day, str) or not isinstance(values, dict):
                raise ValueError("a day is malformed")
            days[day] = {n: _count(values.get(n, 0)) for n in _NAMES}
        return days
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, crypto.TamperedData):
            raise
        raise crypto.TamperedData(f"a metrics record is malformed ({exc})") from None


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("a metric is not a count")
    return value


def apply_metrics(db: Database, agent_id: str, device_hex: str, version: str, days: Days) -> bool:
    """Bring another device's newest share into `metrics_daily` (inside the caller's
    transaction): counters by the difference with its share applied before, gauges by the
    maximum. An older version than the one applied is ignored. Returns whether it applied."""
    held = db.scalar(
        "SELECT max(version) FROM sync_metrics WHERE agent_id = ? AND device_id = ?",
        (agent_id, device_hex),
    )
    if held is not None and str(held) >= version:
        return False
    before = {
        str(r[0]): [int(v) for v in r[1:]]
        for r in db.query(
            f"SELECT day, {', '.join(COUNTERS)} FROM sync_metrics "
            "WHERE agent_id = ? AND device_id = ?",
            (agent_id, device_hex),
        )
    }
    for day, values in days.items():
        old = before.get(day, [0] * len(COUNTERS))
        deltas = [values[n] - o for n, o in zip(COUNTERS, old, strict=True)]
        sets = [f"{n} = max(0, {n} + ?)" for n in COUNTERS] + [f"{g} = max({g}, ?)" for g in GAUGES]
        db.execute(
            "INSERT OR IGNORE INTO metrics_daily (agent_id, day) VALUES (?, ?)", (agent_id, day)
        )
        db.execute(
            f"UPDATE metrics_daily SET {', '.join(sets)} WHERE agent_id = ? AND day = ?",
            (*deltas, *[values[g] for g in GAUGES], agent_id, day),
        )
    db.execute(
        "DELETE FROM sync_metrics WHERE agent_id = ? AND device_id = ?", (agent_id, device_hex)
    )
    db.executemany(
        f"INSERT INTO sync_metrics (agent_id, device_id, day, version, {', '.join(COUNTERS)}) "
        f"VALUES (?, ?, ?, ?, {', '.join('?' * len(COUNTERS))})",
        [
            (agent_id, device_hex, day, version, *[values[n] for n in COUNTERS])
            for day, values in days.items()
        ],
    )
    return True
