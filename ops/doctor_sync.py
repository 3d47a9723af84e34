"""`tiermem doctor`, the sync half: secrets, the server, the clock, the outbox, the daemon.

For every agent of the home that has sync set up: one request to the server (a ``SELECT`` of
its clock) proves the URL is reachable and the token accepted, and gives the clock skew; the
local outbox says how long changes have been waiting; the daemon's lock file says whether a
daemon is pushing. The token is never shown: the transport redacts it from server messages
and every detail here is redacted once more.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import httpx

from tiermem.core import snapshot
from tiermem.core.db import Database
from tiermem.core.environment import environment
from tiermem.core.errors import ConfigError, TiermemError
from tiermem.core.paths import Home
from tiermem.ops.doctor import FAIL, OK, WARN, Check
from tiermem.sync import hlc
from tiermem.sync.devices.secret_store import (
    ENV_STORE,
    ENV_TOKEN,
    TOKEN,
    env_secret,
    keyring_usable,
    open_store,
)
from tiermem.sync.state import Settings, read_settings
from tiermem.sync.vault.hrana import AuthFailed, HranaClient, TransportFailure

__all__ = ["SKEW_FAIL", "SKEW_WARN", "sync_checks"]

SKEW_WARN: Final = 5.0
"""Seconds of clock difference with the server worth a warning."""
SKEW_FAIL: Final = 120.0
"""Beyond this, versions from this device sort wrongly against other devices' ones."""
OUTBOX_WARN: Final = 15 * 60.0
OUTBOX_FAIL: Final = 24 * 3600.0
TIMEOUT: Final = httpx.Timeout(connect=5.0, read=10.0, write=10.0, pool=5.0)
SERVER_TIME_SQL: Final = "SELECT (julianday('now') - 2440587.5) * 86400.0"


def check_keyring() -> Check:
    env = environment()
    try:
        forced = env.secret_store
    except ConfigError:
        shown = (env.get(ENV_STORE) or "").strip().lower()
        return Check("keyring", FAIL, f"{ENV_STORE}={shown!r}: use 'keyring' or 'file'")
    usable = keyring_usable()
    if forced == "file":
        return Check("keyring", OK, f"file store forced by {ENV_STORE} (0600 files in the home)")
    if usable:
        import keyring

        return Check(
            "keyring", OK, f"OS keyring available ({type(keyring.get_keyring()).__name__})"
        )
    if forced == "keyring":
        return Check("keyring", FAIL, f"{ENV_STORE}=keyring but no usable OS keyring was found")
    return Check(
        "keyring",
        WARN,
        "no usable OS keyring: sync secrets go to <home>/secrets/ (0600 files) instead",
    )


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _redact(text: str, token: str | None) -> str:
    return text.replace(token, "[REDACTED]") if token else text


def check_server(
    s: Settings,
    token: str | None,
    *,
    clock: Callable[[], float] = time.time,
    transport: httpx.BaseTransport | None = None,
    insecure_http: bool = False,
) -> list[Check]:
    """One request: reachability, authentication, and the clock skew against the server."""
    name = f"sync[{s.agent_id}]"
    try:
        with HranaClient(
            s.url, token, timeout=TIMEOUT, transport=transport, insecure_http=insecure_http
        ) as client:
            host = client.base_url
            sent = clock()
            result = client.execute(SERVER_TIME_SQL)
            received = clock()
    except AuthFailed as exc:
        return [Check(name, FAIL, _redact(f"{s.url}: {exc}; set a new token", token))]
    except TransportFailure as exc:
        return [Check(name, FAIL, _redact(f"{s.url} is unreachable: {exc}", token))]
    except TiermemError as exc:
        return [Check(name, FAIL, _redact(f"{s.url}: {exc}", token))]
    rtt = received - sent
    checks = [Check(name, OK, f"{host} reachable, token accepted ({rtt * 1000:.0f} ms)")]
    value = result.rows[0][0] if result.rows and result.rows[0] else None
    if not isinstance(value, int | float):
        return [*checks, Check("clock", WARN, "the server did not report its time")]
    server_now = float(value)
    skew = server_now - (sent + received) / 2
    slack = rtt / 2
    ahead = "ahead of" if skew < 0 else "behind"
    detail = f"this device is {abs(skew):.1f} s {ahead} the server (±{slack:.2f} s)"
    if abs(skew) - slack > SKEW_FAIL:
        checks.append(Check("clock", FAIL, detail + ": fix the system clock (NTP)"))
    elif abs(skew) - slack > SKEW_WARN:
        checks.append(Check("clock", WARN, detail))
    else:
        checks.append(Check("clock", OK, detail))
    return checks


def check_outbox(db: Database, s: Settings, now: float) -> Check:
    pending = snapshot.pending(db, s.agent_id)
    name = f"outbox[{s.agent_id}]"
    if not pending and s.inflight is None:
        last = (
            "never pushed"
            if s.last_push_at is None
            else f"last push {_ago(now - s.last_push_at)} ago"
        )
        return Check(name, OK, f"empty ({last})")
    oldest = pending[0][3] if pending else (s.last_error_at or now)
    age = max(0.0, now - oldest)
    detail = f"{len(pending)} change(s) waiting, oldest {_ago(age)}"
    if s.last_error:
        detail += f"; last error: {' '.join(s.last_error.split())[:160]}"
    if age > OUTBOX_FAIL:
        return Check(name, FAIL, detail + ": nothing has been backed up for over a day")
    if age > OUTBOX_WARN:
        return Check(name, WARN, detail + ": is the daemon running?")
    return Check(name, OK, detail)


