"""`sync` and `restore` from a script are handed to the resident process, against a real sqld,
and give the same memory as when each runs in its own process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.residentkit import direct, handed, start
from tests.sync.sqld import SqldServer
from tiermem.core import snapshot
from tiermem.core.engine import Memory
from tiermem.tui.resident import client

pytestmark = pytest.mark.skipif(not client.SUPPORTED, reason="the resident process is Linux-only")


def test_a_restore_handed_over_brings_back_the_same_memory(
    resident_env: dict[str, str], sqld: SqldServer, tmp_path: Path
) -> None:
    env = {**resident_env, "TIERMEM_SYNC_TOKEN": sqld.token}
    laptop, phone = str(tmp_path / "laptop"), str(tmp_path / "phone")
    lesson = ["hot", "--add-lesson", "check the gauges twice", "--importance", "0.9"]
    assert direct(["--home", laptop, *lesson], env).returncode == 0
    assert (
        direct(["--home", laptop, "store", "--text", "the staging host is db2"], env).returncode
        == 0
    )
    init = direct(
        ["--home", laptop, "--json", "sync", "init", "--url", sqld.url, "--new-vault"], env
    )
    assert init.returncode == 0, init.stderr
    key = json.loads(init.stdout)["recovery_key"]
    start(env)
    assert (
        handed(["--home", laptop, "store", "--text", "db2 moved to the rack"], env).returncode == 0
    )
    pushed = handed(["--home", laptop, "--json", "sync", "push"], env)
    assert pushed.returncode == 0 and json.loads(pushed.stdout)["pushed"], pushed.stderr
    restore = ["--json", "restore", "--url", sqld.url, "--stdin"]
    restored = handed(["--home", phone, *restore], env, stdin=key + "\n")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["lessons"] == 1
    with Memory(Path(laptop)) as a, Memory(Path(phone)) as b:
        assert snapshot.dump(a)["hot"] == snapshot.dump(b)["hot"]
    found = json.loads(direct(["--home", phone, "--json", "retrieve", "rack"], env).stdout)
    assert [r["text"] for r in found["results"]] == ["db2 moved to the rack"]
    wrong = handed(["--home", str(tmp_path / "t"), *restore], env, stdin="not a key\n")
    here = direct(["--home", str(tmp_path / "u"), *restore], env, stdin="not a key\n")
    assert (wrong.returncode, wrong.stdout) == (here.returncode, here.stdout) != (0, "")
    assert key not in restored.stdout + restored.stderr + pushed.stdout + pushed.stderr


AFTER_PRELOAD = """
import contextlib, io, json, sys
from tiermem.core import tokens
from tiermem.sync.vault.transport import tls_context
from tiermem.tui.resident.server import preload
preload()
from tiermem.tui.cli import run
loaded = set(sys.modules)
unused = [name for name in ("textual", "mcp") if name in loaded]
codes = []
for command in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()):
        codes.append(run(command))
new = sorted(set(sys.modules) - loaded)
tls = tls_context.cache_info().currsize
loads = tokens._encoding.cache_info().misses
print(json.dumps({"codes": codes, "new": new, "loads": loads, "tls": tls, "unused": unused}))
"""
"""Preloads as the resident process does, runs commands in-process and reports what they
loaded that the preload had not (what every forked child would load again), and what the
preload loaded that no handed command uses (what makes every fork bigger)."""


def test_a_hook_s_commands_load_nothing_the_resident_process_did_not(
    resident_env: dict[str, str], sqld: SqldServer, tmp_path: Path
) -> None:
    env = {**resident_env, "TIERMEM_SYNC_TOKEN": sqld.token}
    laptop, phone = ["--home", str(tmp_path / "laptop")], ["--home", str(tmp_path / "phone")]
    assert direct([*laptop, "store", "--text", "the staging host is db2"], env).returncode == 0
    init = direct([*laptop, "--json", "sync", "init", "--url", sqld.url, "--new-vault"], env)
    assert init.returncode == 0, init.stderr
    env["TIERMEM_RECOVERY_KEY"] = json.loads(init.stdout)["recovery_key"]
    commands = [
        [*laptop, "store", "--text", "db2 moved to the rack"],  # stored uncounted
        [*laptop, "retrieve", "db2 rack"],  # counts the new memory's tokens
        [*laptop, "hot"],
        [*laptop, "sync", "push"],
        [*phone, "restore", "--url", sqld.url],
        [*phone, "retrieve", "rack"],
    ]
    done = subprocess.run(
        [sys.executable, "-c", AFTER_PRELOAD, json.dumps(commands)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["codes"] == [0] * len(commands)
    assert report["new"] == []
    assert report["loads"] == 1  # the tokenizer, loaded by the preload and never again
    assert report["tls"] == 1  # the CA store an https server's commands would load
    assert report["unused"] == []  # the TUI's and the MCP server's libraries: never handed over
