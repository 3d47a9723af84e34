"""Power loss, simulated on copies: torn and garbled WAL tails.

A workload numbers every commit (`op N`: a stored fact, or the hot identity counter set to N).
At seeded random commit boundaries the database, its WAL and the WAL index are copied; the copy
of the WAL is cut at a random offset and, half of the time, its last 64 bytes are overwritten
with garbage (a write the disk never finished). Only bytes after the checkpoint's backfill mark
are damaged: everything before it is already in the database file, and a real disk cannot
lose it after the checkpoint's fsync. Then the copy is opened with the shipped libSQL driver:

- `PRAGMA integrity_check`, the FTS index and every domain invariant hold, always;
- what survives is a prefix of the commit order: every op up to the newest surviving one is
  there and none after it (an empty prefix is a prefix).

The default suite runs 30 trials; `-m crash` runs TIERMEM_POWERLOSS_TRIALS (500).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import struct
import time
from pathlib import Path

import pytest

from tests.reliability.conftest import Record, env_int
from tests.reliability.invariants import domain_problems, storage_problems
from tiermem.core.db import Database
from tiermem.core.engine import Memory

WAL_HEADER = 32
FRAME_HEADER = 24
OP_TEXT = re.compile(r"^op (\d+) ")


def backfill_floor(wal: bytes, shm: bytes) -> int:
    """Bytes of the WAL whose frames the checkpoint already copied into the database file.

    `nBackfill` is the first u32 of the checkpoint info after the two 48-byte WAL-index
    headers in the -shm file (native byte order)."""
    if len(wal) < WAL_HEADER or len(shm) < 100:
        return 0
    page_size = struct.unpack_from(">I", wal, 8)[0]
    (backfilled,) = struct.unpack_from("=I", shm, 96)
    return WAL_HEADER + backfilled * (FRAME_HEADER + page_size) if backfilled else 0


def damaged_copy(home: Path, target: Path, rng: random.Random) -> dict[str, int]:
    target.mkdir()
    db = home / "tiermem.db"
    shutil.copyfile(db, target / "tiermem.db")
    wal_path = Path(f"{db}-wal")
    wal = wal_path.read_bytes() if wal_path.exists() else b""
    shm_path = Path(f"{db}-shm")
    shm = shm_path.read_bytes() if shm_path.exists() else b""
    floor = backfill_floor(wal, shm)
    cut = rng.randint(floor, len(wal)) if wal else 0
    data = bytearray(wal[:cut])
    garbled = 0
    if data and rng.random() < 0.5:
        start = max(floor, len(data) - 64)
        data[start:] = os.urandom(len(data) - start)
        garbled = len(data) - start
    if data:
        (target / "tiermem.db-wal").write_bytes(bytes(data))
    # No -shm: after a power loss the first opener rebuilds the WAL index from the WAL.
    return {"wal": len(wal), "floor": floor, "cut": cut, "garbled": garbled}


def survivors(home: Path) -> tuple[list[str], set[int], int]:
    """(problems, surviving stored ops, identity counter) of a damaged copy."""
    db = Database(home / "tiermem.db")
    try:
        problems = storage_problems(db)
    finally:
        db.close()
    with Memory(home, "default") as mem:
        problems += domain_problems(mem)
        ops: set[int] = set()
        for chunk in mem.memories.iter_all():
            for m in chunk:
                match = OP_TEXT.match(m.text)
                if match:
                    ops.add(int(match.group(1)))
        counter = int(mem.hot().identity.get("counter", -1))
    return problems, ops, counter


def powerloss_run(tmp_path: Path, seed: int, trials: int, figures: Record) -> None:
    rng = random.Random(seed)
    home = tmp_path / "home"
    kinds: list[str] = []  # commit order: kinds[n] is what op n was
    started = time.monotonic()
    cuts_inside = garbles = lost_ops = after_checkpoint = 0
    with Memory(home, "default") as mem:
        for trial in range(trials):
            for _ in range(rng.randint(1, 6)):
                n = len(kinds)
                if rng.random() < 0.75:
                    mem.store(f"op {n} about {rng.choice(['tea', 'deploy', 'zebra'])}", "log")
                    kinds.append("store")
                else:
                    mem.update_hot("identity", {"counter": n})
                    kinds.append("hot")
                if rng.random() < 0.03:
                    mem.consolidate("quick")  # moves tiers, numbers nothing
            copy = tmp_path / f"copy{trial}"
            info = damaged_copy(home, copy, rng)
            context = f"seed={seed} trial={trial} {info}"
            problems, ops, counter = survivors(copy)
            assert problems == [], f"{context}: {problems}"
            newest = max([*ops, counter, -1])
            stores = {n for n in range(newest + 1) if kinds[n] == "store"}
            assert ops == stores, f"{context}: surviving stores are not a prefix of commit order"
            hot_ops = [n for n in range(newest + 1) if kinds[n] == "hot"]
            assert counter == (hot_ops[-1] if hot_ops else -1), (
                f"{context}: identity counter {counter} is not the prefix's last hot write"
            )
            cuts_inside += info["cut"] < info["wal"]
            garbles += info["garbled"] > 0
            after_checkpoint += info["floor"] > 0
            lost_ops += len(kinds) - (newest + 1)
            shutil.rmtree(copy)
    figures(
        f"{trials} trials: integrity ok in all, survivors a prefix of commit order in all; "
        f"{cuts_inside} WAL cuts inside the log ({after_checkpoint} above a checkpoint's "
        f"backfill), {garbles} garbled tails, {len(kinds)} commits, "
        f"{lost_ops} commits after the cut (lost as a power loss may lose them); "
        f"{time.monotonic() - started:.0f} s"
    )


def test_powerloss_bounded(tmp_path: Path, seed: int, figures: Record) -> None:
    powerloss_run(tmp_path, seed, 30, figures)


@pytest.mark.crash
def test_powerloss_trials(tmp_path: Path, seed: int, figures: Record) -> None:
    powerloss_run(tmp_path, seed, env_int("TIERMEM_POWERLOSS_TRIALS", 500), figures)
