"""`tiermem service`: run the sync daemon and the consolidation schedule in the background.

Linux gets systemd **user** units (no root): `<name>-daemon.service` for `tiermem daemon` and a
oneshot service plus a timer for each consolidation mode, and on request `tiermem-resident.service`
(the resident process, one per install). macOS gets launchd agents in
`~/Library/LaunchAgents`. The schedule is the original design's: quick every 3 hours, daily at midnight,
monthly on the 1st (a quarter of an hour after the daily run, so the two never overlap).

Everything here is plain files and argv lists: `plan()` renders the files without touching
anything (what `--print` shows), `install()`/`uninstall()`/`status()` write or remove them and
call `systemctl --user` / `launchctl` through an injectable runner. `manager_problem()` asks
the manager first; `install()` is all or nothing: a failed step puts back every file as it was.
Without a manager, `service_manual.py` says what to run instead.
"""

from __future__ import annotations

import contextlib
import os
import plistlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from tiermem.core.environment import VARIABLES
from tiermem.core.errors import InvalidInput, ServiceError
from tiermem.core.paths import DEFAULT_AGENT

PLATFORMS: Final = ("systemd", "launchd")
LAUNCHD_PREFIX: Final = "dev.tiermem"


RESIDENT_UNIT: Final = "tiermem-resident.service"
"""One per user and install, whichever agents have units: it serves every home."""
RESIDENT_SERVER: Final = "tiermem.tui.resident.server"
RESIDENT_RENEW_EXIT: Final = 75
"""The resident process's exit after an upgrade changed its files (`EXIT_RENEW` in
tiermem.tui.resident.server, written out: ops does not import the front ends)."""

NO_RESTART_EXIT_CODES: Final = (22, 26, 27, 49, 54)
"""Daemon exits that need a person (sync not set up, a missing secret, another daemon, an
insecure URL refused, this device removed): a service manager must not restart on them."""


@dataclass(frozen=True)
class Job:
    """One consolidation timer: `calendar` entries are (day of month or None, hour, minute)."""

    mode: str
    description: str
    calendar: tuple[tuple[int | None, int, int], ...]

    @property
    def on_calendar(self) -> str:
        """systemd's OnCalendar= for the entries (they share day and minute)."""
        day = self.calendar[0][0]
        hours = ",".join(f"{h:02d}" for _, h, _ in self.calendar)
        minute = self.calendar[0][2]
        return f"*-*-{'*' if day is None else f'{day:02d}'} {hours}:{minute:02d}:00"


SCHEDULE: Final = (
    Job("quick", "every 3 hours", tuple((None, h, 30) for h in range(1, 24, 3))),
    Job("daily", "every day at midnight", ((None, 0, 0),)),
    Job("monthly", "on the 1st of each month at 00:15", ((1, 0, 15),)),
)


@dataclass(frozen=True)
class ServiceFile:
    path: Path
    content: str
    unit: str
    """The systemd unit name or the launchd label the file defines."""
    enable: bool
    """Started/enabled on install (the timers, and the daemon when included); the oneshot
    consolidation services are only started by their timers."""


@dataclass(frozen=True)
class ServicePlan:
    platform: str
    folder: Path
    files: tuple[ServiceFile, ...]
    daemon: bool
    notes: tuple[str, ...] = ()
    resident: bool = False

    def enabled_units(self) -> list[str]:
        return [f.unit for f in self.files if f.enable]


@dataclass
class UnitStatus:
    unit: str
    path: Path
    installed: bool
    current: bool
    """The installed file equals what `install` would write now."""
    enabled: str
    active: str


@dataclass
class ServiceReport:
    platform: str
    folder: Path
    units: list[UnitStatus] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)


Runner = Callable[[Sequence[str]], tuple[int, str]]


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """Run a service-manager command; (exit code, stdout+stderr). A missing program is a
    ServiceError naming it."""
    if shutil.which(argv[0]) is None:
        raise ServiceError(f"{argv[0]} is not available on this system")
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=60)
    return done.returncode, (done.stdout + done.stderr).strip()


