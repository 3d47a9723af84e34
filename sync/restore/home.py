"""Step 1 of a restore: the critical state (hot + tree, MEMORY.md) and this device's settings
written into the home in one step, with the progress row saying the memories are on their way.
An empty or missing home is built beside it and renamed into place."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.core import rows, snapshot
from tiermem.core.engine import Memory
from tiermem.core.errors import StorageError, TiermemError
from tiermem.core.paths import Home
from tiermem.sync import crypto, hlc, records
from tiermem.sync.devices.secret_store import SecretStore
from tiermem.sync.kinds import critical_merge
from tiermem.sync.restore.member import open_memory
from tiermem.sync.session import Session
from tiermem.sync.state import (
    HomeNotEmpty,
    Settings,
    insert_settings,
    read_settings,
    save_secrets,
    state_digest,
    wrap_id,
)

# ------------------------------------------------------------------- step 1: critical state


@dataclass(frozen=True)
class RestoreKeys:
    url: str
    epoch: int
    vault_key: bytes
    wraps: dict[str, bytes]
    version: str
    token: str | None
    tag: bytes  # what the server files the vault under (`Settings.tag`)


@dataclass(frozen=True)
class Marker:
    """The progress row written with the critical state: "memories still on their way"."""

    url: str
    vault_check: str
    at: str | None
    version: str
    started_at: float
    top: int = 0  # the vault's newest row when the restore began: the stream goes down from it


@dataclass(frozen=True)
class Written:
    device_id: str
    hot_bytes: int
    lessons: int
    tree_nodes: int
    memory_md: Path
    refreshed: bool


def restore_pending(home: Path, agent_id: str, driver: str | None = None) -> bool:
    """Whether `home` holds an unfinished restore of `agent_id` (its memories are missing)."""
    return pending_restore(home, agent_id, driver) is not None


def pending_restore(home: Path, agent_id: str, driver: str | None) -> dict[str, Any] | None:
    if not Home(home).db_path.is_file():
        return None  # never create a home just to look
    with open_memory(home, agent_id, driver=driver) as mem:
        row = mem.db.query_one(
            "SELECT p.vault_check, p.at, p.version, p.cursor, COALESCE(s.pull_cursor, 0) "
            "FROM restore_progress p LEFT JOIN sync_progress s ON s.agent_id = p.agent_id "
            "WHERE p.agent_id = ?",
            (agent_id,),
        )
    if row is None:
        return None
    return {
        "vault_check": row[0],
        "at": row[1],
        "version": row[2],
        "cursor": row[3],
        "top": row[4],
    }


def usable_home(home: Path, agent_id: str, driver: str | None) -> Written:
    with open_memory(home, agent_id, driver=driver) as mem:
        s = read_settings(mem.db, agent_id)
        return _written(mem, "" if s is None else s.device_id.hex(), refreshed=False)


def _written(mem: Memory, device_hex: str, *, refreshed: bool) -> Written:
    return Written(
        device_id=device_hex,
        hot_bytes=mem.hot_size_bytes(),
        lessons=len(mem.hot().critical_lessons),
        tree_nodes=len(mem.trees.load().nodes),
        memory_md=mem.home.memory_md(mem.agent_id),
        refreshed=refreshed,
    )


def write_home(
    home: Path,
    agent_id: str,
    state: dict[str, Any],
    vault: RestoreKeys,
    marker: Marker,
    *,
    driver: str | None,
    clock: Callable[[], float],
) -> Written:
    fresh = not home.exists() or (home.is_dir() and not any(home.iterdir()))
    if not fresh:
        return _restore_into(home, agent_id, state, vault, marker, driver=driver, clock=clock)
    parent = home.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale_restores(home.absolute())
        tmp = Path(tempfile.mkdtemp(prefix=f".{home.name}.restore-", dir=parent))
    except OSError as exc:
        raise StorageError(f"cannot create a folder beside {home} ({exc.strerror})") from None
    try:
        written = _restore_into(tmp, agent_id, state, vault, marker, driver=driver, clock=clock)
        _fsync_tree(tmp)
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


def remove_stale_restores(home: Path) -> None:
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


def _fsync_tree(root: Path) -> None:
    """Every file of the new home and the folder itself reach the disk before the rename, so
    after a power loss the renamed home is whole (SQLite already synced its own commits)."""
    for path in root.rglob("*"):
        if path.is_file():
            _fsync_path(path)
    _fsync_path(root)


def _restore_into(
    root: Path,
    agent_id: str,
    state: dict[str, Any],
    vault: RestoreKeys,
    marker: Marker,
    *,
    driver: str | None,
    clock: Callable[[], float],
) -> Written:
    with open_memory(root, agent_id, clock=clock, driver=driver) as mem:
        current = read_settings(mem.db, agent_id)
        refreshed = current is not None
        if current is not None:
            _check_same_vault(mem, current, vault)
        else:
            _check_no_memory(mem)
        created_store: SecretStore | None = None
        if current is None:
            device_key = crypto.generate_device_key()
            device_id = os.urandom(16)
            ref = uuid.uuid4().hex
            created_store, _ = save_secrets(mem.home.root, ref, device_key, vault.token)
            settings = Settings(
                agent_id=agent_id,
                status="ready",
                url=vault.url,
                device_id=device_id,
                epoch=vault.epoch,
                secret_ref=ref,
                secret_store=created_store.kind,
                device_wrap=crypto.wrap_for_device(
                    vault.vault_key,
                    device_key.public_key(),
                    crypto.WrapContext(
                        agent_id, vault.epoch, wrap_id(vault.tag, vault.epoch, "device", device_id)
                    ),
                ),
                recovery_wrap=vault.wraps["recovery"],
                passphrase_wrap=vault.wraps.get("passphrase"),
                hlc=vault.version,
                last_push_version=vault.version,
                created_at=mem.now(),
                agent_tag=vault.tag,
            )
        try:
            with mem.db.transaction():
                device_hex = (settings if current is None else current).device_id.hex()
                digest = _load_critical(mem, state, device_hex)
                if current is None:
                    insert_settings(mem.db, settings)
                last = hlc.parse(vault.version)
                if current is not None and current.hlc:
                    last = max(last, hlc.parse(current.hlc))
                mem.db.execute(
                    "UPDATE sync_state SET hlc = ?, last_digest = ?, last_push_version = ? "
                    "WHERE agent_id = ?",
                    (str(last), digest, vault.version, agent_id),
                )
                mem.db.execute("DELETE FROM restore_staging WHERE agent_id = ?", (agent_id,))
                _mark_pending(mem, marker)
        except BaseException:
            if created_store is not None:
                created_store.delete_all()
            raise
        mem.write_memory_md()
        return _written(mem, device_hex, refreshed=refreshed)


def _mark_pending(mem: Memory, marker: Marker) -> None:
    """The progress row: memories on their way, the rows in (cursor, pull cursor] stored (none
    yet). The pull cursor is the restore's top from now on: a pull continues above it."""
    mem.db.execute(
        "INSERT OR REPLACE INTO restore_progress (agent_id, url, vault_check, at, version, "
        "cursor, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            mem.agent_id,
            marker.url,
            marker.vault_check,
            marker.at,
            marker.version,
            marker.top,
            marker.started_at,
        ),
    )
    mem.db.execute(
        "INSERT INTO sync_progress (agent_id, pull_cursor) VALUES (?, ?) ON CONFLICT (agent_id) "
        "DO UPDATE SET pull_cursor = max(pull_cursor, excluded.pull_cursor)",
        (mem.agent_id, marker.top),
    )


