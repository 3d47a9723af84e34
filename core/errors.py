"""Every error a person, an agent or a server can cause, and the exit code each one maps to.

Front ends print the one-line message and exit with `exit_code`, never with a traceback. The
exit-code table of docs/cli.md is generated from this module (`EXIT_CODES` plus the classes below).

    TiermemError (1)
    ├── InvalidInput (3)  NotFound (4)  LimitExceeded (5)  ConfigError (6)  StorageError (7)
    ├── CryptoError ── WrongKey (12)  WrongPassphrase (13)  TamperedData (14)
    │                  UnsupportedFormat (15)  MalformedKey (16)  KdfParametersOutOfBounds (17)
    ├── HranaError (20) ── TransportFailure  ServerUnavailable  AuthFailed (21)
    │                      RequestRejected ── StreamExpired   SqlError  ProtocolError
    ├── NotInitialised (22)  AlreadyInitialised (23)  NothingToRestore (24)  HomeNotEmpty (25)
    │   MissingSecret (26)  SyncFailed (20/21)  DaemonRunning (27)
    ├── DamageFound (40-43)  PointInTimePruned (44)  ServiceError (50)
    ├── ServerRollback (45)  RecordDeleted (46)  RecordReplayed (47)  RejectedRecords (48)
    │   InsecureTransport (49)
    └── DeviceRevoked (54)  RotationConflict (55)  PairingRefused (56)  PairingTimeout (57)
"""

from __future__ import annotations

from typing import Final

EXIT_WARNINGS: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERNAL: Final = 70
EXIT_INTERRUPTED: Final = 130
DAMAGE_EXIT_CODES: Final[dict[str, int]] = {
    "tampered": 40,
    "missing": 41,
    "rollback": 42,
    "wraps": 43,
    "roster": 63,
}
"""`sync check`: the worst class of damage found names the exit code."""

PROCESS_EXIT_CODES: Final[dict[int, str]] = {
    0: "success",
    EXIT_WARNINGS: "a check found problems: `validate` warnings, `doctor` failures",
    EXIT_USAGE: "usage error (unknown command or option, bad option value)",
    40: "`sync check` found tampered records (they fail authentication)",
    41: "`sync check` found records missing that a manifest lists",
    42: "`sync check` found a record rolled back to an older version",
    43: "`sync check` found missing or unreadable key wraps",
    63: "`sync check` found a device roster that does not verify (forged, reordered, cut)",
    EXIT_INTERNAL: "internal error (rerun with `TIERMEM_DEBUG=1` for the traceback)",
    EXIT_INTERRUPTED: "interrupted (ctrl+c)",
}
"""Exit codes that no single error class owns."""

# SQL-level failures that mean "someone else holds the write lock right now". The whole call
# is a self-contained transaction that rolled back, so trying again later is safe.
TRANSIENT_SQL_CODES: Final = frozenset({"SQLITE_BUSY", "TRANSACTION_BUSY"})


