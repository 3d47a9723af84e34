"""One-command restore: the newest critical state of an agent, into an empty home.

Two reads (the key wraps, then the newest record), both retried with the sync backoff; the
vault key is unwrapped with the recovery key or the passphrase, the record authenticated and
decrypted, and the home written atomically: an empty or missing home is built in a temporary
folder beside it and renamed into place (an interrupted restore leaves the old, empty home or
nothing); a home that already holds other agents gets one database transaction. The restored
home is ready to push: it has its own device key, registered with its first push.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, StorageError, TiermemError
from tiermem.core.paths import validate_agent_id
from tiermem.sync import crypto, hlc
from tiermem.sync.engine import SyncEngine
from tiermem.sync.hrana import DEFAULT_TIMEOUT, HranaClient, ResultSet, SqlError, to_base_url
from tiermem.sync.retry import RetryPolicy, call_with_retry
from tiermem.sync.secrets import SecretStore
from tiermem.sync.state import (
    CRITICAL_TABLE,
    HomeNotEmpty,
    NothingToRestore,
    Settings,
    agent_tag,
    insert_settings,
    read_settings,
    save_secrets,
    state_digest,
    wrap_id,
)

__all__ = ["RestoreResult", "restore"]


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


# ----------------------------------------------------------------------------------- restore

Unlock = Literal["recovery-key", "passphrase"]


def restore(
    home: Path,
    agent_id: str,
    url: str,
    token: str | None,
    *,
    recovery_key: bytes | None = None,
    passphrase: str | None = None,
    store_token: bool = True,
    timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
    transport: httpx.BaseTransport | None = None,
    policy: RetryPolicy | None = None,
    driver: str | None = None,
    clock: Callable[[], float] = time.time,
) -> RestoreResult:
    """Fetch, decrypt and verify the newest critical state of `agent_id` and write it into
    `home`, which must hold no memory of that agent (or be a restore of the same vault with
    nothing left to push, which makes restoring twice harmless).

    An empty or missing home is built in a temporary folder beside it and renamed into place,
    so an interrupted restore leaves the old (empty) home or nothing. A home that already
    holds other agents is written in one database transaction."""
    started = time.perf_counter()
    agent_id = validate_agent_id(agent_id)
    if (recovery_key is None) == (passphrase is None):
        raise InvalidInput("give exactly one of a recovery key and a passphrase")
    policy = policy or RetryPolicy()
    base = to_base_url(url)
    tag = agent_tag(agent_id)
    with HranaClient(base, token, timeout=timeout, transport=transport) as client:

        def select(sql: str, args: Sequence[object]) -> ResultSet:
            return call_with_retry(lambda: client.execute(sql, args), policy)

        try:
            wraps = select(
                "SELECT epoch, kind, blob FROM key_wraps WHERE agent_tag = ? "
                "AND kind IN ('recovery', 'passphrase') ORDER BY epoch DESC",
                (tag,),
            ).rows
        except SqlError as exc:
            if "no such table" not in str(exc):
                raise
            raise NothingToRestore(
                f"{base} holds no tiermem vault (run `sync init` first)"
            ) from None
        if not wraps:
            raise NothingToRestore(f"{base} holds no vault for agent {agent_id!r}")
        epoch, by_kind, vault_key, unlocked = _unlock(wraps, agent_id, recovery_key, passphrase)
        rid = crypto.record_id(vault_key, CRITICAL_TABLE, agent_id)
        rows = select(
            "SELECT version, epoch, device_id, envelope FROM records WHERE record_id = ? "
            "ORDER BY version DESC LIMIT 1",
            (rid,),
        ).rows
        requests = client.requests_sent
    if not rows:
        raise NothingToRestore(
            f"the vault of agent {agent_id!r} holds no critical state yet (nothing was pushed)"
        )
    version, row_epoch, writer, envelope = (
        str(rows[0][0]),
        _int(rows[0][1]),
        _blob(rows[0][2]),
        _blob(rows[0][3]),
    )
    try:
        hlc.parse(version)
    except ValueError:
        raise crypto.TamperedData("the newest record has a malformed version") from None
    if crypto.parse_envelope(envelope).epoch != epoch or row_epoch != epoch:
        raise crypto.TamperedData("the newest record belongs to another key epoch")
    plaintext = crypto.open_record(
        vault_key, crypto.RecordContext(agent_id, CRITICAL_TABLE, rid, version, writer), envelope
    )
    state = _decode_state(plaintext, agent_id)
    written = _write_home(
        home,
        agent_id,
        state,
        _RestoreKeys(base, epoch, vault_key, by_kind, version, token if store_token else None),
        driver=driver,
        clock=clock,
    )
    return RestoreResult(
        home=home,
        agent_id=agent_id,
        url=base,
        version=version,
        written_by=writer.hex(),
        device_id=written.device_id,
        unlocked_with=unlocked,
        bytes=len(envelope),
        hot_bytes=written.hot_bytes,
        lessons=written.lessons,
        tree_nodes=written.tree_nodes,
        memory_md=home / written.memory_md.name,
        refreshed=written.refreshed,
        requests=requests,
        seconds=time.perf_counter() - started,
    )


def _unlock(
    wraps: Sequence[Sequence[object]],
    agent_id: str,
    recovery_key: bytes | None,
    passphrase: str | None,
) -> tuple[int, dict[str, bytes], bytes, Unlock]:
    """The newest epoch, its wraps by kind, and its vault key unwrapped with the given secret."""
    epoch = _int(wraps[0][0])
    by_kind = {str(kind): _blob(blob) for e, kind, blob in wraps if _int(e) == epoch}
    if "recovery" not in by_kind:
        raise NothingToRestore(f"the vault of agent {agent_id!r} has no recovery key wrap")
    if recovery_key is not None:
        context = crypto.WrapContext(agent_id, epoch, wrap_id(agent_id, epoch, "recovery"))
        key = crypto.unwrap_with_recovery_key(by_kind["recovery"], recovery_key, context)
        return epoch, by_kind, key, "recovery-key"
    assert passphrase is not None
    if "passphrase" not in by_kind:
        raise NothingToRestore(
            f"the vault of agent {agent_id!r} has no passphrase; use the recovery key"
        )
    context = crypto.WrapContext(agent_id, epoch, wrap_id(agent_id, epoch, "passphrase"))
    key = crypto.unwrap_with_passphrase(by_kind["passphrase"], passphrase, context)
    return epoch, by_kind, key, "passphrase"


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise crypto.TamperedData("the server returned a malformed row")
    return value


def _blob(value: object) -> bytes:
    if not isinstance(value, bytes):
        raise crypto.TamperedData("the server returned a malformed row")
    return value


def _decode_state(plaintext: bytes, agent_id: str) -> dict[str, Any]:
    try:
        state = json.loads(plaintext)
    except ValueError:
        raise crypto.TamperedData("the critical state does not decode") from None
    if not isinstance(state, dict) or state.get("agent_id") != agent_id:
        raise crypto.TamperedData("the critical state belongs to another agent")
    return state


@dataclass(frozen=True)
class _RestoreKeys:
    url: str
    epoch: int
    vault_key: bytes
    wraps: dict[str, bytes]
    version: str
    token: str | None


@dataclass(frozen=True)
class _Written:
    device_id: str
    hot_bytes: int
    lessons: int
    tree_nodes: int
    memory_md: Path
    refreshed: bool


def _write_home(
    home: Path,
    agent_id: str,
    state: dict[str, Any],
    keys: _RestoreKeys,
    *,
    driver: str | None,
    clock: Callable[[], float],
) -> _Written:
    fresh = not home.exists() or (home.is_dir() and not any(home.iterdir()))
    if not fresh:
        return _restore_into(home, agent_id, state, keys, driver=driver, clock=clock)
    parent = home.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_restores(home.absolute())
        tmp = Path(tempfile.mkdtemp(prefix=f".{home.name}.restore-", dir=parent))
    except OSError as exc:
        raise StorageError(f"cannot create a folder beside {home} ({exc.strerror})") from None
    try:
        written = _restore_into(tmp, agent_id, state, keys, driver=driver, clock=clock)
        _fsync_path(tmp)
        try:
            os.rename(tmp, home)  # atomic; replaces a missing or empty folder
        except OSError as exc:
            raise StorageError(
                f"cannot move the restored home into {home} ({exc.strerror})"
            ) from None
        _fsync_path(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written


def _remove_stale_restores(home: Path) -> None:
    """Temporary folders of restores that were killed: they hold secrets, so they go."""
    for stale in home.parent.glob(f".{home.name}.restore-*"):
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _restore_into(
    root: Path,
    agent_id: str,
    state: dict[str, Any],
    keys: _RestoreKeys,
    *,
    driver: str | None,
    clock: Callable[[], float],
) -> _Written:
    with Memory(root, agent_id, clock=clock, driver=driver) as mem:
        current = read_settings(mem.db, agent_id)
        refreshed = current is not None
        if current is not None:
            _check_same_vault(mem, current, keys)
        else:
            _check_no_memory(mem)
        created_store: SecretStore | None = None
        if current is None:
            device_key = crypto.generate_device_key()
            device_id = os.urandom(16)
            ref = uuid.uuid4().hex
            created_store, _ = save_secrets(mem.home.root, ref, device_key, keys.token)
            settings = Settings(
                agent_id=agent_id,
                status="ready",
                url=keys.url,
                device_id=device_id,
                epoch=keys.epoch,
                secret_ref=ref,
                secret_store=created_store.kind,
                device_wrap=crypto.wrap_for_device(
                    keys.vault_key,
                    device_key.public_key(),
                    crypto.WrapContext(
                        agent_id, keys.epoch, wrap_id(agent_id, keys.epoch, "device", device_id)
                    ),
                ),
                recovery_wrap=keys.wraps["recovery"],
                passphrase_wrap=keys.wraps.get("passphrase"),
                hlc=keys.version,
                last_push_version=keys.version,
                created_at=mem.now(),
            )
        try:
            with mem.db.transaction():
                snapshot.load(mem, state)
                digest = state_digest(snapshot.canonical(snapshot.dump(mem)))
                if current is None:
                    insert_settings(mem.db, settings)
                    device_hex = settings.device_id.hex()
                else:
                    device_hex = current.device_id.hex()
                last = hlc.parse(keys.version)
                if current is not None and current.hlc:
                    last = max(last, hlc.parse(current.hlc))
                mem.db.execute(
                    "UPDATE sync_state SET hlc = ?, last_digest = ?, last_push_version = ? "
                    "WHERE agent_id = ?",
                    (str(last), digest, keys.version, agent_id),
                )
        except BaseException:
            if created_store is not None:
                created_store.delete_all()
            raise
        path = mem.write_memory_md()
        hot = mem.hot()
        return _Written(
            device_id=device_hex,
            hot_bytes=mem.hot_size_bytes(),
            lessons=len(hot.critical_lessons),
            tree_nodes=len(mem.trees.load().nodes),
            memory_md=path,
            refreshed=refreshed,
        )


def _check_no_memory(mem: Memory) -> None:
    counts = [
        int(mem.db.scalar(f"SELECT count(*) FROM {table} WHERE agent_id = ?", (mem.agent_id,)))
        for table in ("hot_state", "tree_nodes", "memories", "outbox")
    ]
    if any(counts):
        raise HomeNotEmpty(
            f"{mem.home.root} already holds memory for agent {mem.agent_id!r}; restore into an "
            "empty home (--home DIR) so nothing local is overwritten"
        )


def _check_same_vault(mem: Memory, current: Settings, keys: _RestoreKeys) -> None:
    """Restoring again over an earlier restore (or init) of the same vault is allowed when
    nothing local is waiting to be pushed: it only brings the newest state."""
    with SyncEngine(mem) as engine:
        try:
            same = current.status == "ready" and current.epoch == keys.epoch
            same = same and engine.vault_key(current) == keys.vault_key
        except TiermemError:
            same = False
    if not same:
        raise HomeNotEmpty(
            f"{mem.home.root} is set up to sync agent {mem.agent_id!r} with another vault; "
            "restore into an empty home (--home DIR)"
        )
    if snapshot.pending(mem.db, mem.agent_id) or current.inflight is not None:
        raise HomeNotEmpty(
            f"{mem.home.root} has changes for agent {mem.agent_id!r} that are not pushed yet; "
            "run `tiermem sync push` first, or restore into an empty home (--home DIR)"
        )