def detect_platform() -> str:
    if sys.platform == "darwin":
        return "launchd"
    if "com.termux" in os.environ.get("PREFIX", ""):
        raise ServiceError(
            "Termux has no systemd: run the daemon with termux-services and the consolidation "
            "with cron (packaging/termux/README.md)"
        )
    if sys.platform.startswith("linux"):
        return "systemd"
    raise ServiceError(
        f"no background-service support for {sys.platform}: run `tiermem daemon` and "
        "`tiermem consolidate` from your own scheduler"
    )


def check_platform(platform: str) -> str:
    if platform not in PLATFORMS:
        raise InvalidInput(f"unknown platform {platform!r}: use {' or '.join(PLATFORMS)}")
    return platform


def tiermem_command() -> list[str]:
    """How a service runs this tiermem: the console script beside this interpreter (a pipx or
    uv tool venv, a project .venv), else `python -m tiermem.tui` with this interpreter."""
    script = Path(sys.executable).parent / "tiermem"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "tiermem.tui"]


def unit_folder(
    platform: str, user_home: Path | None = None, env: dict[str, str] | None = None
) -> Path:
    """systemd: $XDG_CONFIG_HOME/systemd/user (default ~/.config); launchd: ~/Library/LaunchAgents."""
    env = dict(os.environ) if env is None else env
    home = user_home if user_home is not None else Path.home()
    if platform == "launchd":
        return home / "Library" / "LaunchAgents"
    config = env.get("XDG_CONFIG_HOME") or str(home / ".config")
    return Path(config) / "systemd" / "user"


def base_name(agent_id: str) -> str:
    """`tiermem` for the default agent, `tiermem-<agent>` for the others (one set per agent)."""
    return "tiermem" if agent_id == DEFAULT_AGENT else f"tiermem-{agent_id}"


def plan(
    platform: str,
    memory_home: Path,
    agent_id: str,
    *,
    daemon: bool = True,
    resident: bool = False,
    command: Sequence[str] | None = None,
    folder: Path | None = None,
    log_folder: Path | None = None,
) -> ServicePlan:
    """The files `install` writes, rendered (nothing is touched)."""
    check_platform(platform)
    if resident and platform != "systemd":
        raise ServiceError("the resident process runs on Linux only (it checks who connects)")
    folder = folder if folder is not None else unit_folder(platform)
    base = [*(command or tiermem_command()), "--home", str(memory_home), "--agent-id", agent_id]
    name = base_name(agent_id)
    if platform == "systemd":
        files = _systemd_files(folder, name, agent_id, base, daemon)
        if resident:
            files.append(_resident_file(folder))
    else:
        logs = (
            log_folder if log_folder is not None else Path.home() / "Library" / "Logs" / "tiermem"
        )
        files = _launchd_files(folder, name, agent_id, base, daemon, logs)
    notes = () if daemon else ("the sync daemon is not included (sync is not set up here)",)
    return ServicePlan(platform, folder, tuple(files), daemon, notes, resident)


# -- systemd -------------------------------------------------------------------------------


def _exec(argv: Sequence[str]) -> str:
    """An ExecStart= line: systemd splits like a shell for quoting, and `%` is its specifier
    character, so it is doubled."""
    return shlex.join(argv).replace("%", "%%")


def _systemd_files(
    folder: Path, name: str, agent_id: str, base: list[str], daemon: bool
) -> list[ServiceFile]:
    files: list[ServiceFile] = []
    if daemon:
        unit = f"{name}-daemon.service"
        text = f"""[Unit]
Description=tiermem sync daemon (agent {agent_id})

[Service]
Type=simple
ExecStart={_exec([*base, "daemon"])}
Restart=on-failure
RestartSec=30
# 22: sync not set up, 26: a secret is missing, 27: another daemon runs, 49: a plain http://
# URL was refused, 54: this device was removed from the vault: restarting cannot help
RestartPreventExitStatus={" ".join(str(c) for c in NO_RESTART_EXIT_CODES)}
Environment=PYTHONUNBUFFERED=1

[Install]
WantedBy=default.target
"""
        files.append(ServiceFile(folder / unit, text, unit, True))
    for job in SCHEDULE:
        service = f"{name}-consolidate-{job.mode}.service"
        timer = f"{name}-consolidate-{job.mode}.timer"
        service_text = f"""[Unit]
Description=tiermem {job.mode} consolidation (agent {agent_id})

[Service]
Type=oneshot
ExecStart={_exec([*base, "consolidate", "--mode", job.mode])}
Nice=10
IOSchedulingClass=idle
"""
        timer_text = f"""[Unit]
Description=tiermem {job.mode} consolidation, {job.description} (agent {agent_id})

[Timer]
OnCalendar={job.on_calendar}
Persistent=true
Unit={service}

[Install]
WantedBy=timers.target
"""
        files.append(ServiceFile(folder / service, service_text, service, False))
        files.append(ServiceFile(folder / timer, timer_text, timer, True))
    return files


