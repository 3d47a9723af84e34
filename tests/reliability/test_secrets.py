"""Secrets never leak: not in stdout, stderr, logs, exception messages, `--json` output, snapshot
SVGs or committed fixtures.

The whole suite runs under the checker of tests/conftest.py (`_secret_sentinels` and
`pytest_runtest_makereport`), which knows every token, passphrase and recovery key handed to
tiermem (tests/sentinels.py). These tests prove the checker works, run every sync command with
the sentinel token, passphrase and recovery key and debug logging on, make a hostile server echo
the token back, and scan every committed SVG and fixture.
"""

from __future__ import annotations

import json
import logging
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import sentinels
from tests.sentinels import SENTINEL_PASSPHRASE, SENTINEL_RECOVERY_KEY, SENTINEL_TOKEN
from tests.sync.helpers import init_engine
from tests.sync.sqld import SqldServer
from tiermem.core import logs
from tiermem.core.consolidate import consolidate
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput, NothingToRestore
from tiermem.sync import crypto
from tiermem.sync.daemon import Daemon
from tiermem.sync.vault.hrana import HranaClient, HranaError
from tiermem.tui import cli

ROOT = Path(__file__).resolve().parents[2]
RECOVERY_KEY_SHAPE = re.compile(r"\b(?:[0-9A-Z]{4}-){13}[0-9A-Z]{4}\b")
JWT_SHAPE = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{20,}")
# Known-answer vectors publish their test keys and passphrases by design (tests/fixtures/crypto).
PUBLISHED = ROOT / "tests" / "fixtures" / "crypto"


def test_the_scanner_finds_every_sentinel_and_allows_only_the_documented_reveal() -> None:
    shown = crypto.format_recovery_key(SENTINEL_RECOVERY_KEY)
    assert sentinels.leaks(f"token {SENTINEL_TOKEN}") == ["token"]
    assert sentinels.leaks(f"pw={SENTINEL_PASSPHRASE}!") == ["passphrase"]
    assert sentinels.leaks(shown) == ["recovery key"]
    assert sentinels.leaks(SENTINEL_RECOVERY_KEY.hex()) == ["recovery key (hex)"]
    assert sentinels.leaks(json.dumps({"recovery_key": shown, "ok": True})) == []
    assert sentinels.leaks(json.dumps({"recovery_key": shown, "echo": shown})) == ["recovery key"]
    assert sentinels.leaks("wrong token: garbage") == []  # short test noise is not a secret


def test_the_checker_registers_what_is_handed_over_and_catches_a_leak(
    request: pytest.FixtureRequest,
) -> None:
    key = crypto.generate_recovery_key()  # the suite's generator registers every new key
    assert crypto.format_recovery_key(key) in sentinels.known()
    HranaClient("http://127.0.0.1:9", "a-token-only-this-test-uses-4e1").close()
    assert "a-token-only-this-test-uses-4e1" in sentinels.known()
    leaks = request.node.stash[sentinels.LEAKS]
    InvalidInput(f"bad key {crypto.format_recovery_key(key)}")  # a leaking message…
    assert leaks == ["recovery key in a InvalidInput message"]  # …is caught at once
    leaks.clear()  # (this test leaked on purpose)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.run(list(args))
    out, err = capsys.readouterr()
    found = sentinels.leaks(out + err)
    assert found == [], f"{args}: {found} in {out + err}"
    return code, out


def test_every_sync_command_with_sentinel_secrets(
    sqld: SqldServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    log_file: Path,
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger=logs.LOGGER)  # the log file's set-up chose INFO
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(SENTINEL_RECOVERY_KEY))
    monkeypatch.setenv("TIERMEM_PASSPHRASE", SENTINEL_PASSPHRASE)
    sentinels.register(sqld.token, "token")
    home, agent = str(tmp_path / "home"), "secrets-agent"
    base = ["--home", home, "--agent-id", agent, "--json"]
    code, out = run_cli(capsys, *base, "hot", "--add-lesson", "Keep the vault key wrapped")
    assert code == 0
    code, out = run_cli(
        capsys, *base, "sync", "init", "--url", sqld.url, "--passphrase", "--new-vault"
    )
    assert code == 0 and "recovery_key" not in json.loads(out)  # it came from the environment
    for command in (["sync", "push"], ["sync", "status"], ["doctor"]):
        code, out = run_cli(capsys, *base, *command)
        assert code in (0, 1), (command, out)
    target = ["--home", str(tmp_path / "restored"), "--agent-id", agent, "--json"]
    monkeypatch.setenv("TIERMEM_PASSPHRASE", SENTINEL_PASSPHRASE + " but wrong")
    sentinels.register(SENTINEL_PASSPHRASE + " but wrong", "passphrase")
    code, _ = run_cli(capsys, *target, "restore", "--url", sqld.url, "--passphrase")
    assert code == crypto.WrongPassphrase.exit_code
    other = crypto.generate_recovery_key()
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(other))
    code, _ = run_cli(capsys, *target, "restore", "--url", sqld.url)
    assert code == NothingToRestore.exit_code  # the vault's tag is keyed with its own key
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(SENTINEL_RECOVERY_KEY))
    code, out = run_cli(capsys, *target, "restore", "--url", sqld.url)
    assert code == 0, out
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", SENTINEL_TOKEN)  # a token the server refuses
    code, _ = run_cli(capsys, *base, "hot", "--add-event", "changed after init")
    code, out = run_cli(capsys, *base, "sync", "push", "--attempts", "1")
    assert code == 21, out
    assert sentinels.leaks(caplog.text) == []
    assert log_file.parent.parent == Path(home)  # the home's log is scanned below
    for path in Path(home).rglob("*"):
        if path.is_file() and path.suffix in (".md", ".toml", ".json", ".log"):
            if path.parent.name == "secrets":
                continue  # the 0600 secret store holds the token by design
            assert sentinels.leaks(path.read_text(errors="replace")) == [], path


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    """The home's log file set up as a front end does; detached again afterwards."""
    logger = logging.getLogger(logs.LOGGER)
    level = logger.level
    path = logs.setup_logging(tmp_path / "home")
    yield path
    logger.setLevel(level)
    for handler in list(logger.handlers):
        if isinstance(handler, logs.PrivateRotatingFileHandler):
            logger.removeHandler(handler)
            handler.close()


