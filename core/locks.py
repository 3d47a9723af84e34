"""Lock files: one process at a time holds each (`flock`), and the kernel lets go when it dies.

Shared by the background pusher and the resident process (and its `start` and `stop`), so none
of them imports another to take a lock. A holder may write its pid into the file (`record_owner`)
so that another process can find it (`owner`). A holder may remove its lock file: a process that
opened the file just before it went checks, once it holds the lock, that the path still names
its file, and takes the new one otherwise.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def take_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive lock on `path`, or None if another holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if _names(path, fd):
            return fd
        os.close(fd)  # removed (and perhaps made again) while we waited: lock the one there now


def record_owner(fd: int) -> None:
    """Write this process's pid into the lock file it holds through `fd`."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def owner(path: Path) -> int | None:
    """The pid recorded in `path` while some process holds it; None when nobody holds it or
    the holder has not recorded itself (yet)."""
    if not path.exists():
        return None
    fd = take_lock(path)
    if fd is not None:  # nobody holds it
        os.close(fd)
        return None
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdecimal() and int(text) > 0 else None


def _names(path: Path, fd: int) -> bool:
    """Whether `path` is still the file open as `fd`."""
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (on_disk.st_dev, on_disk.st_ino) == (opened.st_dev, opened.st_ino)
