"""A restore of a vault this device already belongs to, a shared space it joined: what the
orchestrator takes instead of a recovery key or passphrase, and how a restore opens the memory
of an agent or of a space's scope (`space:NAME`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tiermem.core.engine import Memory, open_scope
from tiermem.sync import records
from tiermem.sync.crypto.roster import RosterView
from tiermem.sync.devices.find_vault import Opened
from tiermem.sync.restore.results import Unlock

__all__ = ["MemberAccess", "PageHook", "open_memory"]

PageHook = Callable[[Memory, list[tuple[str, bytes]]], None]
"""Called in each page's transaction with the memories it staged: (memory id, record id)."""


@dataclass(frozen=True)
class MemberAccess:
    """The vault as this device's own keys (or the space's recovery key or passphrase) open
    it, the roster this device verified (its pin, or the roster checked with the recovery key;
    not one found on the server), the check every record must pass (a space's writers'
    signatures), and what each stored page also records (who wrote its memories)."""

    opened: Opened
    roster: RosterView | None
    verify: records.Verifier
    stored: PageHook
    unlocked: Unlock = "device-key"
    enrol_as: str | None = None
    """A device restored with the vault's secret instead of its own keys (a space whose only
    member lost their home): signed onto the roster with the recovery key under this member
    name after the restore, as a restored agent's device is."""


def open_memory(
    home: Path, scope: str, *, driver: str | None, clock: Callable[[], float] = time.time
) -> Memory:
    """The memory of `scope` in `home`: an agent's, or a shared space's."""
    return open_scope(home, scope, clock=clock, driver=driver)