class TiermemError(Exception):
    """Base of every expected failure. `exit_code` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidInput(TiermemError):
    """A value given by the user or an agent is out of range or malformed."""

    exit_code = 3


class NotFound(TiermemError):
    """The memory, node or item named does not exist (for this agent)."""

    exit_code = 4


class LimitExceeded(TiermemError):
    """The operation would break a hard limit (hot 5 KB, tree 50 nodes, ...)."""

    exit_code = 5


class ConfigError(TiermemError):
    """config.toml (or an imported config.json) is unreadable or invalid."""

    exit_code = 6


class StorageError(TiermemError):
    """The memory home or its database cannot be opened, read or written."""

    exit_code = 7


# --------------------------------------------------------------------------------- remote calls


class HranaError(TiermemError):
    """Base of every failure of a remote call. ``retryable`` says whether trying again can help."""

    exit_code = 20
    retryable: bool = False


class TransportFailure(HranaError):
    """The HTTP exchange itself failed: connect/read/write timeout, reset, dropped connection.

    ``maybe_applied`` is False only when the request provably never reached the server
    (connect errors, pool timeouts); after a read failure the server may have committed.
    """

    retryable = True

    def __init__(self, message: str, *, kind: str, maybe_applied: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.maybe_applied = maybe_applied


class ServerUnavailable(HranaError):
    """HTTP 5xx or 429. ``retry_after`` is the server's ``Retry-After`` in seconds, if it sent one."""

    retryable = True

    def __init__(self, message: str, *, status: int, retry_after: float | None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class AuthFailed(HranaError):
    """HTTP 401/403: the token is invalid, expired, or lacks permission. Needs a new token."""

    exit_code = 21

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class RequestRejected(HranaError):
    """Any other non-200 answer (400 protocol error, 404 wrong URL, redirects, ...)."""

    def __init__(self, message: str, *, status: int, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class StreamExpired(RequestRejected):
    """The server no longer knows the stream (``STREAM_EXPIRED``, invalid or stale baton).

    Retryable: every call of this client opens a new stream, so a retry starts clean.
    """

    retryable = True


class SqlError(HranaError):
    """A statement failed inside an HTTP 200 (``type: "error"`` result or a batch step error).

    ``code`` is the server's code (``SQLITE_CONSTRAINT``, ``SQL_PARSE_ERROR``, ``BLOCKED``, ...);
    ``statement`` is the index of the failing statement in the call (None for BEGIN/COMMIT).
    """

    def __init__(self, message: str, *, code: str | None, statement: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.statement = statement
        self.retryable = code in TRANSIENT_SQL_CODES


class ProtocolError(HranaError):
    """The server answered 200 with something that is not a valid pipeline response."""


# --------------------------------------------------------------------------------- cryptography


class CryptoError(TiermemError):
    """Base of the crypto failures. Messages never contain key material or passphrases, and
    every one is raised ``from None`` so no underlying exception rides along."""


class WrongKey(CryptoError):
    """The recovery key or device key is well formed but does not unlock this key wrap."""

    exit_code = 12


class WrongPassphrase(CryptoError):
    """The passphrase does not unlock this key wrap."""

    exit_code = 13


class TamperedData(CryptoError):
    """A record envelope failed authentication (modified, truncated, moved to another
    table/agent/version, or sealed under another vault key), or a blob is structurally damaged.
    A key wrap that fails authentication reads as `WrongKey`/`WrongPassphrase` instead:
    AES-GCM cannot tell a wrong key from a modified wrap."""

    exit_code = 14


class UnsupportedFormat(CryptoError):
    """Unknown magic, format version, cipher suite or wrap kind."""

    exit_code = 15


class MalformedKey(CryptoError):
    """A typed-in or stored key cannot be parsed (a typo, bad checksum, wrong length)."""

    exit_code = 16


class KdfParametersOutOfBounds(CryptoError):
    """Argon2id parameters outside the accepted bounds: refused before any work is done, so a
    hostile wrap cannot make the client allocate gigabytes or spin for minutes."""

    exit_code = 17


# --------------------------------------------------------------------- sync set-up and state


class NotInitialised(TiermemError):
    """Sync is not set up for this agent in this home (or `sync init` did not finish)."""

    exit_code = 22


class AlreadyInitialised(TiermemError):
    """Sync is already set up here, the server already holds a vault for this agent, or it holds
    other vaults and `sync init` was not given `--new-vault` (or confirmed on a terminal)."""

    exit_code = 23


class NothingToRestore(TiermemError):
    """The server holds no vault (or no critical state) for this agent, or none under the given
    recovery key."""

    exit_code = 24


class HomeNotEmpty(TiermemError):
    """A restore would overwrite local memory that the server does not have."""

    exit_code = 25


class MissingSecret(TiermemError):
    """A secret is needed (token, recovery key, passphrase) and there is no way to ask for it."""

    exit_code = 26


class SyncFailed(TiermemError):
    """A remote call failed for good; carries the transport error's exit code (20 or 21)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# -------------------------------------------------------------------------------- sync check


class DamageFound(TiermemError):
    """`sync check` found damage; the exit code names the worst class found."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ------------------------------------------------------------------------------------ daemon


class DaemonRunning(TiermemError):
    """Another daemon already syncs this agent from this home."""

    exit_code = 27


class ResidentFailed(TiermemError):
    """The resident process (`tiermem resident`) could not start, or could not be stopped."""

    exit_code = 28


# ----------------------------------------------------------------------------------- restore


class PointInTimePruned(TiermemError):
    """The point in time asked for is older than what pruning kept."""

    exit_code = 44


class ServerRollback(TiermemError):
    """The server is behind its own record of the vault: a device's pushes are numbered with a
    gap, or a push that another device's push saw is gone. Nothing was restored."""

    exit_code = 45


class RecordDeleted(TiermemError):
    """A record that the vault's manifests list is gone from the server (every version of it,
    and pruning does not explain it). Nothing was restored; `restore --salvage` takes the rest."""

    exit_code = 46


class RecordReplayed(TiermemError):
    """The server serves an older version of a record (or of the critical state) than the
    newest one its manifests list: a rollback of one record or a replayed snapshot. Nothing was
    restored; `restore --salvage` takes what authenticates."""

    exit_code = 47


class RejectedRecords(TiermemError):
    """Records failed authentication and were not applied; every later pull fetches them again
    until they authenticate or a newer version replaces them (`sync status` lists them)."""

    exit_code = 48


class InsecureTransport(TiermemError):
    """A plain `http://` URL to a host other than this machine: the token would travel in
    clear. Use https:// (or libsql://), or accept the risk with `--insecure-http`."""

    exit_code = 49


# -------------------------------------------------------------------------- keys and devices


class DeviceRevoked(TiermemError):
    """This device was removed from the vault: it holds no wrap of the current epoch's key."""

    exit_code = 54


class RotationConflict(TiermemError):
    """Another device rotated the vault key at the same moment; nothing of this one was kept."""

    exit_code = 55


class RosterTampered(TiermemError):
    """The vault's device roster does not verify: an entry is unsigned, signed by a device that
    was removed or by nobody entitled to, out of order, or the server shows less of it than this
    device already verified. Nothing was changed."""

    exit_code = 60


class EpochRollback(TiermemError):
    """The server withholds a key epoch this device has authenticated (its epoch floor): sealing
    under the older key would let a removed device read new data, so nothing is sealed or sent."""

    exit_code = 61


class SupersededEpoch(TamperedData):
    """A record arrived under a key epoch this device already knew was superseded, and the
    rotation's signed tail does not name it: only a removed device or the server makes those."""

    exit_code = 62


# ----------------------------------------------------------------------------------- pairing


class PairingRefused(TiermemError):
    """The codes differ (or the user said no, or the answer does not authenticate): the
    pairing is refused and no key was sent."""

    exit_code = 56


class PairingTimeout(TiermemError):
    """The other device did not take its step in time."""

    exit_code = 57


# ----------------------------------------------------------------------- background services


class ServiceError(TiermemError):
    """The service manager (systemctl --user or launchctl) is missing or refused a change."""

    exit_code = 50


# ------------------------------------------------------------------------------------ agents


class AgentSynced(TiermemError):
    """The agent has sync set up: its vault on the server is named by the agent id, so it
    cannot be renamed or deleted here (its other devices would lose it)."""

    exit_code = 82


class AgentExists(TiermemError):
    """`agents rename` to a name another agent of the home already has."""

    exit_code = 83


# ------------------------------------------------------------------------------------ spaces


class SpaceConflict(TiermemError):
    """`spaces create` of a space that exists, or `spaces include` of one the agent includes
    already."""

    exit_code = 84


class ReadOnlySpace(TiermemError):
    """A write to a space the agent includes as a reader (only writers write to a space)."""

    exit_code = 85


class MemoryOff(TiermemError):
    """Memory is turned off for this agent (`[agents.NAME] memory = false` in config.toml):
    nothing is stored or searched."""

    exit_code = 86


# ----------------------------------------------------------------------- installation


class MissingExtra(TiermemError):
    """A command needs an optional part of tiermem that is not installed (the message names the
    extra to install, e.g. `pip install "tiermem[serve]"`)."""

    exit_code = 105


def error_classes() -> dict[int, list[type[TiermemError]]]:
    """exit code → the classes that set it in their own body (every one is in this module)."""
    codes: dict[int, list[type[TiermemError]]] = {}
    pending: list[type[TiermemError]] = list(TiermemError.__subclasses__())
    while pending:
        cls = pending.pop(0)
        pending += cls.__subclasses__()
        if "exit_code" in vars(cls):
            codes.setdefault(int(vars(cls)["exit_code"]), []).append(cls)
    return dict(sorted(codes.items()))


# -- errors of the optional LLM and vector features (the first two are caught inside core) ------


class LLMError(Exception):
    """The endpoint could not give a usable answer. The message never contains the key."""


class TreeSearchError(Exception):
    """The model gave no usable choice of categories (the message says why)."""


class VectorUnavailable(InvalidInput):
    """Vector retrieval cannot run here (extra not installed, or the sqlite3 driver)."""
