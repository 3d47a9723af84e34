"""`tiermem doctor`'s sync checks against the real sqld: reachability and auth, a bad token
(never printed), a closed port, clock skew, outbox age, the daemon; and `service install`
including the daemon once sync is set up."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.sync.helpers import init_engine
from tests.sync.sqld import SqldServer, free_port, mint_jwt
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.ops.doctor import FAIL, OK, WARN
from tiermem.ops.doctor_sync import SKEW_FAIL, sync_checks
from tiermem.tui.cli import run
from tiermem.tui.cli.commands import service as cli_service


@pytest.fixture
def synced(tmp_path: Path, sqld: SqldServer, agent_id: str) -> Iterator[Path]:
    home = tmp_path / "home"
    with Memory(home, agent_id) as mem:
        mem.add_lesson("Check the doctor before a trip", 0.8, "ops")
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        engine.close()
    yield home


def doctor(capsys, home: Path, agent_id: str) -> tuple[int, dict[str, Any], str]:
    code = run(["--home", str(home), "--json", "doctor"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    by_name = {c["name"]: c for c in doc["checks"]}
    return code, by_name, out + err


def test_healthy_sync(capsys, synced: Path, agent_id: str, sqld: SqldServer) -> None:
    code, checks, _ = doctor(capsys, synced, agent_id)
    assert code == 0
    assert checks[f"sync[{agent_id}]"]["verdict"] == OK
    assert "token accepted" in checks[f"sync[{agent_id}]"]["detail"]
    assert checks["clock"]["verdict"] == OK
    assert checks[f"outbox[{agent_id}]"]["verdict"] == OK
    assert checks[f"daemon[{agent_id}]"]["verdict"] == WARN


def test_bad_token_fails_and_is_never_printed(
    capsys, synced: Path, agent_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    forged = mint_jwt(Ed25519PrivateKey.generate())  # well formed, signed by the wrong key
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", forged)
    code, checks, output = doctor(capsys, synced, agent_id)
    assert code == 1
    check = checks[f"sync[{agent_id}]"]
    assert check["verdict"] == FAIL and "authentication failed (HTTP 401)" in check["detail"]
    assert forged not in output and forged.split(".")[2] not in output
    assert run(["--home", str(synced), "doctor"]) == 1
    text = capsys.readouterr()
    assert forged not in text.out + text.err


def test_unreachable_url(capsys, synced: Path, agent_id: str) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    db = Database(synced / "tiermem.db")
    with db.transaction():
        db.execute("UPDATE sync_state SET url = ? WHERE agent_id = ?", (closed, agent_id))
    db.close()
    code, checks, _ = doctor(capsys, synced, agent_id)
    assert code == 1
    check = checks[f"sync[{agent_id}]"]
    assert (
        check["verdict"] == FAIL and "unreachable" in check["detail"] and closed in check["detail"]
    )
    assert "clock" not in checks
    # --offline does not contact the server at all
    assert run(["--home", str(synced), "--json", "doctor", "--offline"]) == 0
    capsys.readouterr()


def test_clock_skew_and_outbox_age(synced: Path, agent_id: str) -> None:
    def verdicts(offset: float) -> dict[str, str]:
        checks = sync_checks(synced, clock=lambda: time.time() + offset)
        return {c.name: c.verdict for c in checks}

    assert verdicts(0)["clock"] == OK
    assert verdicts(30)["clock"] == WARN
    behind = verdicts(-(SKEW_FAIL + 60))
    assert behind["clock"] == FAIL
    late = verdicts(2 * 86400)  # the queued change has waited two days
    assert late[f"outbox[{agent_id}]"] == FAIL and late["clock"] == FAIL
    assert verdicts(3600)[f"outbox[{agent_id}]"] == WARN


def test_running_daemon_is_seen(synced: Path, agent_id: str) -> None:
    (synced / f".daemon-{agent_id}.lock").write_text(str(os.getpid()))
    checks = {c.name: c for c in sync_checks(synced, network=False)}
    assert checks[f"daemon[{agent_id}]"].verdict == OK
    assert str(os.getpid()) in checks[f"daemon[{agent_id}]"].detail


def test_service_install_includes_the_daemon_once_sync_is_set_up(
    capsys, synced: Path, agent_id: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def recorder(argv: Sequence[str]) -> tuple[int, str]:
        calls.append(list(argv))
        return 0, "enabled" if "is-enabled" in argv else ""

    monkeypatch.setattr(cli_service, "RUNNER", recorder)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    args = ["--home", str(synced), "--agent-id", agent_id, "--json", "service", "install"]
    assert run([*args, "--platform", "systemd"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["daemon"]
    unit = tmp_path / "xdg" / "systemd" / "user" / f"tiermem-{agent_id}-daemon.service"
    assert f"--agent-id {agent_id} daemon" in unit.read_text()
    assert any(c[:3] == ["systemctl", "--user", "restart"] for c in calls)