def _resident_file(folder: Path) -> ServiceFile:
    """The resident process, kept running: started at login, and again after an upgrade (it
    exits `RESIDENT_RENEW_EXIT` then); `tiermem resident stop` stops it until the next login."""
    text = f"""[Unit]
Description=tiermem resident process (commands start without importing tiermem)

[Service]
Type=simple
ExecStart={_exec([sys.executable, "-m", RESIDENT_SERVER])}
Restart=on-failure
RestartSec=2
# {RESIDENT_RENEW_EXIT}: it stopped because an upgrade changed its files: start it on the new ones
RestartForceExitStatus={RESIDENT_RENEW_EXIT}
Environment=PYTHONUNBUFFERED=1
# it lives for the whole login: no secret of the manager's environment (callers bring theirs)
UnsetEnvironment={" ".join(v.name for v in VARIABLES if v.secret)}

[Install]
WantedBy=default.target
"""
    return ServiceFile(folder / RESIDENT_UNIT, text, RESIDENT_UNIT, True)


# -- launchd -------------------------------------------------------------------------------


def _launchd_files(
    folder: Path, name: str, agent_id: str, base: list[str], daemon: bool, logs: Path
) -> list[ServiceFile]:
    suffix = "" if agent_id == DEFAULT_AGENT else f".{agent_id}"
    files: list[ServiceFile] = []

    def add(kind: str, argv: list[str], extra: dict[str, object]) -> None:
        label = f"{LAUNCHD_PREFIX}{suffix}.{kind}"
        doc: dict[str, object] = {
            "Label": label,
            "ProgramArguments": argv,
            "StandardOutPath": str(logs / f"{name}-{kind}.log"),
            "StandardErrorPath": str(logs / f"{name}-{kind}.log"),
            "EnvironmentVariables": {"PYTHONUNBUFFERED": "1"},
            **extra,
        }
        text = plistlib.dumps(doc, sort_keys=True).decode()
        files.append(ServiceFile(folder / f"{label}.plist", text, label, True))

    if daemon:
        add(
            "daemon",
            [*base, "daemon"],
            {
                "RunAtLoad": True,
                # Restart after a crash or a network failure, not after a clean exit (22, 26, 27
                # need a person: see `tiermem doctor`).
                "KeepAlive": {"SuccessfulExit": False},
                "ThrottleInterval": 30,
            },
        )
    for job in SCHEDULE:
        calendar = []
        for day, hour, minute in job.calendar:
            entry = {"Hour": hour, "Minute": minute}
            if day is not None:
                entry["Day"] = day
            calendar.append(entry)
        add(
            f"consolidate-{job.mode}",
            [*base, "consolidate", "--mode", job.mode],
            {
                "StartCalendarInterval": calendar if len(calendar) > 1 else calendar[0],
                "LowPriorityIO": True,
                "Nice": 10,
            },
        )
    return files


# -- install / uninstall / status ------------------------------------------------------------


def _check(runner: Runner, argv: list[str], report: ServiceReport) -> str:
    report.commands.append(argv)
    code, output = runner(argv)
    if code != 0:
        shown = shlex.join(argv)
        raise ServiceError(f"`{shown}` failed (exit {code}): {' '.join(output.split())[:300]}")
    return output


def _gui_domain() -> str:
    return f"gui/{os.getuid()}"


def manager_problem(platform: str, runner: Runner = run_command) -> str:
    """Why the service manager cannot be asked (no user bus, no GUI session, no program), or ""
    when it answers. Asked first, before anything is written or queried."""
    if platform == "systemd":
        argv = ["systemctl", "--user", "show", "--property=Version"]
        where = "systemd's user manager"
    else:
        argv = ["launchctl", "print", _gui_domain()]
        where = "launchd's user domain"
    try:
        code, output = runner(argv)
    except ServiceError as exc:
        return f"{where} cannot be reached ({exc})"
    if code == 0:
        return ""
    detail = " ".join(output.split())[:200] or f"`{shlex.join(argv)}` exited {code}"
    return f"{where} cannot be reached ({detail})"


