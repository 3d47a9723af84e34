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
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import sentinels
from tests.sentinels import SENTINEL_PASSPHRASE, SENTINEL_RECOVERY_KEY, SENTINEL_TOKEN
from tests.sync.sqld import SqldServer
from tiermem.core.errors import InvalidInput
from tiermem.sync import crypto
from tiermem.sync.hrana import HranaClient, HranaError
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
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", sqld.token)
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(SENTINEL_RECOVERY_KEY))
    monkeypatch.setenv("TIERMEM_PASSPHRASE", SENTINEL_PASSPHRASE)
    sentinels.register(sqld.token, "token")
    home, agent = str(tmp_path / "home"), "secrets-agent"
    base = ["--home", home, "--agent-id", agent, "--json"]
    code, out = run_cli(capsys, *base, "hot", "--add-lesson", "Keep the vault key wrapped")
    assert code == 0
    code, out = run_cli(capsys, *base, "sync", "init", "--url", sqld.url, "--passphrase")
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
    assert code == crypto.WrongKey.exit_code
    monkeypatch.setenv("TIERMEM_RECOVERY_KEY", crypto.format_recovery_key(SENTINEL_RECOVERY_KEY))
    code, out = run_cli(capsys, *target, "restore", "--url", sqld.url)
    assert code == 0, out
    monkeypatch.setenv("TIERMEM_SYNC_TOKEN", SENTINEL_TOKEN)  # a token the server refuses
    code, _ = run_cli(capsys, *base, "hot", "--add-event", "changed after init")
    code, out = run_cli(capsys, *base, "sync", "push", "--attempts", "1")
    assert code == 21, out
    assert sentinels.leaks(caplog.text) == []
    for path in Path(home).rglob("*"):
        if path.is_file() and path.suffix in (".md", ".toml", ".json", ".log"):
            if path.parent.name == "secrets":
                continue  # the 0600 secret store holds the token by design
            assert sentinels.leaks(path.read_text(errors="replace")) == [], path


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
