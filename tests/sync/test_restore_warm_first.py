"""Warm before cold on the wire, on a real sqld with JWT auth: the manifests and the checkpoint
say (inside the encryption) which memory versions were warm, so a restore fetches an old warm
memory ahead of the cold archive and makes it searchable while the archive's requests are
still held; nothing crosses the wire twice; a vault pushed before the flags still restores.
A restored device keeps the checkpoint it checked, so its first prune downloads none of it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sync.helpers import init_engine, policy
from tests.sync.sqld import SqldServer
from tests.sync.test_adversarial_server import (
    Attacker,
    Tm,
    attacker,
    homes,
    memories,
    restore,
    tm,
)
from tests.sync.test_checkpoint import grown_vault, prune_now, prune_rows
from tests.sync.test_prune_copy import Recording, pieces, seen
from tests.sync.test_restore_searchable import (
    PAGE_ROWS,
    PATIENCE,
    GateProxy,
    Vault,
    restore_command,
    restoring,
    retrieve,
    visible,
    wait_for,
)
from tiermem.core.engine import Memory
from tiermem.sync import crypto, manifest
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import prune
from tiermem.sync.restore.prefetch import EARLY_WINDOWS, PAGES_IN_FLIGHT
from tiermem.sync.vault import store
from tiermem.sync.vault.hrana import HranaClient

__all__ = ["attacker", "homes", "tm"]  # fixtures, used by name

WINDOW_HEAD = store.restore_page(b"", (0, 0, None, []), 0)[0].split(" AND seq > ?")[0]
OLD_WARM = "the boiler room key hangs behind the blue door"


class OldWarmVault(Vault):
    """A warm memory stored first and never touched again, then a cold archive, then recent
    warm notes: newest first, the old warm memory would come last, with the archive."""

    def __init__(self, root: Path, agent_id: str, sqld: SqldServer, *, checkpoint: bool) -> None:
        self.agent_id = agent_id
        self.mem = Memory(root / "laptop", agent_id)
        self.old_warm = self.mem.store(OLD_WARM, "places").id
        self.engine, self.key = init_engine(self.mem, sqld.url, sqld.token)
        self.push()
        archive = self._store("archive entry {} about the quarry ledger", 60)
        self.mem.memories.move(archive, "cold", self.mem.now())
        self.push()
        self.warm = self._store("working note {} about the harbour crane", 25)
        self.late_cold: list[str] = []
        self.push()
        if checkpoint:  # the old warm memory's line now lives in the checkpoint
            assert prune(self.engine, 1, keep_days=0, policy=policy()).checkpoint == 1


@pytest.fixture(params=["manifests", "checkpoint"])
def old_warm(
    request: pytest.FixtureRequest, tmp_path: Path, agent_id: str, sqld: SqldServer
) -> Iterator[OldWarmVault]:
    v = OldWarmVault(tmp_path, agent_id, sqld, checkpoint=request.param == "checkpoint")
    yield v
    v.close()


def window_upto(body: bytes) -> int | None:
    """The window's end when `body` asks for a restore window (None: anything else)."""
    try:
        requests = json.loads(body or b"{}").get("requests", [])
    except ValueError:
        return None
    for request in requests:
        stmt = request.get("stmt") or {}
        if str(stmt.get("sql", "")).startswith(WINDOW_HEAD):
            return int(stmt["args"][2]["value"])
    return None


def archive_windows(client: HranaClient, vault: Vault) -> GateProxyHold:
    """Every window of the vault but the newest `EARLY_WINDOWS`, which a restore asks for
    before it has read the lines: the archive's requests."""
    tag = vault.engine.require_ready().tag
    bounds = [int(str(r[0])) for r in client.execute(*store.window_bounds(tag, 0, PAGE_ROWS)).rows]
    assert len(bounds) > PAGES_IN_FLIGHT + 2
    return GateProxyHold(bounds[-EARLY_WINDOWS - 1])


class GateProxyHold:
    """Holds every window request that ends at or below `upto`."""

    def __init__(self, upto: int) -> None:
        self.upto = upto

    def __call__(self, body: bytes) -> bool:
        end = window_upto(body)
        return end is not None and end <= self.upto


def served_seqs(exchanges: list[tuple[bytes, bytes]]) -> list[int]:
    """The seq of every record row the restore's page requests returned."""
    out = []
    for request, response in exchanges:
        if b"envelope FROM records AS r" not in request:
            continue
        for result in json.loads(response).get("results", []):
            rows = result.get("response", {}).get("result", {}).get("rows", [])
            out += [int(row[0]["value"]) for row in rows]
    return out


