"""What a restore reports: its progress as it goes and its result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

DEFAULT_PAGE_ROWS: Final = 1000

# ------------------------------------------------------------------------------ results


Phase = Literal["critical", "memories", "archive", "swap", "done"]
"""``archive``: every page is in; the cold and frozen memories become searchable."""


@dataclass(frozen=True)
class RestoreProgress:
    """What a progress bar shows. ``rows``/``total_rows`` count remote rows read (every
    version of every record), ``bytes``/``total_bytes`` their envelopes; totals are measured
    when the restore (or its resumption) starts. ``memories`` counts the memories
    staged so far, ``searchable`` those of them a search finds already."""

    phase: Phase
    rows: int
    total_rows: int
    bytes: int
    total_bytes: int
    memories: int  # staged
    usable: bool
    searchable: int = 0  # of them, in `memories` already (a search finds them)


@dataclass(frozen=True)
class RestoreResult:
    home: Path
    agent_id: str
    url: str
    version: str
    written_by: str
    device_id: str
    unlocked_with: str
    bytes: int
    hot_bytes: int
    lessons: int
    tree_nodes: int
    memory_md: Path
    refreshed: bool
    requests: int
    seconds: float
    at: str | None = None
    resumed: bool = False
    memories: int = 0
    tombstones: int = 0
    kept_local: int = 0
    rows: int = 0
    pages: int = 0
    memory_bytes: int = 0
    usable_seconds: float = 0.0
    salvage: bool = False
    problems: tuple[dict[str, str], ...] = ()


Progress = Callable[[RestoreProgress], None]
Unlock = Literal["recovery-key", "passphrase", "device-key"]
