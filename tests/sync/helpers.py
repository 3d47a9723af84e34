"""Shared pieces of the sync-engine tests: homes, conversation-ends, a fake clock, remote reads."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.state import CRITICAL_TABLE, Settings, read_settings
from tiermem.sync.vault.hrana import HranaClient
from tiermem.sync.vault.retry import RetryPolicy

# The Argon2id floor accepted on decode, so passphrase tests cost milliseconds.
CHEAP_KDF = crypto.KdfParameters(memory_kib=8 * 1024, iterations=1, lanes=1)
PASSPHRASE = "correct horse battery staple"


@dataclass
class FakeSleep:
    """Records every wait instead of sleeping; `now` is the fake clock it advances."""

    waits: list[float] = field(default_factory=list)
    now: float = 0.0

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


def policy(max_attempts: int | None = 5, sleep: FakeSleep | None = None, **kw: Any) -> RetryPolicy:
    return RetryPolicy(max_attempts=max_attempts, sleep=sleep or FakeSleep(), **kw)


def conversation_end(mem: Memory, n: int) -> None:
    """What `conversation-end` does to critical state: a new event and a counter in identity
    (each state is unique, so a repeated remote state would be a duplicate push)."""

    def change(state: Any) -> None:
        state.identity["conversations"] = n

    mem.edit_hot(change)
    mem.add_event(f"conversation {n} ended")


def seed_memory(mem: Memory) -> None:
    mem.update_hot("identity", {"agent_name": "Claw", "secret_word": "marmalade-7731"})
    mem.update_hot("owner_profile", {"tea": "oolong-unique-44"})
    mem.add_lesson("Always test on the zebra-testnet first", 0.9, "blockchain/zebra")
    mem.add_project("EvoClaw", "framework for quokka agents", "active")
    mem.add_task("renew the kumquat certificate")
    mem.tree_add("projects/evoclaw/bsc", "BSC integration for pangolin")


def dump_bytes(mem: Memory) -> bytes:
    """The critical state as a push sends it: the document with per-item clocks once sync is set up
    (equal on two devices holding the same state), else the plain dump."""
    device = mem.db.scalar("SELECT device_id FROM sync_state WHERE agent_id = ?", (mem.agent_id,))
    if device is None:
        return snapshot.canonical(snapshot.dump(mem))
    from tiermem.sync.kinds.critical_merge import critical_document

    raw = bytes(device) if isinstance(device, bytes | bytearray) else bytes.fromhex(str(device))
    return snapshot.canonical(critical_document(mem, raw.hex()))


def init_engine(
    mem: Memory,
    url: str,
    token: str | None,
    *,
    passphrase: str | None = None,
    recovery_key: bytes | None = None,
    retry: RetryPolicy | None = None,
) -> tuple[SyncEngine, bytes]:
    engine = SyncEngine(mem, timeout=10.0)
    key = recovery_key or crypto.generate_recovery_key()
    try:
        engine.init(
            url,
            token,
            key,
            passphrase=passphrase,
            kdf=CHEAP_KDF,
            policy=retry or policy(),
            store_token=True,
            new_vault=True,  # the test server is shared: it holds other tests' vaults
        )
    except BaseException:
        engine.close()
        raise
    return engine, key


def remote_versions(client: HranaClient, engine: SyncEngine) -> list[tuple[str, bytes, bytes]]:
    """(version, writer device, plaintext) of every remote version of the agent's record."""
    s = engine.settings()
    assert s is not None
    vault_key = engine.vault_key(s)
    rid = crypto.record_id(vault_key, CRITICAL_TABLE, engine.agent_id)
    rows = client.execute(
        "SELECT version, device_id, envelope FROM records WHERE record_id = ? ORDER BY version",
        (rid,),
    ).rows
    out = []
    for version, device, envelope in rows:
        assert isinstance(version, str) and isinstance(device, bytes)
        assert isinstance(envelope, bytes)
        context = crypto.RecordContext(engine.agent_id, CRITICAL_TABLE, rid, version, device)
        out.append((version, device, crypto.open_record(vault_key, context, envelope)))
    return out


def settings(engine: SyncEngine) -> Settings:
    s = engine.settings()
    assert s is not None
    return s


def identity_counter(plaintext: bytes) -> int:
    return int(json.loads(plaintext)["hot"]["identity"].get("conversations", -1))


def home_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def tag_of(mem: Memory) -> bytes:
    """What the server files this home's vault under (`Settings.tag`)."""
    s = read_settings(mem.db, mem.agent_id)
    assert s is not None
    return s.tag


@contextlib.contextmanager
def desktop_and_phone(
    tmp_path: Path, url: str, token: str, agent_id: str
) -> Iterator[tuple[tuple[Memory, SyncEngine], tuple[Memory, SyncEngine], bytes]]:
    """A desktop set up for sync and a phone restored from it (each a memory and its sync
    engine), and the recovery key; both closed afterwards."""
    mem_a = Memory(tmp_path / "desktop", agent_id)
    engine_a, key = init_engine(mem_a, url, token)
    engine_a.push(policy())
    restore(tmp_path / "phone", agent_id, url, token, recovery_key=key, policy=policy())
    mem_b = Memory(tmp_path / "phone", agent_id)
    engine_b = SyncEngine(mem_b, timeout=10.0)
    try:
        yield (mem_a, engine_a), (mem_b, engine_b), key
    finally:
        for engine, mem in ((engine_a, mem_a), (engine_b, mem_b)):
            engine.close()
            mem.close()