def test_the_log_file_of_a_daemon_run_holds_no_secret(
    sqld: SqldServer, tmp_path: Path, log_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon pushes, pulls, is refused by the server and stops, with every secret in the
    environment and a module logging one on purpose: the log has entries, none of them."""
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(SENTINEL_RECOVERY_KEY))
    monkeypatch.setenv("TIERMEM_PASSPHRASE", SENTINEL_PASSPHRASE)
    monkeypatch.setenv("TIERMEM_LLM_API_KEY", SENTINEL_TOKEN + "-llm")
    sentinels.register(sqld.token, "token")
    sentinels.register(SENTINEL_TOKEN + "-llm", "LLM API key")
    home = tmp_path / "home"
    with Memory(home, "log-agent") as mem:
        mem.add_lesson("Keep the vault key wrapped", 0.9, "security")
        engine, _ = init_engine(mem, sqld.url, sqld.token)
        engine.close()
        run_daemon(mem, until=lambda daemon: daemon.pushes >= 1 and daemon.pulls >= 1)
        monkeypatch.setenv("TIERMEM_SYNC_TOKEN", SENTINEL_TOKEN)  # refused by the server
        mem.add_event("changed while the token is wrong")
        run_daemon(mem, until=lambda daemon: daemon.errors >= 1)
        consolidate(mem, "quick")
    logging.getLogger("tiermem.sync.daemon").warning(
        "a careless line: %s %s", SENTINEL_TOKEN, sqld.token
    )
    text = log_file.read_text(encoding="utf-8")
    assert stat.S_IMODE(log_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(log_file.parent.stat().st_mode) == 0o700
    for entry in ("daemon started", "daemon pushed", "daemon error", "consolidation quick"):
        assert entry in text, entry
    assert sentinels.leaks(text) == [], text


class CountingDaemon(Daemon):
    """A daemon that counts the errors it reports."""

    errors = 0

    def _emit(self, event: dict[str, Any]) -> None:
        self.errors += event["event"] == "error"
        super()._emit(event)


def run_daemon(mem: Memory, until: Callable[[CountingDaemon], bool]) -> None:
    daemon = CountingDaemon(mem, poll=0.05, error_pause=0.05)
    thread = threading.Thread(target=daemon.run)
    thread.start()
    deadline = time.monotonic() + 30
    while not until(daemon) and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    daemon.stop()
    thread.join(30)
    assert until(daemon) and not thread.is_alive()


def echo_back(request: httpx.Request, status: int) -> httpx.Response:
    """A hostile or broken server that puts the request's Authorization header everywhere."""
    auth = request.headers.get("authorization", "")
    body: dict[str, Any] = {"error": f"denied for {auth}", "message": auth, "code": auth}
    headers = {"Location": f"http://evil.example/?t={auth}", "Retry-After": auth}
    return httpx.Response(status, json=body, headers=headers)


@pytest.mark.parametrize("status", [200, 302, 400, 401, 403, 404, 429, 500, 503])
def test_a_server_echoing_the_token_never_gets_it_into_an_error(status: int) -> None:
    def reply(request: httpx.Request) -> httpx.Response:
        if status == 200:  # a 200 whose SQL error carries the token
            auth = request.headers["authorization"]
            error = {"type": "error", "error": {"message": auth, "code": auth}}
            return httpx.Response(200, json={"results": [error, {"type": "ok"}]})
        return echo_back(request, status)

    transport = httpx.MockTransport(reply)
    with (
        HranaClient("http://127.0.0.1:9", SENTINEL_TOKEN, transport=transport) as client,
        pytest.raises(HranaError) as caught,
    ):
        client.execute("SELECT 1")
    error = caught.value
    assert SENTINEL_TOKEN not in str(error) and SENTINEL_TOKEN not in repr(error)
    assert error.__cause__ is None and error.__context__ is None


def test_no_snapshot_svg_or_committed_fixture_holds_a_secret() -> None:
    files = sorted((ROOT / "tests" / "tui" / "__snapshots__").rglob("*.svg"))
    files += sorted(p for p in (ROOT / "tests" / "fixtures").rglob("*") if p.is_file())
    assert any(p.suffix == ".svg" for p in files)
    scanned = 0
    for path in files:
        if PUBLISHED in path.parents or path.suffix == ".db":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        assert sentinels.leaks(text) == [], path
        assert not JWT_SHAPE.search(text), f"{path} holds an auth token"
        assert not RECOVERY_KEY_SHAPE.search(text), f"{path} holds a recovery key"
        scanned += 1
    for path in (ROOT / "tests" / "fixtures" / "homes").rglob("tiermem.db"):
        data = path.read_bytes().decode("latin-1")
        assert not JWT_SHAPE.search(data) and sentinels.leaks(data) == [], path
        scanned += 1
    assert scanned > 10