def check_sync_clock(db: Database, s: Settings, now: float) -> Check:
    """The version clock is not ahead of the wall clock by more than a version may move it (a
    clock an older tiermem let a server's row poison); the next push sets it back."""
    name = f"sync clock[{s.agent_id}]"
    try:
        clock = hlc.parse(s.hlc) if s.hlc else None
    except ValueError:
        return Check(name, FAIL, "the version clock is malformed; the next push sets it back")
    if clock is not None and hlc.ahead(clock, int(now * 1000)):
        days = (clock.wall_ms / 1000 - now) / 86400
        return Check(
            name,
            FAIL,
            f"the version clock is {days:,.0f} day(s) ahead of this machine's clock; the next "
            "`tiermem sync push` sets it back to the newest authenticated version",
        )
    return Check(name, OK, "not ahead of the wall clock")


def check_rejected(db: Database, s: Settings) -> Check:
    """Remote rows that failed authentication stay listed until a pull applies them."""
    name = f"rejected[{s.agent_id}]"
    has_table = db.scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sync_rejected'"
    )
    n = (
        int(db.scalar("SELECT count(*) FROM sync_rejected WHERE agent_id = ?", (s.agent_id,)))
        if has_table
        else 0
    )
    if n:
        return Check(
            name,
            FAIL,
            f"{n} remote record(s) failed authentication and are not applied; every pull "
            "fetches them again (`tiermem sync status`, `tiermem sync check`)",
        )
    return Check(name, OK, "every pulled record authenticated")


def check_daemon(root: Path, agent_id: str) -> Check:
    """The daemon writes its pid into its lock file; a live pid means it runs. (Taking the lock
    to find out would make a daemon starting at that instant give up.)"""
    name = f"daemon[{agent_id}]"
    lock = root / f".daemon-{agent_id}.lock"
    try:
        pid = int(lock.read_text(encoding="ascii").strip() or "0")
    except (OSError, ValueError):
        pid = 0
    if pid > 0:
        try:
            os.kill(pid, 0)
            return Check(name, OK, f"running (pid {pid})")
        except PermissionError:
            return Check(name, OK, f"running (pid {pid}, another user)")
        except OSError:
            pass
    return Check(
        name,
        WARN,
        "not running: changes are pushed only by `tiermem sync push` "
        "(`tiermem service install` runs the daemon in the background)",
    )


def sync_checks(
    root: Path,
    *,
    network: bool = True,
    clock: Callable[[], float] = time.time,
    transport: httpx.BaseTransport | None = None,
) -> list[Check]:
    """The keyring, then for each agent with sync set up: server, clock, outbox, daemon."""
    checks = [check_keyring()]
    home = Home(root)
    if not home.db_path.is_file():
        return checks
    try:
        db = Database(home.db_path)
    except TiermemError:  # the local checks already fail on it
        return [*checks, Check("sync", WARN, "not checked: the database cannot be opened")]
    try:
        try:
            has_table = db.scalar(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sync_state'"
            )
            agents = (
                [str(r[0]) for r in db.query("SELECT agent_id FROM sync_state")]
                if has_table
                else []
            )
            settings = [s for a in sorted(agents) if (s := read_settings(db, a)) is not None]
        except TiermemError as exc:
            return [*checks, Check("sync", FAIL, f"cannot read the sync settings: {exc}")]
        if not settings:
            return [
                *checks,
                Check(
                    "sync",
                    WARN,
                    "not set up: memories live on this device only "
                    "(`tiermem sync init --url libsql://…`)",
                ),
            ]
        for s in settings:
            checks += _agent_checks(home, db, s, network, clock, transport)
    finally:
        db.close()
    return checks


def _agent_checks(
    home: Home,
    db: Database,
    s: Settings,
    network: bool,
    clock: Callable[[], float],
    transport: httpx.BaseTransport | None,
) -> list[Check]:
    name = f"sync[{s.agent_id}]"
    if s.status != "ready":
        return [Check(name, FAIL, "`tiermem sync init` did not finish: run it again")]
    checks: list[Check] = []
    token: str | None = None
    from_env = env_secret(ENV_TOKEN)
    if from_env is not None:
        token = from_env or None
    else:
        try:
            token = open_store(home.root, s.secret_ref, s.secret_store).get(TOKEN)
        except TiermemError as exc:
            checks.append(Check(f"secrets[{s.agent_id}]", FAIL, str(exc)))
    if network:
        insecure = bool(
            db.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'sync_transport'")
            and db.scalar(
                "SELECT COALESCE(max(insecure_http), 0) FROM sync_transport WHERE agent_id = ?",
                (s.agent_id,),
            )
        )
        checks += check_server(s, token, clock=clock, transport=transport, insecure_http=insecure)
    else:
        checks.append(Check(name, OK, f"{s.url} (not contacted: --offline)"))
    checks.append(check_outbox(db, s, clock()))
    checks.append(check_sync_clock(db, s, clock()))
    checks.append(check_rejected(db, s))
    checks.append(check_daemon(home.root, s.agent_id))
    return checks
