"""One-command full restore: the critical state first (usable at once), then every warm, cold
and frozen memory streamed in pages, resumable, swapped in atomically; optionally as of a point
in time.

**Three states, never a fourth.** A home being restored is, for the agent, always one of:

1. *old*: what it was before (missing, empty, or holding other agents only);
2. *usable*: the critical state (hot + tree, MEMORY.md) is in place, so `retrieve`, the hot
   editors and MEMORY.md work at once; a row in ``restore_progress`` says that the memories are
   still on their way, and the memories in place are each verified on their own (`live`);
3. *complete*: every memory is in place and the progress row is gone.

Step 1→2 is atomic: an empty or missing home is built in a temporary folder beside it and
renamed into place (a home that holds other agents gets one database transaction). Then the
memories are streamed, newest first, page by page into the staging table ``restore_staging``
of the same database (one local transaction per page, together with the stored range, so a
killed restore continues where it stopped and never stores a row twice); a memory whose every
listed writer's newest version is in moves into ``memories`` in that page's transaction (warm
ones at once, cold and frozen ones once every page is in), so a search finds it while the rest
streams. After the final check one transaction moves what is left and drops the progress row.
A rerun of the same command finishes an interrupted restore.

**Streaming with bounded memory.** Windows of `page_rows` remote rows are read newest first by
threads that run at most `stream.PAGES_IN_FLIGHT` windows ahead of the one being decrypted and
stored, so a high-latency link costs about one round trip per page. They start as soon as the
vault is found and opened (its tag says where its rows are). Every row is authenticated; a
memory record must also carry the memory id its record id was derived from (no swapped rows).
Per memory id the highest version wins (a tombstone wins like any version and is not restored).

**Point in time.** ``at`` (an HLC version, see `parse_at`) restores, for every record, the
newest version not newer than ``at``. Versions older than the prune horizon (see `prune`) may be
gone; a point in time before it is refused (`PointInTimePruned`), never restored incomplete.

**Pruning** is server maintenance and lives in `tiermem.sync.restore.prune` (re-exported here).

The steps: `run` (the orchestrator; `when`: `parse_at`), `home` (step 1), `stream` (step 2, with
`live`: memories searchable as they complete), `swap` (step 3), `results` (what a restore
reports).
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
from tiermem.sync.restore.run import restore
from tiermem.sync.restore.when import parse_at

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
