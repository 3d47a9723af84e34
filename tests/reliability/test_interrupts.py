"""Ctrl-C at random moments of real commands: always the documented exit, never a traceback,
never a lost or garbled memory.

The demo is the longest-running local write command (a whole agent built from scratch): an
interrupt there lands in imports, engine writes and file renames alike. `sync push` is the one
that talks to the server: an interrupt there lands before, during or after the request, with
the batch saved or not. Unlike SIGKILL (`test_crash.py`), SIGINT runs the commands' clean-ups,
so it tests those paths too.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.conftest import Record, env_int
from tests.sync.helpers import init_engine
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.core.errors import EXIT_INTERRUPTED
from tiermem.core.warm import NewFact
from tiermem.sync import crypto

AGENT = "interrupted"


def _interrupted_demo(home: Path, delay: float) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tiermem.tui", "--home", str(home), "demo"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (home / "MEMORY-demo.md").exists() and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def interrupt_run(tmp_path: Path, seed: int, trials: int, figures: Record) -> None:
    rng = random.Random(seed)
    outcomes = {"interrupted": 0, "finished first": 0}
    for trial in range(trials):
        home = tmp_path / f"home{trial}"
        done = _interrupted_demo(home, rng.uniform(0.0, 0.15))
        assert done.returncode in (0, EXIT_INTERRUPTED), (trial, done.returncode, done.stderr)
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
        outcomes["interrupted" if done.returncode else "finished first"] += 1
        listing = subprocess.run(
            [*done.args[:-1], "--json", "agents", "list"], capture_output=True, text=True
        )
        assert listing.returncode in (0, 4), listing.stderr
    rerun = subprocess.run(done.args, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    figures(f"{trials} interrupts of the demo: {outcomes}; every exit 130 or 0, no traceback")


@pytest.mark.crash
def test_ctrl_c_at_random_moments_of_the_demo(tmp_path: Path, seed: int, figures: Record) -> None:
    interrupt_run(tmp_path, seed, env_int("TIERMEM_INTERRUPTS", 60), figures)


def _facts(start: int, n: int) -> list[NewFact]:
    return [
        NewFact(f"interrupt drill {i} moved crate {i * 7919 % 10007} to bay {i % 17}", "ops", 0.5)
        for i in range(start, start + n)
    ]


def _memories(home: Path) -> list[tuple[object, ...]]:
    with Memory(home, AGENT) as mem:
        rows = mem.db.query(
            "SELECT id, text, category, importance FROM memories WHERE agent_id = ? ORDER BY id",
            (AGENT,),
        )
    return [tuple(r) for r in rows]


STARTING = -1
"""Outcome key: the interrupt landed while Python itself was starting, before tiermem's code."""


def _python_still_starting(returncode: int, stderr: str) -> bool:
    """Python's own start-up met the signal, before the entry point's guard: killed by it
    before its handler was installed (no output), a fatal error of its initialisation (the
    standard streams, `site`), or stopped finding the `-m` module (Python's traceback with no
    frame of tiermem's code)."""
    if stderr.startswith("Fatal Python error: init_"):
        return True
    return returncode == -signal.SIGINT and "tiermem" not in stderr


def push_interrupt_run(
    sqld: SqldServer, tmp_path: Path, seed: int, trials: int, figures: Record
) -> None:
    rng = random.Random(seed)
    source = tmp_path / "source"
    with Memory(source, AGENT) as mem:
        mem.store_many(_facts(0, 50))
        key = crypto.generate_recovery_key()
        engine, _ = init_engine(mem, sqld.url, sqld.token, recovery_key=key)
        engine.close()
    env = {
        **os.environ,
        "TIERMEM_SECRET_STORE": "file",
        "TIERMEM_SYNC_TOKEN": sqld.token,
        "TIERMEM_RECOVERY_KEY": crypto.format_recovery_key(key),
    }
    cli = [sys.executable, "-m", "tiermem.tui", "--agent-id", AGENT]
    push = [*cli, "--home", str(source), "sync", "push"]
    codes = {0: 0, EXIT_INTERRUPTED: 0, STARTING: 0}
    for trial in range(trials):
        with Memory(source, AGENT) as mem:  # a conversation's worth of new facts
            mem.store_many(_facts(50 + 20 * trial, 20))
        proc = subprocess.Popen(push, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.0, 0.6))
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        text = err.decode()
        code = STARTING if _python_still_starting(proc.returncode, text) else proc.returncode
        assert code in codes, (trial, proc.returncode, text)
        assert code == STARTING or "Traceback" not in text, (trial, text)
        assert "internal error" not in text, (trial, text)
        codes[code] += 1
    final = subprocess.run(push, env=env, capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    target = tmp_path / "restored"
    restore = [*cli, "--home", str(target), "restore", "--url", sqld.url]
    done = subprocess.run(restore, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _memories(target) == _memories(source)
    figures(
        f"{trials} interrupted pushes ({codes[EXIT_INTERRUPTED]} cut short, {codes[0]} finished "
        f"first, {codes[STARTING]} before Python ran tiermem): the next push and a restore give "
        "every memory, byte for byte"
    )


@pytest.mark.crash
def test_ctrl_c_at_random_moments_of_a_push(
    sqld: SqldServer, tmp_path: Path, seed: int, figures: Record
) -> None:
    push_interrupt_run(sqld, tmp_path, seed, env_int("TIERMEM_PUSH_INTERRUPTS", 20), figures)
