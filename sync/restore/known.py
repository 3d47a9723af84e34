"""What this home knows the server held (its own confirmed pushes, the pushes it pulled from
other devices, the newest critical state): `sync check` reports a server behind it."""

from __future__ import annotations

from tiermem.sync.session import Session

__all__ = ["confirmed_counters", "critical_version"]


def confirmed_counters(engine: Session, own_hex: str) -> dict[str, int]:
    """Per device, the highest push number this home knows the server confirmed or held:
    its own pushes (the batches still in flight are not confirmed) and other devices' pulled
    manifests."""
    db, agent = engine.db, engine.agent_id
    known: dict[str, int] = {}
    own = db.query_one("SELECT manifest_n FROM sync_progress WHERE agent_id = ?", (agent,))
    if own is not None:
        inflight = int(db.scalar("SELECT count(*) FROM sync_batches WHERE agent_id = ?", (agent,)))
        if int(own[0]) - inflight > 0:
            known[own_hex] = int(own[0]) - inflight
    for device, n in db.query(
        "SELECT device_id, last_n FROM sync_peers WHERE agent_id = ?", (agent,)
    ):
        if str(device) != own_hex:
            known[str(device)] = max(known.get(str(device), 0), int(n))
    return known


def critical_version(engine: Session) -> str:
    """The newest critical-state version this home pushed (confirmed) or applied."""
    row = engine.db.query_one(
        "SELECT critical_version FROM sync_progress WHERE agent_id = ?", (engine.agent_id,)
    )
    return "" if row is None else str(row[0])
