"""The Claude Code hook: its settings snippet names the script, and the script, fed the
SessionEnd JSON Claude Code sends, stores the session once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

HOOK_DIR = Path(__file__).parents[2] / "packaging" / "claude-code"
SESSION = next((Path(__file__).parents[1] / "fixtures" / "import" / "claude-code").rglob("*.jsonl"))
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def _env(tmp_path: Path) -> dict[str, str]:
    return os.environ | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TIERMEM_HOME": str(tmp_path / "home"),
        "HOME": str(tmp_path),
    }


def _hook(tmp_path: Path, payload: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(HOOK_DIR / "session-end.sh")],
        input=json.dumps(payload),
        env=_env(tmp_path),
        capture_output=True,
        text=True,
    )


def _memories(tmp_path: Path) -> list[dict[str, object]]:
    done = subprocess.run(
        ["tiermem", "--json", "export", "--format", "json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout)["memories"])


def test_the_settings_snippet_runs_the_script_at_session_end() -> None:
    settings = json.loads((HOOK_DIR / "settings.json").read_text())
    command = settings["hooks"]["SessionEnd"][0]["hooks"][0]
    assert command["type"] == "command"
    readme = (HOOK_DIR / "README.md").read_text()
    assert f"cp session-end.sh {command['command']}" in readme


def test_the_hook_stores_the_ended_session_once(tmp_path: Path) -> None:
    payload = {
        "session_id": "3f1c9a2e-5d1b-4c7e-9a10-2b3c4d5e6f70",
        "transcript_path": str(SESSION),
        "cwd": str(tmp_path),
        "hook_event_name": "SessionEnd",
        "reason": "exit",
    }
    first = _hook(tmp_path, payload)
    assert first.returncode == 0, first.stderr
    stored = _memories(tmp_path)
    assert "We decided to switch the test runner from nose to pytest." in [
        m["text"] for m in stored
    ]
    again = _hook(tmp_path, payload)
    assert again.returncode == 0, again.stderr
    assert len(_memories(tmp_path)) == len(stored)


def test_a_session_without_a_transcript_is_left_alone(tmp_path: Path) -> None:
    done = _hook(tmp_path, {"session_id": "x", "transcript_path": str(tmp_path / "gone.jsonl")})
    assert done.returncode == 0 and done.stderr == ""
    assert not (tmp_path / "home").exists()


def test_every_documented_command_runs(tmp_path: Path) -> None:
    projects = tmp_path / ".claude" / "projects" / "-home-ann-proj"
    projects.mkdir(parents=True)
    (projects / SESSION.name).write_bytes(SESSION.read_bytes())
    for body in BLOCK.findall((HOOK_DIR / "README.md").read_text()):
        for line in body.splitlines():
            done = subprocess.run(
                ["bash", "-c", line],
                cwd=HOOK_DIR,
                env=_env(tmp_path),
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, f"{line}\n{done.stderr}"
    assert os.access(tmp_path / ".claude" / "hooks" / "tiermem-session-end.sh", os.X_OK)
    assert len(_memories(tmp_path)) >= 2
