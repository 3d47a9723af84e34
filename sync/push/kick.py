"""Push after each conversation without waiting for the network: `kick` hands the push to the
background at once, and `sync status` reads the last background attempt.

With a daemon running for the home and agent, `kick` wakes it (it watches the wake file). Else
it starts one detached pusher process (`tiermem.sync.push.background`) that outlives the caller: the
pusher lock is taken here and passed to the child, so two conversation-ends at once start one
pusher, and a change made while a pusher runs is pushed by it (it looks again after letting the
lock go). Nothing happens unless sync is set up for the agent. The module is small on purpose:
a conversation-end imports it, and none of the network or crypto code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from tiermem.core.engine import Memory
from tiermem.core.files import replace_private
from tiermem.core.locks import take_lock
from tiermem.core.logs import redact

__all__ = [
    "PUSH_NOTES",
    "Attempt",
    "Kick",
    "daemon_lock_path",
    "kick",
    "last_attempt",
    "pusher_lock_path",
    "record_attempt",
    "take_lock",
    "wake_path",
]

Kick = Literal["daemon", "pusher", "running", "off", "queued"]
"""What `kick` did: woke the daemon, started a pusher, found one running, nothing (sync is not
set up), or could not start a pusher (the change stays queued; the reason is in the log)."""

PUSH_NOTES: Final[dict[str, str]] = {
    "daemon": "pushing in the background (the daemon was woken)",
    "pusher": "pushing in the background",
    "running": "pushing in the background (with the push already under way)",
    "off": "critical state queued for sync",
    "queued": "queued for sync; the background push could not start (see `tiermem logs`)",
}
"""One line per outcome of `kick`, for the front ends."""

PUSHJOB: Final = "tiermem.sync.push.background"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attempt:
    """The last background push: when, whether it went through, and what it said."""

    at: float
    ok: bool
    message: str
    by: str


def daemon_lock_path(root: Path, agent_id: str) -> Path:
    return root / f".daemon-{agent_id}.lock"


def pusher_lock_path(root: Path, agent_id: str) -> Path:
    return root / f".pusher-{agent_id}.lock"


def wake_path(root: Path, agent_id: str) -> Path:
    """The file a running daemon watches: touching it asks for a push now."""
    return root / f".wake-{agent_id}"


def _attempt_path(root: Path, agent_id: str) -> Path:
    return root / f".push-{agent_id}.json"


def _held(path: Path) -> bool:
    if not path.exists():
        return False
    fd = take_lock(path)
    if fd is None:
        return True
    os.close(fd)
    return False


def _sync_ready(mem: Memory) -> bool:
    status = mem.db.scalar("SELECT status FROM sync_state WHERE agent_id = ?", (mem.agent_id,))
    return bool(status == "ready")


def kick(mem: Memory) -> Kick:
    """Hand the push of what `mem` just queued to the background; returns at once."""
    if not _sync_ready(mem):
        return "off"
    try:
        return _hand_over(mem.home.root, mem.agent_id)
    except OSError as exc:
        log.warning("cannot start the background push for agent %s: %s", mem.agent_id, exc)
        return "queued"


def _hand_over(root: Path, agent_id: str) -> Kick:
    if _held(daemon_lock_path(root, agent_id)):
        wake_path(root, agent_id).write_bytes(b"")
        return "daemon"
    fd = take_lock(pusher_lock_path(root, agent_id))
    if fd is None:
        return "running"  # it looks for new work after it lets the lock go
    try:
        _spawn(root, agent_id, fd)
    finally:
        os.close(fd)  # the child holds the lock now
    return "pusher"


def _spawn(root: Path, agent_id: str, fd: int) -> None:
    """Start the pusher in its own session (it survives the caller), holding lock `fd`."""
    child = subprocess.Popen(
        [sys.executable, "-m", PUSHJOB, str(root), agent_id, str(fd)],
        pass_fds=(fd,),
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=root,
    )
    # A long-lived caller (the MCP server) reaps it; a command that exits first just leaves it.
    threading.Thread(target=child.wait, name="tiermem-pusher-reaper", daemon=True).start()


def record_attempt(root: Path, agent_id: str, ok: bool, message: str, by: str, at: float) -> None:
    """Remember the last background push for `sync status` (secrets masked, file 0600)."""
    data = {"at": at, "ok": ok, "message": redact(message), "by": by}
    with contextlib.suppress(OSError):
        replace_private(_attempt_path(root, agent_id), json.dumps(data))


def last_attempt(root: Path, agent_id: str) -> Attempt | None:
    """The last background push, or None if there was none (or its record is unreadable)."""
    try:
        data = json.loads(_attempt_path(root, agent_id).read_text(encoding="utf-8"))
        return Attempt(float(data["at"]), bool(data["ok"]), str(data["message"]), str(data["by"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
