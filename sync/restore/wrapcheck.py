"""Checking the vault's key wraps (`sync check`): every wrap the current epoch needs exists
and authenticates where this device can tell, removed devices hold no current wrap, and every
older epoch is reachable through the chain."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tiermem.core.errors import DeviceRevoked
from tiermem.sync import crypto, records
from tiermem.sync.devices.epochs import (
    CHAIN,
    ID_EPOCH,
    current_key,
    device_entries,
    query,
    refresh_epoch,
    remember,
    unlock_chain,
)
from tiermem.sync.session import Session
from tiermem.sync.state import Settings, device_wrap_id, wrap_id
from tiermem.sync.vault import store

__all__ = ["WrapProblem", "check_wraps"]

_Find = Callable[..., bytes | None]
"""``find(kind, epoch, extra=b"")``: the wrap's blob on the server, None when missing."""


@dataclass(frozen=True)
class WrapProblem:
    """One thing wrong with the key wraps. ``kind``: 'missing' (a wrap that must exist does
    not), 'unauthenticated' (a wrap or device entry fails authentication), 'mismatch' (differs
    from this device's copy), 'revoked-has-key' (a removed device holds a current wrap),
    'revoked' (this device itself was removed), 'chain' (an older epoch is unreachable)."""

    kind: str
    epoch: int
    subject: str
    message: str


def check_wraps(engine: Session) -> list[WrapProblem]:
    """Every wrap the vault needs for its current epoch exists and, where this device can tell,
    authenticates; every older epoch is reachable through the chain. Two remote reads."""
    try:
        refresh_epoch(engine)
    except DeviceRevoked as exc:
        s = engine.require_ready()
        return [WrapProblem("revoked", s.epoch, s.device_id.hex(), str(exc))]
    except crypto.TamperedData as exc:
        s = engine.require_ready()
        return [WrapProblem("chain", s.epoch, "epoch", str(exc))]
    s = engine.require_ready()
    epoch, key = current_key(engine, s)
    rows = query(engine, *store.wraps(s.tag))
    by_id = {
        records.server_blob(wid): (int(str(e)), str(kind), records.server_blob(blob))
        for e, kind, wid, blob in rows
    }

    def find(kind: str, e: int, extra: bytes = b"") -> bytes | None:
        found = by_id.get(wrap_id(s.tag, e, kind, extra))
        return None if found is None or found[:2] != (e, kind) else found[2]

    problems = _check_secret_wraps(s, epoch, find)
    problems += _check_devices(engine, s, key, find)
    problems += _check_chain(engine, epoch, key, find)
    return problems


def _check_secret_wraps(s: Settings, epoch: int, find: _Find) -> list[WrapProblem]:
    """The recovery-key and passphrase wraps: there, and the ones this device saved."""
    problems: list[WrapProblem] = []
    recovery = find("recovery", epoch)
    if recovery is None:
        problems.append(
            WrapProblem(
                "missing", epoch, "recovery", f"no recovery-key wrap for the current epoch {epoch}"
            )
        )
    elif recovery != s.recovery_wrap:
        problems.append(
            WrapProblem(
                "mismatch",
                epoch,
                "recovery",
                "the server's recovery-key wrap differs from the one this device saved",
            )
        )
    passphrase = find("passphrase", epoch)
    if s.passphrase_wrap is None and passphrase is not None:
        problems.append(
            WrapProblem(
                "mismatch",
                epoch,
                "passphrase",
                "the server holds a passphrase wrap this device never saw (a passphrase there "
                "may unlock a key of someone else's making)",
            )
        )
    if s.passphrase_wrap is not None:
        if passphrase is None:
            problems.append(
                WrapProblem("missing", epoch, "passphrase", "the passphrase wrap is missing")
            )
        elif passphrase != s.passphrase_wrap:
            problems.append(
                WrapProblem(
                    "mismatch",
                    epoch,
                    "passphrase",
                    "the server's passphrase wrap differs from the one this device saved",
                )
            )
    return problems


def _check_chain(engine: Session, epoch: int, key: bytes, find: _Find) -> list[WrapProblem]:
    """Every older epoch's key is reachable from the current one through the chain wraps."""
    problems: list[WrapProblem] = []
    chains: dict[int, bytes] = {}
    for e in range(ID_EPOCH, epoch):
        blob = find(CHAIN, e)
        if blob is None:
            problems.append(
                WrapProblem("chain", e, "chain", f"the chain link for epoch {e} is missing")
            )
        else:
            chains[e] = blob
    if len(chains) == epoch - ID_EPOCH:
        try:
            tag = engine.require_ready().tag
            remember(engine, unlock_chain(engine.agent_id, tag, epoch, key, chains, ID_EPOCH))
        except crypto.TamperedData as exc:
            problems.append(WrapProblem("chain", epoch, "chain", str(exc)))
    return problems


def _check_devices(engine: Session, s: Settings, key: bytes, find: _Find) -> list[WrapProblem]:
    problems: list[WrapProblem] = []
    agent = engine.agent_id
    for entry in device_entries(engine):
        hex_id = entry.device_id.hex()
        wrap = find("device", s.epoch, entry.device_id)
        if entry.revoked:
            if wrap is not None:
                problems.append(
                    WrapProblem(
                        "revoked-has-key",
                        s.epoch,
                        hex_id,
                        f"removed device {hex_id[:12]}… holds a wrap of the current key",
                    )
                )
            continue
        if entry.device_id == s.device_id:
            problems += _check_own_wrap(engine, s, key, wrap)
        elif not entry.verified_at(agent, s.epoch, key):
            problems.append(
                WrapProblem(
                    "unauthenticated",
                    s.epoch,
                    hex_id,
                    f"device {hex_id[:12]}…'s entry is not authenticated under the current key "
                    "(added without the vault key, or left out of the last rotation)",
                )
            )
        elif wrap is None:
            problems.append(
                WrapProblem(
                    "missing", s.epoch, hex_id, f"device {hex_id[:12]}… has no wrap of the key"
                )
            )
    return problems


def _check_own_wrap(
    engine: Session, s: Settings, key: bytes, wrap: bytes | None
) -> list[WrapProblem]:
    hex_id = s.device_id.hex()
    if wrap is None:
        return [WrapProblem("missing", s.epoch, hex_id, "this device's own wrap is missing")]
    agent = engine.agent_id
    context = crypto.WrapContext(agent, s.epoch, device_wrap_id(s))
    try:
        opened: bytes | None = crypto.unwrap_for_device(wrap, engine.device_key(s), context)
    except crypto.CryptoError:
        opened = None
    if opened != key:
        return [
            WrapProblem(
                "unauthenticated",
                s.epoch,
                hex_id,
                "this device's wrap on the server does not open the current key",
            )
        ]
    return []
