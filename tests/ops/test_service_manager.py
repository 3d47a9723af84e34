"""`tiermem service` against the service manager as a user meets it: no systemd user bus at all
(the real systemctl, or none), and a `systemctl` on PATH that fails at one step. After every
failure the unit folder is checked: all of the install, or none of it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.clikit import run_cli
from tiermem.core.errors import InvalidInput, ServiceError
from tiermem.ops import service as svc

FAKE_SYSTEMCTL = """#!/bin/sh
echo "$*" >> "$FAKE_SYSTEMCTL_LOG"
if [ -n "$FAKE_SYSTEMCTL_FAIL" ]; then
    case " $* " in
        *" $FAKE_SYSTEMCTL_FAIL "*) echo "Failed to $FAKE_SYSTEMCTL_FAIL: Access denied" >&2; exit 1;;
    esac
fi
case "$*" in
    *is-enabled*) echo enabled;;
    *is-active*) echo active;;
esac
exit 0
"""
TIMERS = [f"consolidate-{m}" for m in ("quick", "daily", "monthly")]


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home folder that does not exist yet, with no session bus in the environment."""
    folder = tmp_path / "user"
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    return folder


@pytest.fixture
def fake_systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `systemctl` first on PATH that logs its arguments and fails at $FAKE_SYSTEMCTL_FAIL."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "systemctl"
    script.write_text(FAKE_SYSTEMCTL)
    script.chmod(0o755)
    log = tmp_path / "systemctl.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SYSTEMCTL_LOG", str(log))
    monkeypatch.delenv("FAKE_SYSTEMCTL_FAIL", raising=False)
    return log


def home_with(capsys: pytest.CaptureFixture[str], home: Path, *agents: str) -> None:
    for agent in agents:
        code, _, err = run_cli(
            capsys, "--home", str(home), "--agent-id", agent, "store", "--text", f"{agent} fact"
        )
        assert code == 0, err


