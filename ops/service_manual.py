"""What to run when no service manager can: the daemon under another supervisor, the
consolidation schedule as crontab lines, and which agent the service is for.

`tiermem service install` prints these when systemd's user manager (or launchd) cannot be
reached, so a container, WSL or an SSH session without a user bus still gets the same schedule.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tiermem.core.agents import known_agents
from tiermem.core.db import Database
from tiermem.core.errors import InvalidInput
from tiermem.core.paths import DEFAULT_AGENT, Home
from tiermem.ops.service import RESIDENT_SERVER, SCHEDULE, Job, tiermem_command


@dataclass(frozen=True)
class ManualSetup:
    """The commands that stand in for the units of one agent."""

    daemon: str
    cron: tuple[str, ...]
    resident: str


def cron_line(job: Job, argv: Sequence[str]) -> str:
    """One crontab line for a consolidation job (cron reads `%` as a newline: escaped)."""
    minute = job.calendar[0][2]
    hours = ",".join(str(hour) for _, hour, _ in job.calendar)
    day = job.calendar[0][0]
    command = shlex.join([*argv, "consolidate", "--mode", job.mode]).replace("%", "\\%")
    return f"{minute} {hours} {'*' if day is None else day} * * {command}"


def manual_setup(
    memory_home: Path, agent_id: str, python: str, command: Sequence[str] | None = None
) -> ManualSetup:
    """The daemon command, the crontab lines and the resident process's command."""
    base = [*(command or tiermem_command()), "--home", str(memory_home), "--agent-id", agent_id]
    return ManualSetup(
        daemon=shlex.join([*base, "daemon"]),
        cron=tuple(cron_line(job, base) for job in SCHEDULE),
        resident=shlex.join([python, "-m", RESIDENT_SERVER]),
    )


def home_agents(memory_home: Path) -> list[str]:
    """The agents the home holds (none when there is no home yet); read only."""
    home = Home(memory_home)
    if not home.db_path.is_file():
        return []
    db = Database(home.db_path, read_only=True)
    try:
        return known_agents(db)
    finally:
        db.close()


def service_agent(memory_home: Path, given: str | None) -> tuple[str, str]:
    """The agent the units are for and why: the one named, else `default`, else the home's only
    agent; a home with several agents and no `default` names them and asks for --agent-id."""
    if given is not None:
        return given, "given with --agent-id"
    agents = home_agents(memory_home)
    if not agents or DEFAULT_AGENT in agents:
        return DEFAULT_AGENT, "the default agent"
    if len(agents) == 1:
        return agents[0], "the only agent in this home"
    raise InvalidInput(
        f"this home has {len(agents)} agents and none is {DEFAULT_AGENT!r} "
        f"({', '.join(agents[:10])}): choose one with --agent-id"
    )
