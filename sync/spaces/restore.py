"""A shared space's vault restored onto a member's device (`tiermem restore --space NAME`, and
`spaces join`'s first fetch of a space with history): the pipeline of an agent's restore
(`sync.restore`: usable early, searchable as memories arrive, resumable), opened with this
device's own keys, with every record checked by `authors.record_check` against the roster this
device verified, exactly as a pull checks it. Each memory is recorded with the device that
signed it and the name the roster gives that device, in the transaction of the page that
stages it, so a resumed restore names every writer too.

`recover_space` restores a space whose only member lost their home: opened with the space's
recovery key (or passphrase) instead of a member's keys, checked against the roster as the
recovery key verifies it, then this device is signed onto that roster as a writer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tiermem.core import spaces
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound, NothingToRestore, NotInitialised, RejectedRecords
from tiermem.core.spaces import Role
from tiermem.sync import crypto
from tiermem.sync.crypto.authorship import Signed
from tiermem.sync.crypto.roster import READER
from tiermem.sync.devices import epochs, find_vault, roster_pin
from tiermem.sync.devices.epoch_keys import KeyRing
from tiermem.sync.devices.find_vault import Opened
from tiermem.sync.engine import SyncEngine
from tiermem.sync.records import MEMORY_TABLE
from tiermem.sync.restore import RestoreResult, restore
from tiermem.sync.restore.member import MemberAccess
from tiermem.sync.restore.results import DEFAULT_PAGE_ROWS, Progress, Unlock
from tiermem.sync.restore.verify import restore_roster
from tiermem.sync.spaces import authors, vaults
from tiermem.sync.state import Settings
from tiermem.sync.vault.remote import Remote, insecure_http_allowed
from tiermem.sync.vault.retry import RetryPolicy
from tiermem.sync.vault.transport import to_base_url

__all__ = ["Secret", "include_recovered", "recover_space", "restore_space"]


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
    with _refused(name):
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


@dataclass(frozen=True)
class Secret:
    """What opens a space's vault without a member's device: its recovery key (the device is
    then signed onto the roster as a writer named `member`) or its passphrase."""

    member: str
    recovery_key: bytes | None = None
    passphrase: str | None = None


def recover_space(
    home: Path,
    name: str,
    url: str,
    token: str | None,
    secret: Secret,
    *,
    store_token: bool = True,
    at: str | None = None,
    progress: Progress | None = None,
    page_rows: int = DEFAULT_PAGE_ROWS,
    salvage: bool = False,
    policy: RetryPolicy | None = None,
    insecure_http: bool = False,
) -> RestoreResult:
    """Restore the space `name` into `home` with its recovery key (or passphrase), when no
    member's device is left to invite this one: the same verified streaming restore, every
    record checked against the roster as the recovery key verifies it (with the passphrase
    alone: as found), then this device signed onto that roster as a writer named
    `secret.member`. `RejectedRecords` as `restore_space`."""
    scope = spaces.scope(name)
    vaults.check_member_name(secret.member)
    retry = policy or RetryPolicy()
    with Remote(to_base_url(url), token, insecure_http=insecure_http) as remote:
        access = _recovered(
            lambda sql, args: remote.execute(sql, args, retry), to_base_url(url), scope, secret
        )
    with _refused(name):
        return restore(
            home,
            scope,
            url,
            token,
            recovery_key=secret.recovery_key,
            passphrase=secret.passphrase,
            store_token=store_token,
            at=at,
            progress=progress,
            page_rows=page_rows,
            policy=policy,
            salvage=salvage,
            insecure_http=insecure_http,
            member=access,
        )


def _recovered(select: find_vault.Select, base: str, scope: str, secret: Secret) -> MemberAccess:
    """The space's vault opened with its secret, its roster checked with the recovery key,
    and the check of every record against that roster."""
    opened = _open(select, base, scope, secret)
    bodies = roster_pin.read_bodies(select, opened.tag)
    view = restore_roster(scope, bodies, secret.recovery_key)
    ring = KeyRing.unlocked(scope, opened.epoch, opened.key, select, opened.tag)
    writers = _Writers(authors.record_check(view, ring.id_key, scope))
    unlocked: Unlock = "passphrase" if secret.recovery_key is None else "recovery-key"
    return MemberAccess(opened, view, writers.verify, writers.stored, unlocked, secret.member)


def _open(select: find_vault.Select, base: str, scope: str, secret: Secret) -> Opened:
    """The space's vault as its recovery key or passphrase opens it, said as a space's."""
    name = spaces.space_of(scope)
    try:
        if secret.recovery_key is not None:
            return find_vault.open_with_recovery_key(select, base, scope, secret.recovery_key)
        assert secret.passphrase is not None
        return find_vault.open_with_passphrase(select, base, scope, secret.passphrase)
    except NothingToRestore:
        given = "recovery key" if secret.recovery_key is not None else "passphrase"
        raise NothingToRestore(
            f"{base} holds no vault of space {name!r} that this {given} opens (another key, "
            "another space name or another server); nothing was written"
        ) from None


def include_recovered(mem: Memory, name: str) -> Role:
    """After `recover_space`: `mem`'s agent includes the space with the role the roster gives
    this device (a writer, signed on by the recovery key); restored with the passphrase alone
    the device is not on the roster, and the agent reads the space only."""
    with mem.open_space(name) as space, SyncEngine(space) as engine:
        try:
            return vaults.adopt(mem, engine)
        except NotFound:
            spaces.adopt(mem.db, name, mem.agent_id, READER, mem.now())
            return READER


@contextmanager
def _refused(name: str) -> Iterator[None]:
    """A record the space's check refuses (`TamperedData` itself, not a subclass) said as a
    pull's refusal (`RejectedRecords`, exit 48)."""
    try:
        yield
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
            f"join {name}`, a writer runs `tiermem spaces invite`), which restores it; with "
            f"the space's recovery key, `tiermem restore --space {name} --url URL`"
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