def service(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str, str]:
    return run_cli(capsys, "--home", str(home), "service", *args, "--platform", "systemd")


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` and its content ({} when the folder does not exist)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def test_without_a_user_bus_install_writes_nothing_and_says_what_to_run(
    capsys: pytest.CaptureFixture[str], user: Path, tmp_path: Path
) -> None:
    """The real systemctl without a session bus (or no systemctl at all, which is the same)."""
    home = tmp_path / "home"
    home_with(capsys, home, "demo")
    code, out, err = service(capsys, home, "install")
    assert code == ServiceError.exit_code
    assert err.count("\n") == 1 and err.startswith("tiermem: error: systemd's user manager")
    assert "nothing was installed" in err and "Traceback" not in err
    assert not (user / ".config").exists()
    assert "for agent 'demo'" in out
    daemon = next(line.strip() for line in out.splitlines() if line.endswith(" daemon"))
    assert shlex.split(daemon)[-5:] == [
        "--home",
        str(home.resolve()),
        "--agent-id",
        "demo",
        "daemon",
    ]
    cron = [
        line.strip() for line in out.splitlines() if re.match(r"\s+\d+ [\d,]+ [\d*]+ \* \* ", line)
    ]
    assert [line.split()[:5] for line in cron] == [
        ["30", "1,4,7,10,13,16,19,22", "*", "*", "*"],
        ["0", "0", "*", "*", "*"],
        ["15", "0", "1", "*", "*"],
    ]
    # what cron would run works as it is printed
    quick = cron[0].split(maxsplit=5)[5]
    done = subprocess.run(quick, shell=True, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr

    code, out, err = run_cli(
        capsys, "--home", str(home), "--json", "service", "install", "--platform", "systemd"
    )
    doc = json.loads(out)
    assert code == doc["exit_code"] == ServiceError.exit_code and doc["installed"] is False
    assert doc["agent"] == "demo" and len(doc["instead"]["cron"]) == 3
    assert doc["instead"]["daemon"].endswith("--agent-id demo daemon")

    code, _, err = service(capsys, home, "status")
    assert code == ServiceError.exit_code and err.count("\n") == 1
    assert err.startswith("tiermem: error: cannot ask whether the units run: systemd's user")
    code, out, _ = service(capsys, home, "uninstall")
    assert (code, out) == (0, "nothing installed\n")


def test_without_a_user_bus_uninstall_removes_what_an_older_install_left(
    capsys: pytest.CaptureFixture[str], user: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    left = svc.plan("systemd", home.resolve(), "default", daemon=False)
    left.folder.mkdir(parents=True)
    for f in left.files:
        f.path.write_text(f.content)
    code, out, err = service(capsys, home, "uninstall")
    assert code == 0, err
    assert out.startswith(f"removed 6 files from {left.folder}\nnote: the service manager was not")
    assert list(left.folder.iterdir()) == []


@pytest.mark.parametrize("step", ["daemon-reload", "enable", "restart"])
def test_a_failing_step_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str],
    user: Path,
    tmp_path: Path,
    fake_systemctl: Path,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    monkeypatch.setenv("FAKE_SYSTEMCTL_FAIL", step)
    home = tmp_path / "home"
    code, out, err = service(capsys, home, "install", "--daemon")
    assert code == ServiceError.exit_code and out == ""
    assert err.count("\n") == 1 and f"Failed to {step}: Access denied" in err
    assert err.rstrip().endswith("nothing was installed")
    assert not (user / ".config").exists()
    calls = fake_systemctl.read_text().splitlines()
    assert calls[0] == "--user show --property=Version"
    assert calls[-1] == "--user daemon-reload"  # told the files are gone
    if step != "daemon-reload":  # the units it enabled are disabled again
        disable = next(c for c in calls if c.startswith("--user disable --now"))
        assert "tiermem-daemon.service" in disable and "tiermem-consolidate-quick.timer" in disable


def test_a_failing_reinstall_puts_the_previous_units_back(
    capsys: pytest.CaptureFixture[str],
    user: Path,
    tmp_path: Path,
    fake_systemctl: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    assert service(capsys, home, "install")[0] == 0
    folder = user / ".config" / "systemd" / "user"
    older = folder / "tiermem-consolidate-quick.service"
    older.write_text(older.read_text().replace("Nice=10", "Nice=5"))  # an older tiermem's unit
    before = snapshot(user)
    monkeypatch.setenv("FAKE_SYSTEMCTL_FAIL", "restart")
    code, _, err = service(capsys, home, "install", "--daemon")
    assert code == ServiceError.exit_code
    assert err.rstrip().endswith("the units installed before were put back")
    assert snapshot(user) == before  # the daemon unit it added is gone, the edited one back
    disable = next(c for c in fake_systemctl.read_text().splitlines() if "disable" in c)
    assert disable == "--user disable --now tiermem-daemon.service"


def test_the_homes_only_agent_is_used_and_named_and_print_shows_what_install_writes(
    capsys: pytest.CaptureFixture[str], user: Path, tmp_path: Path, fake_systemctl: Path
) -> None:
    home = tmp_path / "home"
    home_with(capsys, home, "demo")
    code, out, err = run_cli(
        capsys,
        "--home",
        str(home),
        "--json",
        "service",
        "install",
        "--print",
        "--platform",
        "systemd",
    )
    assert code == 0, err
    shown = json.loads(out)
    assert shown["agent"] == "demo" and shown["daemon"] is False  # sync is not set up
    code, out, err = service(capsys, home, "install")
    assert code == 0, err
    assert out.startswith("installed 6 files in ") and "for agent 'demo' (the only agent" in out
    folder = user / ".config" / "systemd" / "user"
    assert snapshot(folder) == {Path(f["path"]).name: f["content"] for f in shown["files"]}
    assert all(name.startswith("tiermem-demo-") for name in snapshot(folder))
    code, out, _ = service(capsys, home, "status")
    assert code == 0 and "tiermem-demo-consolidate-daily.timer" in out

    home_with(capsys, home, "work")
    code, _, err = service(capsys, home, "install")
    assert code == InvalidInput.exit_code and err.count("\n") == 1
    assert "2 agents and none is 'default' (demo, work): choose one with --agent-id" in err
    code, out, err = run_cli(
        capsys,
        "--home",
        str(home),
        "--agent-id",
        "work",
        "service",
        "install",
        "--platform",
        "systemd",
    )
    assert code == 0 and "for agent 'work' (given with --agent-id)" in out


def test_launchd_a_failing_bootstrap_boots_out_what_it_loaded_and_removes_the_files(
    capsys: pytest.CaptureFixture[str],
    user: Path,
    tmp_path: Path,
    fake_systemctl: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same script as `launchctl`: the daily agent's bootstrap fails after two loaded."""
    launchctl = fake_systemctl.parent / "bin" / "launchctl"
    launchctl.write_text(FAKE_SYSTEMCTL)
    launchctl.chmod(0o755)
    monkeypatch.setenv(
        "FAKE_SYSTEMCTL_FAIL",
        str(user / "Library/LaunchAgents/dev.tiermem.consolidate-daily.plist"),
    )
    code, _, err = run_cli(
        capsys,
        "--home",
        str(tmp_path / "home"),
        "service",
        "install",
        "--platform",
        "launchd",
        "--daemon",
    )
    assert code == ServiceError.exit_code and err.rstrip().endswith("nothing was installed")
    assert not (user / "Library").exists()  # neither the agents' nor the logs' folder
    calls = fake_systemctl.read_text().splitlines()
    booted_out = [
        c.rsplit("/", 1)[1]
        for c in calls[calls.index(next(c for c in calls if "daily.plist" in c)) + 1 :]
    ]
    assert booted_out == [
        "dev.tiermem.daemon",
        "dev.tiermem.consolidate-quick",
        "dev.tiermem.consolidate-daily",
    ]