def _load_critical(mem: Memory, state: dict[str, Any], device_hex: str) -> str:
    """Write the critical state (inside the caller's transaction) and return the digest a
    push compares with (so the restored state is not pushed back). Through the per-item merge,
    so the per-item clocks of the payload are kept for later merges."""
    critical_merge.merge_remote(mem, state, device_hex)
    document = critical_merge.critical_document(mem, device_hex)
    return state_digest(records.encode_critical(document))


def _check_no_memory(mem: Memory) -> None:
    if rows.holds_memory(mem.db, mem.agent_id):
        raise HomeNotEmpty(
            f"{mem.home.root} already holds memory for agent {mem.agent_id!r}; restore into an "
            "empty home (--home DIR) so nothing local is overwritten"
        )


def _check_same_vault(mem: Memory, current: Settings, vault: RestoreKeys) -> None:
    """Restoring again over an earlier restore (or init) of the same vault is allowed when
    nothing local is waiting to be pushed: it only brings the newest state."""
    with Session(mem) as engine:
        try:
            same = current.status == "ready" and current.epoch == vault.epoch
            same = same and current.tag == vault.tag
            same = same and engine.vault_key(current) == vault.vault_key
        except TiermemError:
            same = False
    if not same:
        raise HomeNotEmpty(
            f"{mem.home.root} is set up to sync agent {mem.agent_id!r} with another vault; "
            "restore into an empty home (--home DIR)"
        )
    unpushed = mem.db.scalar(
        "SELECT EXISTS (SELECT 1 FROM sync_dirty WHERE agent_id = ?) "
        "OR EXISTS (SELECT 1 FROM sync_batches WHERE agent_id = ?)",
        (mem.agent_id, mem.agent_id),
    )
    if snapshot.pending(mem.db, mem.agent_id) or current.inflight is not None or unpushed:
        raise HomeNotEmpty(
            f"{mem.home.root} has changes for agent {mem.agent_id!r} that are not pushed yet; "
            "run `tiermem sync push` first, or restore into an empty home (--home DIR)"
        )
