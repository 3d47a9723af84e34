"""Ctrl-C at random moments of a real command: always the documented exit, never a traceback.

The demo is the longest-running write command (a whole agent built from scratch), and an
interrupt there lands in imports, engine writes and file renames alike. Each trial starts it as
a real process, sends SIGINT at a random moment once its first file appears, and checks the exit
code, stderr, and that the home still opens and a rerun succeeds.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.reliability.conftest import Record, env_int
from tiermem.core.errors import EXIT_INTERRUPTED


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
