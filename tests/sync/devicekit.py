"""Shared pieces of the device, pairing and rotation tests: homes that join one vault."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.sync.helpers import init_engine, policy
from tests.sync.sqld import SqldServer
from tiermem.core.engine import Memory
from tiermem.sync import crypto
from tiermem.sync.devices.membership import JoinResult, add_device_with_recovery
from tiermem.sync.devices.pairing_approval import answer_pairing
from tiermem.sync.devices.pairing_exchange import start_pairing
from tiermem.sync.engine import SyncEngine


class NoSleep:
    """Polls never wait in tests: every step's precondition is met before it runs."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, seconds: float) -> None:
        self.calls += 1
        if self.calls > 50:
            raise AssertionError("a pairing step waited for something that never came")


@contextmanager
def first_device(
    root: Path, agent_id: str, sqld: SqldServer, *, passphrase: str | None = None
) -> Iterator[tuple[Memory, SyncEngine, bytes]]:
    """A home with sync set up (the vault's first device) and its recovery key."""
    with Memory(root, agent_id) as mem:
        engine, key = init_engine(mem, sqld.url, sqld.token, passphrase=passphrase)
        with engine:
            yield mem, engine, key


def join_with_recovery(
    root: Path, agent_id: str, sqld: SqldServer, recovery_key: bytes, name: str
) -> JoinResult:
    with Memory(root, agent_id) as mem:
        return add_device_with_recovery(
            mem, sqld.url, sqld.token, recovery_key, name, policy=policy()
        )


def pair(root: Path, agent_id: str, sqld: SqldServer, existing: SyncEngine, name: str) -> str:
    """Pair a new home with `existing` (both sides driven in turn); the new device id."""
    with Memory(root, agent_id) as mem:
        pairing = start_pairing(mem, sqld.url, sqld.token, name, policy=policy(), sleep=NoSleep())
        try:
            approval = answer_pairing(existing, sleep=NoSleep())
            code = pairing.wait_code()
            assert approval.wait_code() == code
            approval.approve(code)
            return pairing.finish().device_id
        finally:
            pairing.close()


def open_with(engine: SyncEngine, envelope: bytes, context: crypto.RecordContext) -> bytes:
    """Open an envelope with the key of the epoch in its header, as this device knows it."""
    epoch = crypto.parse_envelope(envelope).epoch
    return crypto.open_record(engine.epoch_key(epoch), context, envelope)


# ---------------------------------------------------------------- `tiermem` on a terminal

PATIENCE = 60.0
BOOT = (
    "import fcntl, os, sys, termios; os.setsid(); fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "from tiermem.tui.entry import main; main(sys.argv[1:])"
)


class Terminal:
    """`tiermem` on a pseudo-terminal that is its controlling terminal (prompts, hidden input)."""

    def __init__(self, args: list[str], env: dict[str, str], patience: float = PATIENCE) -> None:
        self.patience = patience  # the longest wait for output or for the exit
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BOOT, *args], stdin=slave, stdout=slave, stderr=slave, env=env
        )
        os.close(slave)
        self.output = ""
        self.pos = 0

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=self.patience)
        os.close(self.master)

    def _read(self, timeout: float) -> bool:
        if not select.select([self.master], [], [], timeout)[0]:
            return True
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # the child exited and the terminal closed
            return False
        self.output += chunk.decode(errors="replace")
        return bool(chunk)

    def expect(self, text: str) -> str:
        """Wait for `text` after what earlier calls consumed; returns the output in between."""
        start = self.pos
        deadline = time.monotonic() + self.patience
        while text not in self.output[self.pos :]:
            if time.monotonic() > deadline or not self._read(0.1):
                raise AssertionError(f"no {text!r} in terminal output:\n{self.output}")
        self.pos = self.output.index(text, self.pos) + len(text)
        return self.output[start : self.pos]

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def finish(self) -> int:
        code = self.proc.wait(timeout=self.patience)
        while self._read(0.1) and select.select([self.master], [], [], 0)[0]:
            pass
        return code


def terminal_env(token: str) -> dict[str, str]:
    env = {**os.environ, "TIERMEM_SECRET_STORE": "file", "TIERMEM_SYNC_TOKEN": token}
    for name in ("TIERMEM_RECOVERY_KEY", "TIERMEM_PASSPHRASE"):
        env.pop(name, None)
    return env


def six_words(text: str) -> str:
    """The pairing code in a screenful of output (the last line of exactly six words)."""
    lines = [line.strip() for line in text.replace("\r", "").splitlines()]
    return next(line for line in reversed(lines) if len(line.split()) == 6 and line.islower())
