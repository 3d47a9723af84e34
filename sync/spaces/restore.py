"""A shared space's vault restored onto a member's device (`tiermem restore --space NAME`, and
`spaces join`'s first fetch of a space with history): the pipeline of an agent's restore
(`sync.restore`: usable early, searchable as memories arrive, resumable), opened with this
device's own keys, with every record checked by `authors.record_check` against the roster this
device verified, exactly as a pull checks it. Each memory is recorded with the device that
signed it and the name the roster gives that device, in the transaction of the page that
stages it, so a resumed restore names every writer too."""

from __future__ import annotations

from dataclasses import dataclass, field

from tiermem.core import spaces
from tiermem.core.engine import Memory
from tiermem.core.errors import NotInitialised, RejectedRecords
from tiermem.sync import crypto
from tiermem.sync.crypto.authorship import Signed
from tiermem.sync.devices import epochs, roster_pin
from tiermem.sync.devices.find_vault import Opened
from tiermem.sync.engine import SyncEngine
from tiermem.sync.records import MEMORY_TABLE
from tiermem.sync.restore import RestoreResult, restore
from tiermem.sync.restore.member import MemberAccess
from tiermem.sync.restore.results import DEFAULT_PAGE_ROWS, Progress
from tiermem.sync.spaces import authors, vaults
from tiermem.sync.state import Settings
from tiermem.sync.vault.remote import insecure_http_allowed
from tiermem.sync.vault.retry import RetryPolicy

__all__ = ["restore_space"]


@dataclass
class _Writers:
    """Who signed each memory record the restore opened: the writer of its oldest version
    served (a memory stored again by another member keeps its first writer)."""

    check: authors.RecordCheck
    signed: dict[bytes, tuple[str, Signed]] = field(default_factory=dict)

    def verify(self, ctx: crypto.RecordContext, plaintext: bytes) -> bytes:
        signed = self.check(ctx, plaintext)
        if ctx.table == MEMORY_TABLE:
            held = self.signed.get(ctx.record_id)
            if held is None or ctx.version < held[0]:
                self.signed[ctx.record_id] = (ctx.version, signed)
        return signed.payload

    def stored(self, mem: Memory, staged: list[tuple[str, bytes]]) -> None:
        """The writers of a page's staged memories (not tombstones), in its transaction."""
        rows = [
            (found[1].writer, found[1].device_id.hex(), mem.agent_id, memory_id)
            for memory_id, rid in staged
            if (found := self.signed.get(rid)) is not None
        ]
        mem.db.executemany(
            "INSERT INTO space_writers (agent_id, id, writer, device, written_at) "
            "SELECT agent_id, id, ?, ?, created_at FROM restore_staging "
            "WHERE agent_id = ? AND id = ? AND deleted <> 1 "
            "ON CONFLICT (agent_id, id) DO UPDATE SET writer = excluded.writer, "
            "device = excluded.device",
            rows,
        )


@dataclass(frozen=True)
class _Joined:
    """What restoring a joined space needs from this device's settings."""

    url: str
    token: str | None
    insecure_http: bool
    access: MemberAccess


def restore_space(
    mem: Memory,
    name: str,
    *,
    at: str | None = None,
    page_rows: int = DEFAULT_PAGE_ROWS,
    progress: Progress | None = None,
    salvage: bool = False,
    policy: RetryPolicy | None = None,
) -> RestoreResult:
    """Restore the vault of the space `name`, which this home joined (`spaces join`), into the
    space's scope here. A record not signed by a writer of the space's roster (unsigned,
    signed by a reader, or by a key the roster does not list as a writer) or otherwise damaged
    stops it with `RejectedRecords`, as a pull refuses it (with `salvage`: the rest restored,
    the refused listed). A rerun finishes an interrupted restore."""
    spaces.require(mem.db, name)
    with mem.open_space(name) as space, SyncEngine(space) as session:
        joined = _joined(session, name, policy)
    try:
        return restore(
            mem.home.root,
            spaces.scope(name),
            joined.url,
            joined.token,
            at=at,
            progress=progress,
            page_rows=page_rows,
            policy=policy,
            salvage=salvage,
            insecure_http=joined.insecure_http,
            member=joined.access,
        )
    except crypto.TamperedData as exc:
        if type(exc) is not crypto.TamperedData:
            raise
        raise RejectedRecords(
            f"space {name!r}: records refused (not signed by a writer of the space, or "
            f"damaged): {exc}"
        ) from None


def _joined(session: SyncEngine, name: str, policy: RetryPolicy | None) -> _Joined:
    """This device's keys for the space (its newest epoch first), checked against the roster
    it verified: it must still be a member."""
    s = session.settings()
    if s is None or s.status != "ready":
        raise NotInitialised(
            f"this home is not a member of space {name!r}: join it first (`tiermem spaces "
            f"join {name}`, a writer runs `tiermem spaces invite`), which restores it"
        )
    epochs.refresh_epoch(session, policy)
    s = session.require_ready()
    view = roster_pin.verified(session, fresh=True)
    vaults.device_role(session, view)  # NotFound once this device left the roster
    writers = _Writers(authors.record_check(view, epochs.id_key(session), session.agent_id))
    opened = Opened(s.tag, s.epoch, _wraps(s), session.vault_key(s))
    return _Joined(
        s.url,
        session.token(s),
        insecure_http_allowed(session.mem),
        MemberAccess(opened, view, writers.verify, writers.stored),
    )


def _wraps(s: Settings) -> dict[str, bytes]:
    wraps = {"recovery": s.recovery_wrap}
    if s.passphrase_wrap is not None:
        wraps["passphrase"] = s.passphrase_wrap
    return wraps