def test_an_old_warm_memory_is_searchable_before_the_cold_archive_is_fetched(
    tmp_path: Path, old_warm: OldWarmVault, sqld: SqldServer, client: HranaClient
) -> None:
    gate = GateProxy(sqld.url, archive_windows(client, old_warm))
    target = tmp_path / "phone"
    try:
        with restoring(target, old_warm, gate, sqld.token) as proc:
            assert gate.held.wait(PATIENCE), "the restore never asked for the archive"
            wait_for(lambda: old_warm.old_warm in ids(target, old_warm), "the old warm memory")
            assert OLD_WARM in retrieve(target, old_warm.agent_id, "boiler room key")
            assert proc.poll() is None, "the restore finished while the archive was held"
            assert retrieve(target, old_warm.agent_id, "quarry ledger") == []
            assert {r[5] for r in visible(target, old_warm.agent_id)} == {"warm"}
    finally:
        gate.close()
    assert visible(target, old_warm.agent_id) == old_warm.rows()
    served = served_seqs(gate.exchanges)
    assert len(served) == len(set(served)), "a row crossed the wire twice"


def ids(home: Path, vault: Vault) -> set[str]:
    return {str(r[0]) for r in visible(home, vault.agent_id)}


def test_a_vault_pushed_before_the_warm_flags_restores_newest_first(
    tmp_path: Path,
    agent_id: str,
    sqld: SqldServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with monkeypatch.context() as old:
        old.setattr(manifest, "pack_warm", lambda entries: None)  # lines without the flags
        vault = OldWarmVault(tmp_path, agent_id, sqld, checkpoint=True)
    try:
        done = subprocess.run(
            restore_command(tmp_path / "phone", vault, sqld.url),
            env=vault.env(sqld.token),
            capture_output=True,
            timeout=PATIENCE,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert visible(tmp_path / "phone", agent_id) == vault.rows()
    finally:
        vault.close()


def test_the_flags_round_trip_and_a_malformed_bitmap_is_refused() -> None:
    lines = tuple(
        manifest.ManifestEntry("memory", f"{n:032x}", "v", f"{n:064x}", warm=n % 3 == 0)
        for n in range(11)
    )
    m = manifest.Manifest("ab" * 16, 1, lines)
    encoded = manifest.encode_manifest(m)
    assert manifest.decode_manifest(encoded) == m
    doc: dict[str, Any] = json.loads(encoded)
    for bad in ("AAAA", "not base64!"):  # a bitmap of the wrong length, or no base64
        with pytest.raises(crypto.TamperedData):
            manifest.decode_manifest(json.dumps({**doc, "warm": bad}).encode())
    part = manifest.Checkpoint(1, 0, 1, (("ab" * 16, 1),), None, lines)
    decoded = manifest.decode_checkpoint(manifest.encode_checkpoint(part, 1))
    assert decoded is not None and {e.record_id for e in decoded.lines if e.warm} == {
        e.record_id for e in lines if e.warm
    }


def test_a_restored_device_prunes_on_the_checkpoint_it_checked_without_downloading_it(
    tm: Tm, sqld: SqldServer, attacker: Attacker, homes: tuple[Path, Path, Path]
) -> None:
    a, b, fresh = homes
    key, _ = grown_vault(tm, a, sqld)
    assert prune_now(tm, a)["checkpoint"] == 1
    parts = prune_rows(attacker, a, tm.agent_id)
    assert restore(tm, b, sqld, key)[0] == 0
    tm.store(b, "the lift in hall 2 squeaks")
    assert tm(b, "sync", "push")[0] == 0
    wire = Recording()
    with Memory(b, tm.agent_id) as mem, SyncEngine(mem, timeout=10.0, transport=wire) as engine:
        second = prune(engine, 1, keep_days=0, policy=policy())
    assert not seen(wire, pieces(parts), 0)  # checkpoint 1 never crossed the wire
    assert (second.checkpoint, second.previous, second.downloaded_because) == (2, "copy", "")

    assert restore(tm, fresh, sqld, key)[0] == 0
    tm.store(fresh, "the gate in hall 6 rattles")
    assert tm(fresh, "sync", "push")[0] == 0
    doc = tm.json(fresh, "sync", "prune", "--keep", "1", "--days", "0")
    assert (doc["checkpoint"], doc["previous"], doc["downloaded_because"]) == (3, "copy", "")
    assert tm(a, "sync", "pull")[0] == 0 and tm(b, "sync", "pull")[0] == 0
    assert memories(fresh, tm.agent_id) == memories(a, tm.agent_id) == memories(b, tm.agent_id)
    assert tm(a, "sync", "check", "--read-data")[0] == 0
