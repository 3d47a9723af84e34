"""One-command full restore: the critical state first (usable at once), then every warm, cold
and frozen memory streamed in pages, resumable, swapped in atomically; optionally as of a point
in time.

**Three states, never a fourth.** A home being restored is, for the agent, always one of:

1. *old*: what it was before (missing, empty, or holding other agents only);
2. *usable*: the critical state (hot + tree, MEMORY.md) is in place, so `retrieve`, the hot
   editors and MEMORY.md work at once; no memory of the agent is there yet, and a row in
   ``restore_progress`` says that the memories are still on their way (and from which cursor);
3. *complete*: every memory is in place and the progress row is gone.

Step 1→2 is atomic: an empty or missing home is built in a temporary folder beside it and
renamed into place (a home that holds other agents gets one database transaction). Step 2→3
is atomic too: the memories are streamed page by page into the staging table
``restore_staging`` of the same database (one local transaction per page, together with the
cursor, so a killed restore continues from the last committed page and never stores a row
twice), and when the last page is in, one transaction moves them into ``memories`` and drops the
progress row. Nothing partial is ever visible in ``memories``, the hot state or the tree. A rerun
of the same command finishes an interrupted restore.

**Streaming with bounded memory.** Pages of `page_rows` remote rows are read in the server's
commit order (``seq``) by a thread that runs at most two pages ahead of the one being decrypted
and stored, so a high-latency link costs about one round trip per page. It starts, with the
listing of every row and the roster, as soon as the vault is found and opened (its tag says
where its rows are). Every row is authenticated; a
memory record must also carry the memory id its record id was derived from (no swapped rows).
Per memory id the highest version wins (a tombstone wins like any version and is not restored).

**Point in time.** ``at`` (an HLC version, see `parse_at`) restores, for every record, the
newest version not newer than ``at``. Versions older than the prune horizon (see `prune`) may be
gone; a point in time before it is refused (`PointInTimePruned`), never restored incomplete.

**Pruning** is server maintenance and lives in `tiermem.sync.restore.prune` (re-exported here).

The steps: `run` (the orchestrator and `parse_at`), `home` (step 1), `stream` (step 2),
`swap` (step 3), `results` (what a restore reports).
"""

from tiermem.core.errors import PointInTimePruned
from tiermem.sync.restore.home import restore_pending
from tiermem.sync.restore.prune import (
    DEFAULT_KEEP_VERSIONS,
    PRUNE_TABLE,
    PruneResult,
    decode_prune,
    prune,
    prune_horizon,
)
from tiermem.sync.restore.results import DEFAULT_PAGE_ROWS, RestoreProgress, RestoreResult
from tiermem.sync.restore.run import parse_at, restore

__all__ = [
    "DEFAULT_KEEP_VERSIONS",
    "DEFAULT_PAGE_ROWS",
    "PRUNE_TABLE",
    "PointInTimePruned",
    "PruneResult",
    "RestoreProgress",
    "RestoreResult",
    "decode_prune",
    "parse_at",
    "prune",
    "prune_horizon",
    "restore",
    "restore_pending",
]
