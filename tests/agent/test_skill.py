"""The OpenClaw skill: every command its SKILL.md documents runs, in order, against a temp home
(code blocks, cron lines without their schedule, and the tag table's commands)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SKILL_DIR = Path(__file__).parents[2] / "packaging" / "openclaw"
TRANSCRIPT = Path(__file__).parents[1] / "write" / "fixtures" / "openclaw.jsonl"
BLOCK = re.compile(r"^```(bash|cron)\n(.*?)^```", re.S | re.M)
TABLE_COMMAND = re.compile(r"^\| `\[\[[^`]*\]\]` \| `(tiermem [^`]+)` \|", re.M)


def documented_commands() -> list[str]:
    text = (SKILL_DIR / "SKILL.md").read_text()
    commands = []
    for kind, body in BLOCK.findall(text):
        for line in body.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            commands.append(line.split(None, 5)[5] if kind == "cron" else line)
    return commands


def table_commands() -> list[str]:
    return TABLE_COMMAND.findall((SKILL_DIR / "SKILL.md").read_text())


def test_the_skill_documents_the_three_moments() -> None:
    text = (SKILL_DIR / "SKILL.md").read_text()
    assert text.startswith("---\nname: tiermem\n")
    commands = documented_commands()
    assert any(c.startswith("tiermem context --query") for c in commands)
    assert any(c.startswith("tiermem conversation-end") for c in commands)
    for mode in ("quick", "daily", "monthly"):
        assert f"tiermem consolidate --mode {mode}" in commands
    assert len(table_commands()) == 6
    config = json.loads((SKILL_DIR / "mcp.json").read_text())
    assert config["mcpServers"]["tiermem"] == {"command": "tiermem", "args": ["mcp"]}


def test_every_documented_command_runs(tmp_path: Path) -> None:
    env = os.environ | {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TIERMEM_HOME": str(tmp_path / "home"),
        "MESSAGE": "what did we decide about the concise answers preference?",
        "QUESTION": "concise answers",
        "SESSION_ID": "skill-session-1",
        "TRANSCRIPT": str(TRANSCRIPT),
    }
    env.pop("TIERMEM_SESSION", None)

    def sh(command: str) -> str:
        done = subprocess.run(
            ["bash", "-c", command], cwd=SKILL_DIR, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        assert "Traceback" not in done.stderr
        return done.stdout

    outputs = {command: sh(command) for command in documented_commands()}
    context = next(v for k, v in outputs.items() if k.startswith("tiermem context"))
    assert "## Memory tree" in context
    ref = json.loads(sh('tiermem --json recall "concise answers"'))["entries"][0]["id"]
    for command in table_commands():
        sh(command.replace("REF", ref).replace("WORD", "concise"))
    health = sh("tiermem health")
    assert "Archive queue: 0 items" in health  # the table's unforget brought it back
    assert "Demotions (total): 1" in health  # its forget took it out of hot memory