@dataclass
class _Written:
    """What `install` changed so far, so that a failure can put it back."""

    previous: dict[Path, str | None]
    """Each file's content before (None: it did not exist)."""
    created: list[Path]
    """Folders made for the files, outermost first."""
    activated: list[str] = field(default_factory=list)
    """Units the manager was asked to start that were not installed before."""

    def new_units(self, the_plan: ServicePlan) -> list[str]:
        return [f.unit for f in the_plan.files if self.previous[f.path] is None]


def _write_files(the_plan: ServicePlan) -> _Written:
    """Write every file of the plan (and launchd's log folder), remembering what was there."""
    previous = {
        f.path: f.path.read_text(encoding="utf-8") if f.path.is_file() else None
        for f in the_plan.files
    }
    folders = [the_plan.folder, *_log_folders(the_plan)]
    written = _Written(previous, [])
    try:
        for folder in folders:
            missing = [p for p in (folder, *folder.parents) if not p.exists()]
            written.created += reversed(missing)
            folder.mkdir(parents=True, exist_ok=True)
        for f in the_plan.files:
            tmp = f.path.with_name(f".{f.path.name}.tmp")
            tmp.write_text(f.content, encoding="utf-8")
            tmp.replace(f.path)
    except OSError as exc:
        _put_back(written)
        raise ServiceError(
            f"cannot write to {the_plan.folder} ({exc.strerror}); nothing was installed"
        ) from None
    return written


def _log_folders(the_plan: ServicePlan) -> list[Path]:
    """launchd's log folders (launchd does not make them)."""
    if the_plan.platform != "launchd":
        return []
    logs = {plistlib.loads(f.content.encode()).get("StandardOutPath") for f in the_plan.files}
    return sorted({Path(log).parent for log in logs if isinstance(log, str)})


