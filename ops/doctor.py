"""`tiermem doctor`, the local half: is this memory home healthy?

Each check returns one `Check` with a verdict: ``ok``, ``warn`` (works, but worth a look) or
``FAIL`` (something is broken or will break; the command exits non-zero). Nothing here changes
the home: the database is opened only when it exists, and never migrated. The sync half
(keyring, server reachability and auth, clock skew, outbox, daemon) is `tiermem.ops.doctor_sync`.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tiermem.core.config import load_config
from tiermem.core.db import Database, available_driver
from tiermem.core.errors import TiermemError
from tiermem.core.migrations import MIGRATIONS
from tiermem.core.paths import Home, writable

OK: Final = "ok"
WARN: Final = "warn"
FAIL: Final = "FAIL"
RESTORE_ADVICE: Final = "restore it with `tiermem restore` into a new home, or from a backup"
READ_ONLY_NOTE: Final = "reads work, writes are refused (chmod u+w to allow them)"
LOW_DISK_BYTES: Final = 200 * 1024 * 1024


@dataclass(frozen=True)
class Check:
    name: str
    verdict: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "verdict": self.verdict, "detail": self.detail}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _owned_writable(path: Path) -> str | None:
    """Why the user cannot write `path`, judged from its mode bits and owner (so the check also
    means something when run as root, for whom os.access always says yes)."""
    info = path.stat()
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not you (uid {os.geteuid()})"
    if not info.st_mode & stat.S_IWUSR:
        return f"read-only (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def check_home(home: Home) -> Check:
    root = home.root
    if not root.exists():
        return Check(
            "home", WARN, f"{root} does not exist yet (the first command that stores creates it)"
        )
    if not root.is_dir():
        return Check("home", FAIL, f"{root} is not a folder")
    problem = _owned_writable(root)
    if problem and problem.startswith("read-only") and os.access(root, os.R_OK | os.X_OK):
        return Check("home", WARN, f"{root}: {problem}: {READ_ONLY_NOTE}")
    if problem is None and not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        problem = "not readable and writable by you"
    if problem:
        return Check("home", FAIL, f"{root}: {problem}")
    mode = _mode(root)
    if mode & 0o077:
        return Check(
            "home", WARN, f"{root} is open to other users (mode {mode:04o}): chmod 700 {root}"
        )
    return Check("home", OK, f"{root} (mode {mode:04o})")


def check_files(home: Home) -> Check:
    """The database and its journal files must be writable by their owner; secret files must be
    private (the file store refuses them otherwise)."""
    problems: list[str] = []
    fatal = False
    for path in (home.db_path, *(home.root / f"tiermem.db{s}" for s in ("-wal", "-shm"))):
        if path.exists():
            problem = _owned_writable(path)
            if problem:
                problems.append(f"{path.name} {problem}")
                fatal = fatal or not (problem.startswith("read-only") and os.access(path, os.R_OK))
    if problems and not fatal:
        problems[-1] += f": {READ_ONLY_NOTE}"
    secrets = home.root / "secrets"
    if secrets.is_dir():
        for path in sorted(secrets.iterdir()):
            mode = _mode(path)
            if path.is_file() and mode & 0o077:
                problems.append(f"{path} is accessible by other users (chmod 600 {path})")
                fatal = True
        if _mode(secrets) & 0o077:
            problems.append(f"{secrets} is open to other users (chmod 700 {secrets})")
    if problems:
        return Check("permissions", FAIL if fatal else WARN, "; ".join(problems))
    return Check("permissions", OK, "database and secret files are private and writable")


def check_disk(home: Home) -> Check:
    try:
        free = shutil.disk_usage(home.root).free
    except OSError as exc:
        return Check("disk", WARN, f"cannot read free space ({exc.strerror})")
    shown = f"{free / 1024**3:.1f} GiB free"
    if free < LOW_DISK_BYTES:
        return Check("disk", WARN, f"only {free / 1024**2:.0f} MiB free on the home's disk")
    return Check("disk", OK, shown)


def check_config(home: Home) -> Check:
    path = home.config_path
    try:
        load_config(path)
    except TiermemError as exc:
        return Check("config", FAIL, str(exc))
    if not path.exists():
        return Check("config", OK, "no config.toml: every default applies")
    return Check("config", OK, f"{path} is valid")


def check_database(home: Home, driver: str | None = None) -> list[Check]:
    """`PRAGMA integrity_check` and the schema version, through the driver tiermem uses."""
    path = home.db_path
    if not path.exists():
        return [Check("database", OK, "no database yet")]
    driver = driver or available_driver()
    read_only = not (writable(home.root) and writable(path))
    try:
        db = Database(path, driver, read_only=read_only)
    except TiermemError as exc:
        if read_only:  # not damaged: it cannot be opened as it is
            return [Check("database", FAIL, f"{exc} (the home is read-only)")]
        return [Check("database", FAIL, f"{exc}; {RESTORE_ADVICE}")]
    try:
        try:
            rows = db.query("PRAGMA integrity_check")
            version = int(db.scalar("PRAGMA user_version") or 0)
            agents = db.query("SELECT agent_id FROM agents ORDER BY agent_id") if version else []
        except TiermemError as exc:
            return [Check("database", FAIL, f"{path}: {exc}")]
    finally:
        db.close()
    results = [str(r[0]) for r in rows]
    size = path.stat().st_size
    if results != ["ok"]:
        shown = "; ".join(results[:3]) + (
            f" (+{len(results) - 3} more)" if len(results) > 3 else ""
        )
        integrity = Check(
            "integrity",
            FAIL,
            f"{path} is damaged: {shown}; {RESTORE_ADVICE}",
        )
    else:
        names = ", ".join(str(a[0]) for a in agents[:5]) + (" …" if len(agents) > 5 else "")
        integrity = Check(
            "integrity",
            OK,
            f"integrity_check ok ({size / 1024**2:.1f} MiB, {driver} driver, "
            + ("read-only, " if read_only else "")
            + f"{len(agents)} agent(s){': ' + names if names else ''})",
        )
    latest = len(MIGRATIONS)
    if version > latest:
        schema = Check(
            "schema",
            FAIL,
            f"schema version {version} is newer than this tiermem ({latest}): upgrade tiermem",
        )
    elif version < latest:
        schema = Check(
            "schema", WARN, f"schema version {version} of {latest}: upgraded on the next write"
        )
    else:
        schema = Check("schema", OK, f"schema version {version} (current)")
    return [integrity, schema]


def local_checks(root: Path, driver: str | None = None) -> list[Check]:
    """Every local check of the home at `root`, in reading order."""
    home = Home(root)
    checks = [check_home(home)]
    if not root.is_dir():
        return checks
    checks += [check_files(home), check_disk(home), check_config(home)]
    checks += check_database(home, driver)
    return checks
