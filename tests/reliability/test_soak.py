"""Soak: writes + sync + restore-and-compare under injected faults, for TIERMEM_SOAK_SECONDS
(120 in CI), with the real sqld behind the fault proxy.

Writes (stores, hot edits, tree edits, consolidations) and pushes go on all the time; ~20 % of
requests fail (5xx, 429, resets, read timeouts, truncated answers, answers dropped after the
commit). Every TIERMEM_SOAK_EVERY seconds (20) the outbox is drained and the agent is restored
into a new home with `tiermem.sync.restore` (through the same faults), and the restored home is
compared with the local one: the critical state byte for byte and every memory (id and text).
The data stays at KEEP memories (older ones are deleted, synced as tombstones), so resident
memory, read every SAMPLE_EVERY seconds, measures leaks: after the first third (the warm-up), the
median of the last third must be less than 10 % above the median of the middle third. The proxy
runs in a child process (`ChildProxy`), so the RSS sampled is tiermem's alone, and freed memory
goes back to the OS (`release_free_memory`, `pin_mmap_threshold`), so RSS follows live memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import random
import shutil
import statistics
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.reliability.conftest import Record, env_int
from tests.reliability.invariants import critical, difference
from tests.sentinels import SENTINEL_RECOVERY_KEY
from tests.sync import faultproxy
from tests.sync.faultproxy import ChildProxy
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import TiermemError
from tiermem.core.tokens import count_tokens
from tiermem.sync.engine import SyncEngine
from tiermem.sync.restore import restore
from tiermem.sync.vault.hrana import HranaError
from tiermem.sync.vault.retry import RetryPolicy

FAULTS: dict[faultproxy.Fault, float] = {
    faultproxy.PASS: 80.0,
    faultproxy.status(500): 3.0,
    faultproxy.status(503): 3.0,
    faultproxy.status(429, retry_after="1"): 2.0,
    faultproxy.RESET: 3.0,
    faultproxy.DROP_AFTER_COMMIT: 4.0,
    faultproxy.TRUNCATE: 2.0,
    faultproxy.hold(1.0): 1.5,
    faultproxy.hold(1.0, forward=True): 1.5,
}
SAMPLE_EVERY = 2.0  # seconds between RSS readings
KEEP = 300  # memories kept by the soak (older ones are deleted)
TIMEOUT = httpx.Timeout(connect=2.0, read=0.5, write=2.0, pool=2.0)


def release_free_memory() -> None:
    """Hand freed heap back to the OS (glibc `malloc_trim`), so RSS measures live memory rather
    than what the allocator keeps after the big, short-lived buffers of a restore."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def pin_mmap_threshold() -> None:
    """Keep glibc's mmap threshold at its default (128 KiB) instead of letting it rise to the
    largest buffer freed (its dynamic threshold). A restore's pages (megabytes, read by its
    prefetch thread) then come from mmap and go back to the OS when freed, rather than staying
    resident at the top of that thread's malloc arena, which `malloc_trim` does not shrink (seen
    as RSS steps of 10-25 MB at random restore rounds while live memory stayed flat). Memory
    that stays live, which is what a leak is, counts in RSS all the same. Process-wide."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # -3: M_MMAP_THRESHOLD


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def fast(attempts: int | None) -> RetryPolicy:
    """The production schedule, scaled down: waits of at most 0.2 s."""
    return RetryPolicy(max_attempts=attempts, first_cap=0.05, max_cap=0.2, retry_after_cap=0.2)


def memories(mem: Memory) -> dict[str, str]:
    return {m.id: m.text for chunk in mem.memories.iter_all() for m in chunk}


def write_some(mem: Memory, rng: random.Random, n: int) -> None:
    kind = rng.random()
    word = rng.choice(["tea", "deploy", "zebra", "quokka", "testnet"])
    if kind < 0.6:
        mem.store(f"soak fact {n} about {word}", rng.choice(["work", "home", "projects/soak"]))
    elif kind < 0.8:
        mem.update_hot("identity", {"soak": n})
        mem.add_event(f"soak event {n}")
    elif kind < 0.95:
        with contextlib.suppress(TiermemError):
            mem.tree_add(f"soak/n{n % 7}", f"soak node {n}")
    else:
        mem.consolidate("quick")


def keep_bounded(mem: Memory) -> None:
    """Delete the oldest memories beyond `KEEP` (synced as tombstones), so the data stays the
    same size and RSS growth after warm-up measures leaks, not a growing archive and the
    caches that follow it (page cache, near-duplicate window)."""
    ids = [
        str(r[0])
        for r in mem.db.query(
            "SELECT id FROM memories WHERE agent_id = ? ORDER BY seq DESC LIMIT -1 OFFSET ?",
            (mem.agent_id, KEEP),
        )
    ]
    if ids:
        with mem.db.transaction():
            mem.memories.delete(ids)


@pytest.mark.chaos
def test_soak(sqld: SqldServer, tmp_path: Path, seed: int, figures: Record) -> None:
    seconds = env_int("TIERMEM_SOAK_SECONDS", 120)
    every = env_int("TIERMEM_SOAK_EVERY", 20)
    rng = random.Random(seed)
    agent = f"soak-{uuid.uuid4().hex[:8]}"
    samples: list[tuple[float, int]] = []  # (seconds since the start, RSS KiB)
    compares = writes = failed_pushes = lagging = 0
    with (
        ChildProxy(sqld.url, seed=seed, weights=FAULTS) as proxy,
        Memory(tmp_path / "home", agent) as mem,
        SyncEngine(mem, timeout=TIMEOUT) as engine,
    ):
        engine.init(proxy.url, sqld.token, SENTINEL_RECOVERY_KEY, policy=fast(None), new_vault=True)
        # one-time loads are warm-up, not growth: the tokenizer loads lazily (~25 MB) at the
        # first token count, which would otherwise land inside the sampled window
        count_tokens("warm-up")
        pin_mmap_threshold()
        started = time.monotonic()
        next_check = started + every
        next_sample = started
        while True:
            for _ in range(rng.randint(1, 4)):
                write_some(mem, rng, writes)
                writes += 1
            keep_bounded(mem)
            try:
                engine.push(fast(2))
            except HranaError:
                failed_pushes += 1
            now = time.monotonic()
            if now >= next_sample:
                release_free_memory()
                samples.append((now - started, rss_kib()))
                next_sample = now + SAMPLE_EVERY
            if now < next_check and now - started < seconds:
                continue
            while engine.has_work():
                engine.push(fast(None))
            target = tmp_path / f"restored{compares}"
            restore(
                target,
                agent,
                proxy.url,
                sqld.token,
                recovery_key=SENTINEL_RECOVERY_KEY,
                timeout=TIMEOUT,
                policy=fast(None),
            )
            with Memory(target, agent) as copy:
                context = f"seed={seed} compare={compares} after {writes} writes"
                (theirs, their_times), (ours, our_times) = critical(copy), critical(mem)
                # pytest.fail, not assert: pytest's diff of two large documents takes minutes
                if theirs != ours:
                    pytest.fail(f"{context}: critical state diverged: {difference(theirs, ours)}")
                lagging += sum(their_times.get(p) != t for p, t in our_times.items())
                restored, local = memories(copy), memories(mem)
                if restored != local:
                    missing = sorted(set(local) - set(restored))[:3]
                    extra = sorted(set(restored) - set(local))[:3]
                    pytest.fail(f"{context}: memories diverged: missing {missing}, extra {extra}")
            del restored, local, theirs, ours, their_times, our_times
            shutil.rmtree(target)
            compares += 1
            gc.collect()
            next_check = time.monotonic() + every
            if time.monotonic() - started >= seconds:
                break
    faulted = sum(e.fault.kind != "pass" for e in proxy.log) / max(1, len(proxy.log))
    requests = len(proxy.log)
    # RSS every SAMPLE_EVERY seconds between rounds (after `malloc_trim`). Warm-up: the first
    # third (caches, the near-duplicate window). Growth: the median of the
    # last third against the median of the middle third, so neither one sample taken while the
    # allocator still holds a restore's buffers nor the noise of one reading decides, while a
    # leak raises the whole last third.
    third = seconds / 3
    middle = [rss for t, rss in samples if third <= t < 2 * third]
    last = [rss for t, rss in samples if t >= 2 * third]
    warm = statistics.median(middle)
    growth = (statistics.median(last) - warm) / warm
    peak = (max(last) - warm) / warm
    figures(
        f"{seconds} s: {writes} writes, {compares} restore-and-compare rounds, 0 divergence "
        f"(hot, tree, every memory; {lagging} tree activity times lagging, see `critical`); "
        f"{requests} requests, {faulted:.0%} faulted, {failed_pushes} pushes failed and were "
        f"retried later; RSS after warm-up {warm / 1024:.0f} MiB, growth {growth:+.1%} "
        f"(medians of the last and middle thirds, {len(last)} and {len(middle)} samples; "
        f"highest {peak:+.1%})"
    )
    assert compares >= 2, "the soak ended before a second comparison"
    assert proxy.errors == [], f"seed={seed}: the fault proxy failed: {proxy.errors[:3]}"
    assert growth < 0.10, f"seed={seed}: RSS grew {growth:.1%} after warm-up: {middle} → {last}"