def _put_back(written: _Written) -> None:
    """The files as they were before `install`, and the folders it made gone (when empty)."""
    for path, text in written.previous.items():
        with contextlib.suppress(OSError):
            path.with_name(f".{path.name}.tmp").unlink(missing_ok=True)
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text, encoding="utf-8")
    for folder in reversed(written.created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _activate(
    the_plan: ServicePlan, written: _Written, runner: Runner, report: ServiceReport
) -> None:
    """Tell the manager: reload, enable and start (systemd) or bootstrap (launchd)."""
    if the_plan.platform == "systemd":
        _check(runner, ["systemctl", "--user", "daemon-reload"], report)
        units = the_plan.enabled_units()
        written.activated = [u for u in units if u in written.new_units(the_plan)]
        _check(runner, ["systemctl", "--user", "enable", "--now", *units], report)
        # A unit already running from an earlier install picks up a new ExecStart.
        services = [u for u in units if u.endswith(".service")]
        if services:
            _check(runner, ["systemctl", "--user", "restart", *services], report)
        return
    domain = _gui_domain()
    for f in the_plan.files:
        report.commands.append(["launchctl", "bootout", f"{domain}/{f.unit}"])
        runner(report.commands[-1])  # not loaded yet: fine
        if written.previous[f.path] is None:
            written.activated.append(f.unit)
        _check(runner, ["launchctl", "bootstrap", domain, str(f.path)], report)


def _roll_back(the_plan: ServicePlan, written: _Written, runner: Runner) -> str:
    """Undo a failed install: new units stopped, files put back, the manager told. What the
    user is left with, in words."""
    quiet: Runner = _ignoring(runner)
    if the_plan.platform == "systemd":
        if written.activated:
            quiet(["systemctl", "--user", "disable", "--now", *written.activated])
        _put_back(written)
        quiet(["systemctl", "--user", "daemon-reload"])
    else:
        for unit in written.activated:
            quiet(["launchctl", "bootout", f"{_gui_domain()}/{unit}"])
        _put_back(written)
        for f in the_plan.files:
            if written.previous[f.path] is not None:
                quiet(["launchctl", "bootstrap", _gui_domain(), str(f.path)])
    kept = any(text is not None for text in written.previous.values())
    return "the units installed before were put back" if kept else "nothing was installed"


def _ignoring(runner: Runner) -> Runner:
    """`runner` for clean-up steps: a failure or a missing program is no new error."""

    def run(argv: Sequence[str]) -> tuple[int, str]:
        try:
            return runner(argv)
        except ServiceError as exc:
            return 1, str(exc)

    return run


def install(the_plan: ServicePlan, runner: Runner = run_command) -> ServiceReport:
    """Write the files, reload the manager and enable/start the timers (and the daemon): all
    of it, or, when a step fails, nothing (what was written is removed, what was there before
    put back). Ask `manager_problem` first: without a manager nothing should be written."""
    report = ServiceReport(the_plan.platform, the_plan.folder)
    written = _write_files(the_plan)
    try:
        _activate(the_plan, written, runner, report)
    except ServiceError as exc:
        left = _roll_back(the_plan, written, runner)
        raise ServiceError(f"{exc}; {left}") from None
    except BaseException:
        _roll_back(the_plan, written, runner)
        raise
    report.units = status(the_plan, runner).units
    return report


def remove_files(the_plan: ServicePlan) -> list[ServiceFile]:
    """Remove the plan's files that exist, without the manager (it cannot be reached)."""
    present = [f for f in the_plan.files if f.path.exists()]
    try:
        for f in present:
            f.path.unlink(missing_ok=True)
    except OSError as exc:
        raise ServiceError(f"cannot remove files from {the_plan.folder} ({exc.strerror})") from None
    return present


def uninstall(the_plan: ServicePlan, runner: Runner = run_command) -> ServiceReport:
    """Stop and disable what `install` set up and remove its files (missing ones are fine)."""
    report = ServiceReport(the_plan.platform, the_plan.folder)
    present = [f for f in the_plan.files if f.path.exists()]
    if the_plan.platform == "systemd":
        if present:
            argv = ["systemctl", "--user", "disable", "--now", *[f.unit for f in present]]
            report.commands.append(argv)
            runner(argv)  # a unit that never loaded cannot be disabled: nothing to undo
    else:
        for f in present:
            report.commands.append(["launchctl", "bootout", f"{_gui_domain()}/{f.unit}"])
            runner(report.commands[-1])
    remove_files(the_plan)
    if the_plan.platform == "systemd" and present:
        try:
            _check(runner, ["systemctl", "--user", "daemon-reload"], report)
        except ServiceError as exc:
            raise ServiceError(f"removed {len(present)} files, but {exc}") from None
    report.units = [
        UnitStatus(f.unit, f.path, False, False, "removed" if f in present else "absent", "-")
        for f in the_plan.files
    ]
    return report


def status(the_plan: ServicePlan, runner: Runner = run_command) -> ServiceReport:
    """Installed (and current), enabled and active state of every file of the plan."""
    report = ServiceReport(the_plan.platform, the_plan.folder)
    for f in the_plan.files:
        installed = f.path.is_file()
        current = installed and f.path.read_text(encoding="utf-8") == f.content
        enabled, active = "-", "-"
        if installed:
            try:
                enabled, active = _unit_state(the_plan.platform, f, runner, report)
            except ServiceError as exc:
                enabled, active = "unknown", str(exc)
        report.units.append(UnitStatus(f.unit, f.path, installed, current, enabled, active))
    return report


def _unit_state(
    platform: str, f: ServiceFile, runner: Runner, report: ServiceReport
) -> tuple[str, str]:
    if platform == "systemd":
        argv = ["systemctl", "--user", "is-enabled", f.unit]
        report.commands.append(argv)
        enabled = runner(argv)[1].splitlines()[:1] or ["unknown"]
        argv = ["systemctl", "--user", "is-active", f.unit]
        report.commands.append(argv)
        active = runner(argv)[1].splitlines()[:1] or ["unknown"]
        return enabled[0].strip(), active[0].strip()
    argv = ["launchctl", "print", f"{_gui_domain()}/{f.unit}"]
    report.commands.append(argv)
    code, output = runner(argv)
    if code != 0:
        return "not loaded", "inactive"
    state = "loaded"
    for line in output.splitlines():
        key, _, value = line.strip().partition(" = ")
        if key == "state":
            state = value.strip()
    return "loaded", state
