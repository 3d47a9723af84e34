"""Helpers for the resident-process tests: run a command only through the resident process,
or only in its own process, and compare."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

NOT_HANDED = 255
HAND_OVER = f"""
import sys
from tiermem.tui.resident import client
code = client.forward(sys.argv[1:])
sys.exit({NOT_HANDED} if code is None else code)
"""
"""Runs its arguments only through the resident process: exit 255 if that did not happen."""

CLICK_LOADED = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(f"click loaded: {'click' in sys.modules}\\n"))
from tiermem.tui.entry import main
main(sys.argv[1:])
"""
"""The `tiermem` command as the console script runs it, telling at exit whether click loaded."""

TIERMEM = [sys.executable, "-m", "tiermem.tui"]


def run(
    command: list[str], env: dict[str, str], stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env=env, input=stdin, capture_output=True, text=True, cwd=cwd, timeout=120
    )


def start(env: dict[str, str]) -> int:
    done = run([*TIERMEM, "--json", "resident", "start"], env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["running"] and report["pid"] > 0
    return int(report["pid"])


PATIENT = "60"
"""The hand-over's wait in these tests, unless one sets its own: a busy test machine must not
turn a hand-over into a run here."""


def handed(args: list[str], env: dict[str, str], **kw: object) -> subprocess.CompletedProcess[str]:
    patient = {"TIERMEM_RESIDENT_TIMEOUT": PATIENT, **env}
    return run([sys.executable, "-c", HAND_OVER, *args], patient, **kw)  # type: ignore[arg-type]


def direct(args: list[str], env: dict[str, str], **kw: object) -> subprocess.CompletedProcess[str]:
    return run([*TIERMEM, *args], {**env, "TIERMEM_RESIDENT": "0"}, **kw)  # type: ignore[arg-type]


def both(
    home: str, args: list[str], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """`args` on `home` handed over, and run directly on a copy of `home` made just before (a
    read reinforces what it finds, so a second read of the same home would differ)."""
    twin = f"{home}-twin"
    shutil.rmtree(twin, ignore_errors=True)
    shutil.copytree(home, twin)
    via, here = handed(["--home", home, *args], env), direct(["--home", twin, *args], env)
    here.stdout, here.stderr = (text.replace(twin, home) for text in (here.stdout, here.stderr))
    return via, here


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def socket_of(env: dict[str, str]) -> Path:
    status = json.loads(run([*TIERMEM, "--json", "resident", "status"], env).stdout)
    return Path(status["socket"])
