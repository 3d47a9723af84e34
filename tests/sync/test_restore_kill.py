"""`tiermem restore` SIGKILLed at seeded random moments: after every kill the target home is
old (missing), usable (critical state whole, marked pending, the memories visible so far each
exactly as pushed) or complete, never anything in between; a rerun of the same command always completes it.

A failing run prints its seed and the kill delays, so it replays with the same numbers."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.sync.helpers import init_engine
from tests.sync.sqld import SqldServer
from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.core.warm import NewFact
from tiermem.sync import crypto
from tiermem.sync.restore import restore_pending

PATIENCE = 120.0
MEMORIES = 400
PAGE_ROWS = 20
COLUMNS = "id, text, category, importance, created_at, access_count, tier, urls, pinned"


def rows(mem: Memory) -> list[tuple[Any, ...]]:
    return [
        tuple(r)
        for r in mem.db.query(
            f"SELECT {COLUMNS} FROM memories WHERE agent_id = ? ORDER BY id", (mem.agent_id,)
        )
    ]


def critical(mem: Memory) -> bytes:
    return snapshot.canonical(snapshot.dump(mem)["hot"])


class Scenario:
    """One pushed source agent and the command that restores it."""

    def __init__(self, sqld: SqldServer, tmp_path: Path, agent_id: str) -> None:
        self.tmp = tmp_path
        self.agent_id = agent_id
        self.url = sqld.url
        with Memory(tmp_path / "source", agent_id) as mem:
            mem.add_lesson("restores are atomic", 0.9)
            mem.tree_add("ops/backups", "backup notes")
            mem.store_many(
                NewFact(
                    text=f"backup drill {i} used tape {i * 7919 % 10007} and rack {i % 13}",
                    category=["ops/backups", "ops/drills"][i % 2],
                    importance=0.3 + (i % 5) / 10,
                )
                for i in range(MEMORIES)
            )
            key = crypto.generate_recovery_key()
            engine, _ = init_engine(mem, sqld.url, sqld.token, recovery_key=key)
            assert engine.push().pushed
            engine.close()
            self.expected_rows = rows(mem)
            self.expected_hot = critical(mem)
        self.env = {
            **os.environ,
            "TIERMEM_SECRET_STORE": "file",
            "TIERMEM_SYNC_TOKEN": sqld.token,
            "TIERMEM_RECOVERY_KEY": crypto.format_recovery_key(key),
        }

    def command(self, target: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            "tiermem.tui",
            "--home",
            str(target),
            "--agent-id",
            self.agent_id,
            "restore",
            "--url",
            self.url,
            "--page-rows",
            str(PAGE_ROWS),
        ]

    def run(self, target: Path) -> float:
        started = time.perf_counter()
        done = subprocess.run(
            self.command(target), env=self.env, capture_output=True, timeout=PATIENCE
        )
        assert done.returncode == 0, done.stderr.decode()
        return time.perf_counter() - started

    def state(self, target: Path) -> str:
        """'old', 'usable' or 'complete'; anything else fails the test."""
        if not target.exists() or not any(target.iterdir()):
            return "old"
        with Memory(target, self.agent_id) as mem:
            assert critical(mem) == self.expected_hot, "a home with a partial critical state"
            assert mem.home.memory_md(self.agent_id).exists()
            found = rows(mem)
            if restore_pending(target, self.agent_id):
                wrong = set(found) - set(self.expected_rows)
                assert not wrong, f"{len(wrong)} memories visible that are not the pushed ones"
                return "usable"
            assert found == self.expected_rows, f"{len(found)} of {len(self.expected_rows)}"
            staged = mem.db.scalar("SELECT count(*) FROM restore_staging")
            assert staged == 0
            return "complete"


def kill_restores(scenario: Scenario, kills: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    full = scenario.run(scenario.tmp / "calibration")
    assert scenario.state(scenario.tmp / "calibration") == "complete"
    print(f"restore kill seed={seed}: an uninterrupted restore takes {full:.2f} s")
    states = {"old": 0, "usable": 0, "complete": 0}
    for i in range(kills):
        target = scenario.tmp / f"target{i}"
        delay = rng.uniform(0.05, full * 1.1)
        proc = subprocess.Popen(
            scenario.command(target),
            env=scenario.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=PATIENCE)
        try:
            state = scenario.state(target)
        except AssertionError as exc:
            raise AssertionError(f"seed={seed} kill {i} after {delay:.3f} s: {exc}") from None
        states[state] += 1
        # A second kill of the rerun, sometimes, then the rerun that must finish the job.
        if state != "complete" and rng.random() < 0.3:
            again = subprocess.Popen(
                scenario.command(target),
                env=scenario.env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(rng.uniform(0.05, full))
            again.send_signal(signal.SIGKILL)
            again.wait(timeout=PATIENCE)
            assert scenario.state(target) in ("old", "usable", "complete")
        scenario.run(target)
        assert scenario.state(target) == "complete", f"seed={seed} kill {i}: rerun incomplete"
        assert not list(scenario.tmp.glob(f".target{i}.restore-*"))
    print(f"{kills} restores killed (seed={seed}): {states}")
    return states


def test_killed_full_restores_are_old_usable_or_complete_and_a_rerun_finishes(
    sqld: SqldServer, tmp_path: Path, agent_id: str
) -> None:
    kill_restores(Scenario(sqld, tmp_path, agent_id), kills=4, seed=11)


@pytest.mark.chaos
def test_full_restore_killed_100_times(sqld: SqldServer, tmp_path: Path, agent_id: str) -> None:
    seed = int(os.environ.get("TIERMEM_KILL_SEED", "2026"))
    states = kill_restores(Scenario(sqld, tmp_path, agent_id), kills=100, seed=seed)
    assert all(states.values()), states  # kills landed in every phase
