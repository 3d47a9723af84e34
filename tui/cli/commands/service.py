"""`tiermem service`: the sync daemon and the consolidation schedule as background units
(systemd on Linux, launchd on macOS)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click

from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound
from tiermem.ops import service as svc
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


def _service_plan(
    opts: Options, platform: str | None, daemon: bool | None, resident: bool | None = None
) -> svc.ServicePlan:
    """The plan for the agent; the daemon by default when sync is set up, the resident process
    by default when its unit is installed (so status shows it and a reinstall keeps it)."""
    platform = svc.check_platform(platform) if platform else svc.detect_platform()
    home = opts.resolved_home()
    include = daemon if daemon is not None else _sync_ready(home, opts.agent_id)
    if resident is None:
        resident = (
            platform == "systemd" and (svc.unit_folder(platform) / svc.RESIDENT_UNIT).exists()
        )
    return svc.plan(platform, home, opts.agent_id, daemon=include, resident=resident)


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
    3 hours, daily at midnight, monthly on the 1st. One set per agent (--agent-id). On Linux,
    --resident also keeps the resident process running (see `tiermem resident`)."""


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
) -> None:
    """Write the unit files and enable them (--print: show them only)."""
    shown_daemon = True if print_only and daemon is None else daemon
    plan = _service_plan(opts, platform, shown_daemon, resident)
    if print_only:
        payload: dict[str, Any] = {
            "platform": plan.platform,
            "folder": str(plan.folder),
            "files": [
                {"path": str(f.path), "unit": f.unit, "enable": f.enable, "content": f.content}
                for f in plan.files
            ],
        }
        text = "\n".join(f"# {f.path}\n{f.content}" for f in plan.files)
        emit(opts, payload, text)
        return
    report = svc.install(plan, RUNNER)
    payload = {
        "platform": plan.platform,
        "folder": str(plan.folder),
        "daemon": plan.daemon,
        "resident": plan.resident,
        "units": _units_payload(report),
        "commands": [shlex.join(c) for c in report.commands],
        "notes": list(plan.notes),
    }
    lines = [f"installed {len(plan.files)} files in {plan.folder}", *_units_text(report)]
    if not plan.daemon:
        lines.append(
            "note: no sync daemon (sync is not set up for this agent); after `tiermem sync "
            "init`, run `tiermem service install` again"
        )
    emit(opts, payload, "\n".join(lines))


@service_group.command(name="uninstall")
@_PLATFORM
@_RESIDENT
@pass_options
def service_uninstall(opts: Options, platform: str | None, resident: bool | None) -> None:
    """Stop, disable and remove the units `install` wrote (the resident process's too, unless
    --no-resident: other agents' units may count on it)."""
    plan = _service_plan(opts, platform, True, resident)
    report = svc.uninstall(plan, RUNNER)
    removed = [u.unit for u in report.units if u.enabled == "removed"]
    payload = {"platform": plan.platform, "folder": str(plan.folder), "removed": removed}
    text = f"removed {len(removed)} files from {plan.folder}" if removed else "nothing installed"
    emit(opts, payload, text)


@service_group.command(name="status")
@_PLATFORM
@pass_options
def service_status(opts: Options, platform: str | None) -> None:
    """Show which units are installed, enabled and active."""
    plan = _service_plan(opts, platform, True)
    report = svc.status(plan, RUNNER)
    payload = {
        "platform": plan.platform,
        "folder": str(plan.folder),
        "units": _units_payload(report),
    }
    emit(
        opts, payload, "\n".join([f"{plan.platform} units in {plan.folder}", *_units_text(report)])
    )
