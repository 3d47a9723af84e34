"""`tiermem service`: rendered units (`--print`), install/uninstall/status into a temporary
HOME/XDG folder with the service manager replaced by a recorder (systemctl never runs)."""

from __future__ import annotations

import json
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.clikit import run_cli as cli
from tiermem.core.errors import ServiceError
from tiermem.ops import service as svc
from tiermem.tui.cli.commands import service as cli_service


class Recorder:
    """Stands in for systemctl/launchctl: records argv, answers like a healthy manager."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(list(argv))
        if self.fail and self.fail in argv:
            return 1, "Failed to connect to bus: No medium found"
        if "is-enabled" in argv:
            return 0, "enabled"
        if "is-active" in argv:
            return 0, "active" if argv[-1].endswith((".timer", "daemon.service")) else "inactive"
        if argv[:2] == ["launchctl", "print"]:
            return 0, "gui/501/dev.tiermem.daemon = {\n\tstate = running\n}"
        return 0, ""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user = tmp_path / "user"
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(user / ".config"))
    return user


def test_print_shows_every_unit_and_touches_nothing(capsys, env: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, out, err = cli(
        capsys,
        "--home",
        str(home),
        "--json",
        "service",
        "install",
        "--print",
        "--platform",
        "systemd",
        "--daemon",
    )
    assert code == 0, err
    doc = json.loads(out)
    units = {f["unit"]: f for f in doc["files"]}
    assert set(units) == {
        "tiermem-daemon.service",
        *(
            f"tiermem-consolidate-{m}.{k}"
            for m in ("quick", "daily", "monthly")
            for k in ("service", "timer")
        ),
    }
    assert doc["folder"] == str(env / ".config" / "systemd" / "user")
    daemon = units["tiermem-daemon.service"]["content"]
    assert f"--home {home.resolve()} --agent-id default daemon" in daemon
    assert "Restart=on-failure" in daemon and "WantedBy=default.target" in daemon
    quick = units["tiermem-consolidate-quick.timer"]["content"]
    assert "OnCalendar=*-*-* 01,04,07,10,13,16,19,22:30:00" in quick
    assert "OnCalendar=*-*-* 00:00:00" in units["tiermem-consolidate-daily.timer"]["content"]
    assert "OnCalendar=*-*-01 00:15:00" in units["tiermem-consolidate-monthly.timer"]["content"]
    assert "consolidate --mode monthly" in units["tiermem-consolidate-monthly.service"]["content"]
    assert not (env / ".config").exists() and not home.exists()


def test_print_text_launchd(capsys, env: Path, tmp_path: Path) -> None:
    code, out, _ = cli(
        capsys,
        "--home",
        str(tmp_path / "h"),
        "--agent-id",
        "phone",
        "service",
        "install",
        "--print",
        "--platform",
        "launchd",
        "--daemon",
    )
    assert code == 0
    agents = env / "Library" / "LaunchAgents"
    assert f"# {agents}/dev.tiermem.phone.daemon.plist" in out
    docs = [plistlib.loads(chunk.split("\n", 1)[1].encode()) for chunk in out.split("# ")[1:]]
    by_label = {d["Label"]: d for d in docs}
    assert set(by_label) == {
        "dev.tiermem.phone.daemon",
        "dev.tiermem.phone.consolidate-quick",
        "dev.tiermem.phone.consolidate-daily",
        "dev.tiermem.phone.consolidate-monthly",
    }
    quick = by_label["dev.tiermem.phone.consolidate-quick"]["StartCalendarInterval"]
    assert [e["Hour"] for e in quick] == [1, 4, 7, 10, 13, 16, 19, 22]
    assert by_label["dev.tiermem.phone.consolidate-monthly"]["StartCalendarInterval"] == {
        "Day": 1,
        "Hour": 0,
        "Minute": 15,
    }
    assert by_label["dev.tiermem.phone.daemon"]["ProgramArguments"][-3:] == [
        "--agent-id",
        "phone",
        "daemon",
    ]
    assert not agents.exists()


def test_install_status_uninstall_systemd(capsys, env: Path, tmp_path: Path, monkeypatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(cli_service, "RUNNER", recorder)
    home = ["--home", str(tmp_path / "home")]
    code, out, err = cli(capsys, *home, "--json", "service", "install", "--platform", "systemd")
    assert code == 0, err
    doc = json.loads(out)
    folder = env / ".config" / "systemd" / "user"
    # sync is not set up in a fresh home: the timers only
    assert not doc["daemon"] and sorted(p.name for p in folder.iterdir()) == sorted(
        f"tiermem-consolidate-{m}.{k}"
        for m in ("quick", "daily", "monthly")
        for k in ("service", "timer")
    )
    assert ["systemctl", "--user", "daemon-reload"] in recorder.calls
    enable = next(c for c in recorder.calls if "enable" in c)
    assert enable[4:] == [f"tiermem-consolidate-{m}.timer" for m in ("quick", "daily", "monthly")]
    assert all(u["installed"] and u["current"] for u in doc["units"])

    code, out, _ = cli(capsys, *home, "service", "status", "--platform", "systemd")
    assert code == 0
    assert "tiermem-consolidate-daily.timer" in out and "enabled" in out
    assert re.search(r"tiermem-daemon.service +not installed", out)

    # an edited unit is reported as differing
    timer = folder / "tiermem-consolidate-quick.timer"
    timer.write_text(timer.read_text() + "# edited\n")
    _, out, _ = cli(capsys, *home, "service", "status", "--platform", "systemd")
    assert "differs" in out

    recorder.calls.clear()
    code, out, _ = cli(capsys, *home, "service", "uninstall", "--platform", "systemd")
    assert code == 0 and "removed 6 files" in out
    assert list(folder.iterdir()) == []
    assert recorder.calls[0][2] == "show"  # the manager answers first
    assert recorder.calls[1][:4] == ["systemctl", "--user", "disable", "--now"]
    code, out, _ = cli(capsys, *home, "service", "uninstall", "--platform", "systemd")
    assert code == 0 and "nothing installed" in out


def test_the_resident_unit_is_installed_on_request_kept_by_a_reinstall_and_removed_last(
    capsys, env: Path, tmp_path: Path, monkeypatch
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(cli_service, "RUNNER", recorder)
    laptop, work = ["--home", str(tmp_path / "home")], ["--agent-id", "work"]
    install = ["--json", "service", "install", "--platform", "systemd"]
    code, out, err = cli(capsys, *laptop, *install, "--resident")
    assert code == 0, err
    assert json.loads(out)["resident"]
    unit = env / ".config" / "systemd" / "user" / svc.RESIDENT_UNIT
    exec_line = next(x for x in unit.read_text().splitlines() if x.startswith("ExecStart="))
    assert shlex.split(exec_line.removeprefix("ExecStart=")) == [
        sys.executable,
        "-m",
        "tiermem.tui.resident.server",
    ]
    assert f"RestartForceExitStatus={svc.RESIDENT_RENEW_EXIT}" in unit.read_text()
    enable = next(c for c in recorder.calls if "enable" in c)
    restart = next(c for c in recorder.calls if "restart" in c)
    assert svc.RESIDENT_UNIT in enable and svc.RESIDENT_UNIT in restart
    # another agent's install (no flag) keeps the one shared unit and shows it
    code, out, _ = cli(capsys, *laptop, *work, *install)
    assert code == 0 and json.loads(out)["resident"] and unit.exists()
    _, out, _ = cli(capsys, *laptop, *work, "service", "status", "--platform", "systemd")
    assert re.search(rf"{re.escape(svc.RESIDENT_UNIT)} +enabled", out)
    # an agent's uninstall that keeps it, then one that removes it
    uninstall = ["service", "uninstall", "--platform", "systemd"]
    assert cli(capsys, *laptop, *work, *uninstall, "--no-resident")[0] == 0
    assert unit.exists()
    code, out, _ = cli(capsys, *laptop, *uninstall)
    assert code == 0 and "removed 7 files" in out and not unit.exists()
    code, _, err = cli(capsys, *laptop, "service", "install", "--platform", "launchd", "--resident")
    assert code == ServiceError.exit_code and err.count("\n") == 1 and "Linux only" in err


def test_install_with_daemon_launchd(capsys, env: Path, tmp_path: Path, monkeypatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(cli_service, "RUNNER", recorder)
    code, out, err = cli(
        capsys,
        "--home",
        str(tmp_path / "home"),
        "--json",
        "service",
        "install",
        "--platform",
        "launchd",
        "--daemon",
    )
    assert code == 0, err
    agents = env / "Library" / "LaunchAgents"
    assert len(list(agents.glob("*.plist"))) == 4
    assert (env / "Library" / "Logs" / "tiermem").is_dir()
    boots = [c for c in recorder.calls if c[:2] == ["launchctl", "bootstrap"]]
    assert len(boots) == 4 and all(c[3].endswith(".plist") for c in boots)
    states = {u["unit"]: u["active"] for u in json.loads(out)["units"]}
    assert states["dev.tiermem.daemon"] == "running"


def test_manager_failure_is_one_line_error(capsys, env: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli_service, "RUNNER", Recorder(fail="daemon-reload"))
    code, _, err = cli(
        capsys, "--home", str(tmp_path / "h"), "service", "install", "--platform", "systemd"
    )
    assert code == ServiceError.exit_code
    assert (
        err.startswith("tiermem: error: `systemctl --user daemon-reload` failed") and "bus" in err
    )
    assert err.count("\n") == 1


def test_missing_manager_program(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ServiceError, match="systemctl is not available"):
        svc.run_command(["systemctl", "--user", "daemon-reload"])


def test_exec_line_quotes_spaces_and_percent(tmp_path: Path) -> None:
    home = tmp_path / "my home 100%"
    plan = svc.plan(
        "systemd", home, "default", command=["/opt/tier mem/bin/tiermem"], folder=tmp_path
    )
    daemon = plan.files[0].content
    assert "ExecStart='/opt/tier mem/bin/tiermem' --home '" in daemon
    assert "100%%" in daemon


def test_termux_points_to_its_guide(monkeypatch) -> None:
    monkeypatch.setenv("PREFIX", "/data/data/com.termux/files/usr")
    with pytest.raises(ServiceError, match="termux-services"):
        svc.detect_platform()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_accepts_the_units(tmp_path: Path) -> None:
    """systemd's own parser: the unit files verify and every OnCalendar= is a valid calendar."""
    plan = svc.plan(
        "systemd", tmp_path / "home", "default", resident=True, folder=tmp_path / "units"
    )
    assert svc.RESIDENT_UNIT in [f.unit for f in plan.files]
    (tmp_path / "units").mkdir()
    for f in plan.files:
        f.path.write_text(f.content)
    names = [str(f.path) for f in plan.files]
    done = subprocess.run(
        ["systemd-analyze", "verify", *names], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    for job in svc.SCHEDULE:
        done = subprocess.run(
            ["systemd-analyze", "calendar", job.on_calendar],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0 and "Next elapse" in done.stdout, done.stderr
