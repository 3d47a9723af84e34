"""`tiermem service`: the sync daemon and the consolidation schedule as background units
(systemd on Linux, launchd on macOS)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound, ServiceError
from tiermem.core.printable import printable
from tiermem.ops import service as svc
from tiermem.ops import service_manual as manual
from tiermem.sync.state import read_settings
from tiermem.tui.cli.options import Options, emit, pass_options

RUNNER: svc.Runner = svc.run_command
"""How `service` calls systemctl/launchctl (tests replace it)."""


def _sync_ready(home: Path, agent_id: str) -> bool:
    """Whether sync is set up for the agent (read without creating a home)."""
    try:
        with Memory(home, agent_id, create=False) as mem:
            settings = read_settings(mem.db, agent_id)
    except NotFound:
        return False
    return settings is not None and settings.status == "ready"


def _agent(opts: Options) -> tuple[str, str]:
    """The agent the units are for, and why that one (`--agent-id`, else the home's)."""
    root = click.get_current_context().find_root()
    given = root.get_parameter_source("agent_id") is not ParameterSource.DEFAULT
    return manual.service_agent(opts.resolved_home(), opts.agent_id if given else None)


def _service_plan(
    opts: Options,
    agent_id: str,
    platform: str | None,
    daemon: bool | None,
    resident: bool | None = None,
) -> svc.ServicePlan:
    """The plan for the agent; the daemon by default when sync is set up, the resident process
    by default when its unit is installed (so status shows it and a reinstall keeps it)."""
    platform = svc.check_platform(platform) if platform else svc.detect_platform()
    home = opts.resolved_home()
    include = daemon if daemon is not None else _sync_ready(home, agent_id)
    if resident is None:
        resident = (
            platform == "systemd" and (svc.unit_folder(platform) / svc.RESIDENT_UNIT).exists()
        )
    return svc.plan(platform, home, agent_id, daemon=include, resident=resident)


def _instead_text(setup: manual.ManualSetup, plan: svc.ServicePlan, agent: str, why: str) -> str:
    daemon = "the sync daemon" if plan.daemon else "the sync daemon, once sync is set up"
    lines = [
        f"Run these instead, for agent {agent!r} ({why}):",
        f"  {daemon}, kept running by another supervisor (runit, s6, supervisord, tmux):",
        f"    {setup.daemon}",
        "  the consolidation schedule, as crontab lines (`crontab -e`):",
        *(f"    {line}" for line in setup.cron),
    ]
    if plan.resident:
        lines += ["  the resident process, kept running likewise:", f"    {setup.resident}"]
    return "\n".join(lines)


def _refuse(opts: Options, plan: svc.ServicePlan, agent: str, why: str, problem: str) -> int:
    """Nothing installed without a manager: say what to run instead; exit ServiceError's code."""
    setup = manual.manual_setup(opts.resolved_home(), agent, sys.executable)
    message = f"{problem}: nothing was installed"
    if opts.json:
        instead = {"daemon": setup.daemon, "cron": list(setup.cron)}
        if plan.resident:
            instead["resident"] = setup.resident
        document = {
            "error": message,
            "type": ServiceError.__name__,
            "exit_code": ServiceError.exit_code,
            "agent": agent,
            "installed": False,
            "instead": instead,
        }
        sys.stdout.write(json.dumps(document) + "\n")
    else:
        sys.stdout.write(printable(_instead_text(setup, plan, agent, why)) + "\n")
    sys.stderr.write(f"tiermem: error: {printable(message)}; run what is shown instead\n")
    return ServiceError.exit_code


def _units_payload(report: svc.ServiceReport) -> list[dict[str, Any]]:
    return [
        {
            "unit": u.unit,
            "path": str(u.path),
            "installed": u.installed,
            "current": u.current,
            "enabled": u.enabled,
            "active": u.active,
        }
        for u in report.units
    ]


def _units_text(report: svc.ServiceReport) -> list[str]:
    width = max((len(u.unit) for u in report.units), default=10)
    lines = []
    for u in report.units:
        if not u.installed:
            state = u.enabled if u.enabled in ("removed", "absent") else "not installed"
            lines.append(f"{u.unit:<{width}}  {state}")
            continue
        stale = "" if u.current else "  (differs from this tiermem's: run install again)"
        lines.append(f"{u.unit:<{width}}  {u.enabled:<9} {u.active}{stale}")
    return lines


_PLATFORM = click.option(
    "--platform",
    type=click.Choice(svc.PLATFORMS),
    help="systemd (Linux) or launchd (macOS); default: this system's.",
)
_DAEMON = click.option(
    "--daemon/--no-daemon",
    default=None,
    help="Include the sync daemon (default: when sync is set up for the agent).",
)


_RESIDENT = click.option(
    "--resident/--no-resident",
    default=None,
    help="Include the resident process, so commands start at once (Linux; one unit for all "
    "agents; default: when its unit is installed).",
)


@click.group(name="service")
def service_group() -> None:
    """Run the sync daemon and the consolidation schedule in the background.

    systemd user units and timers on Linux, launchd agents on macOS: quick consolidation every
    3 hours, daily at midnight, monthly on the 1st. One set per agent: --agent-id, else
    `default`, else the home's only agent. On Linux, --resident also keeps the resident process
    running (see `tiermem resident`).

    When the service manager cannot be reached (no systemd user session), `install` writes
    nothing and prints what to run instead: the daemon under another supervisor, crontab lines."""


@service_group.command(name="install")
@_PLATFORM
@_DAEMON
@_RESIDENT
@click.option("--print", "print_only", is_flag=True, help="Show the files; change nothing.")
@pass_options
def service_install(
    opts: Options,
    platform: str | None,
    daemon: bool | None,
    resident: bool | None,
    print_only: bool,
) -> int:
    """Write the unit files and enable them (--print: show them only)."""
    agent, why = _agent(opts)
    plan = _service_plan(opts, agent, platform, daemon, resident)
    if print_only:
        _print_plan(opts, plan, agent, why)
        return 0
    problem = svc.manager_problem(plan.platform, RUNNER)
    if problem:
        return _refuse(opts, plan, agent, why, problem)
    report = svc.install(plan, RUNNER)
    payload = {
        "platform": plan.platform,
        "folder": str(plan.folder),
        "agent": agent,
        "daemon": plan.daemon,
        "resident": plan.resident,
        "units": _units_payload(report),
        "commands": [shlex.join(c) for c in report.commands],
        "notes": list(plan.notes),
    }
    lines = [
        f"installed {len(plan.files)} files in {plan.folder} for agent {agent!r} ({why})",
        *_units_text(report),
    ]
    if not plan.daemon:
        lines.append(
            "note: no sync daemon (sync is not set up for this agent); after `tiermem sync "
            "init`, run `tiermem service install` again"
        )
    emit(opts, payload, "\n".join(lines))
    return 0


def _print_plan(opts: Options, plan: svc.ServicePlan, agent: str, why: str) -> None:
    """The files `install` would write, exactly those; which agent and why on stderr."""
    payload: dict[str, Any] = {
        "platform": plan.platform,
        "folder": str(plan.folder),
        "agent": agent,
        "daemon": plan.daemon,
        "notes": list(plan.notes),
        "files": [
            {"path": str(f.path), "unit": f.unit, "enable": f.enable, "content": f.content}
            for f in plan.files
        ],
    }
    if not opts.json:
        click.echo(f"# agent {agent!r} ({why})", err=True)
        for note in plan.notes:
            click.echo(f"# {note}", err=True)
    emit(opts, payload, "\n".join(f"# {f.path}\n{f.content}" for f in plan.files))


@service_group.command(name="uninstall")
@_PLATFORM
@_RESIDENT
@pass_options
def service_uninstall(opts: Options, platform: str | None, resident: bool | None) -> None:
    """Stop, disable and remove the units `install` wrote (the resident process's too, unless
    --no-resident: other agents' units may count on it)."""
    agent, _ = _agent(opts)
    plan = _service_plan(opts, agent, platform, True, resident)
    problem = svc.manager_problem(plan.platform, RUNNER) if _installed(plan) else ""
    if problem:
        removed = [f.unit for f in svc.remove_files(plan)]
        note = f"the service manager was not told: {problem}"
    else:
        report = svc.uninstall(plan, RUNNER)
        removed = [u.unit for u in report.units if u.enabled == "removed"]
        note = ""
    payload = {
        "platform": plan.platform,
        "folder": str(plan.folder),
        "agent": agent,
        "removed": removed,
        "note": note,
    }
    text = f"removed {len(removed)} files from {plan.folder}" if removed else "nothing installed"
    emit(opts, payload, f"{text}\nnote: {note}" if note else text)


def _installed(plan: svc.ServicePlan) -> list[svc.ServiceFile]:
    return [f for f in plan.files if f.path.exists()]


@service_group.command(name="status")
@_PLATFORM
@pass_options
def service_status(opts: Options, platform: str | None) -> None:
    """Show which units are installed, enabled and active."""
    agent, _ = _agent(opts)
    plan = _service_plan(opts, agent, platform, True)
    problem = svc.manager_problem(plan.platform, RUNNER)
    if problem:
        raise ServiceError(
            f"cannot ask whether the units run: {problem}; {len(_installed(plan))} of this "
            f"agent's unit files are in {plan.folder}"
        )
    report = svc.status(plan, RUNNER)
    payload = {
        "platform": plan.platform,
        "folder": str(plan.folder),
        "agent": agent,
        "units": _units_payload(report),
    }
    emit(
        opts, payload, "\n".join([f"{plan.platform} units in {plan.folder}", *_units_text(report)])
    )
