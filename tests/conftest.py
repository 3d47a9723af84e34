"""Shared fixtures: a fake clock and real memory homes on disk, for both database drivers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tiermem.core.engine import Memory
from tiermem.core.scoring import DAY

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    # A runner started in the background of a non-interactive shell ignores ctrl-C, and the
    # processes the tests start would inherit that, so a test that interrupts one would see it
    # finish instead. A handler of our own becomes the default again in a child.
    signal.signal(signal.SIGINT, signal.default_int_handler)

os.environ["TIERMEM_RESIDENT"] = "0"  # a developer's own resident process never runs a test's
# command; `resident_env` turns the hand-over on, with a resident process of the test's own

settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

START = 1_767_225_600.0  # 2026-01-01 00:00 UTC


class Clock:
    """A clock tests move by hand; the engine reads it through `Memory(clock=...)`."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * DAY


@pytest.fixture
def resident_env() -> Iterator[dict[str, str]]:
    """An environment with the hand-over on and the resident socket in a new short folder (a
    socket path must stay under 108 bytes); a resident process started in it is stopped after."""
    runtime = tempfile.mkdtemp(prefix="tmr")
    environ = {**os.environ, "XDG_RUNTIME_DIR": runtime, "TIERMEM_RESIDENT": "1"}
    yield environ
    stop = [sys.executable, "-m", "tiermem.tui", "resident", "stop"]
    subprocess.run(stop, env=environ, capture_output=True, check=False)
    shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["libsql", "sqlite3"])
def driver(request: pytest.FixtureRequest) -> str:
    return str(request.param)


MemoryFactory = Callable[..., Memory]


@pytest.fixture
def open_memory(tmp_path: Path, clock: Clock, driver: str) -> Iterator[MemoryFactory]:
    """Open `Memory` objects on one home; all are closed at the end of the test."""
    opened: list[Memory] = []

    def factory(agent_id: str = "default", **kwargs: object) -> Memory:
        mem = Memory(tmp_path / "home", agent_id, clock=clock, driver=driver, **kwargs)  # type: ignore[arg-type]
        opened.append(mem)
        return mem

    yield factory
    for mem in opened:
        mem.close()


@pytest.fixture
def mem(open_memory: MemoryFactory) -> Memory:
    return open_memory()


@pytest.fixture(autouse=True)
def _isolated_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the host's keyring or inherits sync secrets from the shell: a keyring one
    process finds usable may be missing in the child it starts (`tests/sync/test_secrets.py`
    chooses the store on purpose)."""
    monkeypatch.setenv("TIERMEM_SECRET_STORE", "file")
    for name in (
        "TIERMEM_SYNC_URL",
        "TIERMEM_SYNC_TOKEN",
        "TIERMEM_RECOVERY_KEY",
        "TIERMEM_PASSPHRASE",
    ):
        monkeypatch.delenv(name, raising=False)


# -- secrets: nothing the suite hands to tiermem as a secret may come out of it -------------------


@pytest.fixture(autouse=True)
def _secret_sentinels(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Registers every secret handed to tiermem during the test (see tests/sentinels.py) and
    fails the test if one shows up in an exception message, a CliRunner result, captured
    output read by the test, or a subprocess's output; `pytest_runtest_makereport` below scans
    what pytest captured (stdout, stderr, logs) and the failure text."""
    import subprocess

    from click.testing import CliRunner

    from tests import sentinels
    from tiermem.core.errors import TiermemError
    from tiermem.sync import crypto
    from tiermem.sync.vault import hrana

    found: list[str] = []
    request.node.stash[sentinels.LEAKS] = found  # tests/reliability/test_secrets.py reads it

    def scan(text: object, where: str) -> None:
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        if isinstance(text, str):
            found.extend(f"{kind} in {where}" for kind in sentinels.leaks(text))

    generate = crypto.generate_recovery_key

    def generate_recovery_key() -> bytes:
        key = generate()
        sentinels.register_recovery_key(key)
        return key

    monkeypatch.setattr(crypto, "generate_recovery_key", generate_recovery_key)
    for name in ("wrap_with_passphrase", "unwrap_with_passphrase"):
        original = getattr(crypto, name)

        def with_passphrase(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if len(args) > 1 and isinstance(args[1], str):
                sentinels.register(args[1], "passphrase")
            return _original(*args, **kwargs)

        monkeypatch.setattr(crypto, name, with_passphrase)
    client_init = hrana.HranaClient.__init__

    def hrana_init(self: hrana.HranaClient, url: str, token: str | None, **kwargs: Any) -> None:
        sentinels.register(token, "token")
        client_init(self, url, token, **kwargs)

    monkeypatch.setattr(hrana.HranaClient, "__init__", hrana_init)
    error_init = TiermemError.__init__

    def tiermem_error_init(self: TiermemError, message: str, *args: Any, **kwargs: Any) -> None:
        scan(message, f"a {type(self).__name__} message")
        error_init(self, message, *args, **kwargs)

    monkeypatch.setattr(TiermemError, "__init__", tiermem_error_init)
    invoke = CliRunner.invoke

    def cli_invoke(self: CliRunner, *args: Any, **kwargs: Any) -> Any:
        result = invoke(self, *args, **kwargs)
        scan(result.stdout_bytes + (result.stderr_bytes or b""), "CLI output")
        return result

    monkeypatch.setattr(CliRunner, "invoke", cli_invoke)
    readouterr = pytest.CaptureFixture.readouterr

    def read_captured(self: pytest.CaptureFixture[Any]) -> Any:
        result = readouterr(self)
        scan(str(result.out) + str(result.err), "captured output")
        return result

    monkeypatch.setattr(pytest.CaptureFixture, "readouterr", read_captured)
    communicate = subprocess.Popen.communicate

    def popen_communicate(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> Any:
        out, err = communicate(self, *args, **kwargs)
        scan(out, "a subprocess's stdout")
        scan(err, "a subprocess's stderr")
        return out, err

    monkeypatch.setattr(subprocess.Popen, "communicate", popen_communicate)
    yield
    if found:
        pytest.fail(f"secret leaked: {'; '.join(sorted(set(found)))}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    from tests import sentinels

    outcome: Any = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when != "call":
        return
    texts = {"stdout": report.capstdout, "stderr": report.capstderr, "logs": report.caplog}
    if report.failed:
        texts["the failure"] = report.longreprtext
    found = [
        f"{kind} in {where}" for where, text in texts.items() for kind in sentinels.leaks(text)
    ]
    if found:
        report.outcome = "failed"
        report.longrepr = f"secret leaked: {'; '.join(found)}"
