"""Every `TIERMEM_*` environment variable: one typed, documented model, read in one place.

`environment()` takes one snapshot of the process environment; its typed properties check a
value when it is used, so a bad variable fails the command that needs it with a one-line
`ConfigError` and leaves the others alone. Precedence, everywhere: command-line flag >
environment variable > config.toml > default (see `tiermem.core.settings`).

Secrets (tokens, keys, passphrases) never appear in `repr`, `str` or an error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final, Literal

from tiermem.core.errors import ConfigError

PREFIX: Final = "TIERMEM_"

HOME: Final = "TIERMEM_HOME"
DRIVER: Final = "TIERMEM_DRIVER"
DEBUG: Final = "TIERMEM_DEBUG"
SESSION: Final = "TIERMEM_SESSION"
LLM_BASE_URL: Final = "TIERMEM_LLM_BASE_URL"
LLM_MODEL: Final = "TIERMEM_LLM_MODEL"
LLM_API_KEY: Final = "TIERMEM_LLM_API_KEY"
SYNC_URL: Final = "TIERMEM_SYNC_URL"
SYNC_TOKEN: Final = "TIERMEM_SYNC_TOKEN"
RECOVERY_KEY: Final = "TIERMEM_RECOVERY_KEY"
PASSPHRASE: Final = "TIERMEM_PASSPHRASE"
SECRET_STORE: Final = "TIERMEM_SECRET_STORE"
RESIDENT: Final = "TIERMEM_RESIDENT"
RESIDENT_TIMEOUT: Final = "TIERMEM_RESIDENT_TIMEOUT"

Driver = Literal["", "libsql", "sqlite3"]
Store = Literal["", "keyring", "file"]


@dataclass(frozen=True)
class Variable:
    """One environment variable: what it holds and what it overrides."""

    name: str
    kind: str
    meaning: str
    flag: str = ""
    """The command-line flag that beats this variable (if any)."""
    config_key: str = ""
    """The dotted config.toml key this variable beats (if any)."""
    secret: bool = False
    choices: tuple[str, ...] = ()

    @property
    def overrides(self) -> str:
        """The flag or config key, as the table in docs/configuration.md shows it."""
        shown = self.flag or self.config_key
        return f"`{shown}`" if shown else ""


VARIABLES: Final[tuple[Variable, ...]] = (
    Variable(
        HOME,
        "path",
        "The memory home folder (default: the platform's user data folder).",
        flag="--home",
    ),
    Variable(
        DRIVER,
        "choice",
        "Database driver: `libsql` (required) or `sqlite3` (the stdlib fallback); unset: "
        "libSQL when its wheel imports, else sqlite3.",
        choices=("libsql", "sqlite3"),
    ),
    Variable(
        DEBUG,
        "flag",
        "Any non-empty value: an internal error raises its traceback, and the log file takes "
        "debug lines.",
    ),
    Variable(
        SESSION,
        "text",
        "Session id for session hygiene (agent commands and the MCP server).",
        flag="--session",
    ),
    Variable(
        LLM_BASE_URL,
        "text",
        "OpenAI-compatible endpoint for `--mode llm`.",
        config_key="llm.base_url",
    ),
    Variable(LLM_MODEL, "text", "Model name sent to that endpoint.", config_key="llm.model"),
    Variable(
        LLM_API_KEY,
        "secret",
        "Bearer token for that endpoint.",
        config_key="llm.api_key",
        secret=True,
    ),
    Variable(SYNC_URL, "text", "Sync database URL (`libsql://…` or `https://…`).", flag="--url"),
    Variable(
        SYNC_TOKEN,
        "secret",
        "Sync auth token, used instead of the stored one and never stored; an empty value "
        "means no token.",
        secret=True,
    ),
    Variable(
        RECOVERY_KEY,
        "secret",
        "Recovery key for `sync init`, `restore` and device commands without a terminal.",
        secret=True,
    ),
    Variable(
        PASSPHRASE,
        "secret",
        "Passphrase for `sync init --passphrase`, `restore` and device commands.",
        secret=True,
    ),
    Variable(
        SECRET_STORE,
        "choice",
        "Where new sync secrets go: `keyring` or `file` (0600 files in the home); unset: the "
        "keyring when usable, else the file.",
        choices=("keyring", "file"),
    ),
    Variable(
        RESIDENT,
        "flag",
        "`0`: run every command in its own process, even while `tiermem resident start` runs "
        "(read by the entry point itself, before this model loads).",
    ),
    Variable(
        RESIDENT_TIMEOUT,
        "seconds",
        "How long a command waits for the resident process to take it before running in its "
        "own process (default 2; read by the entry point itself).",
    ),
)
BY_NAME: Final[Mapping[str, Variable]] = MappingProxyType({v.name: v for v in VARIABLES})


@dataclass(frozen=True)
class Environment:
    """The `TIERMEM_*` variables that were set, as one frozen snapshot."""

    values: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={'<secret>' if BY_NAME[name].secret else repr(value)}"
            for name, value in self.values.items()
        )
        return f"Environment({shown})"

    __str__ = __repr__

    def get(self, name: str) -> str | None:
        """The raw value of a known variable (an empty value counts), else None."""
        if name not in BY_NAME:
            raise KeyError(f"{name} is not a tiermem environment variable")
        return self.values.get(name)

    def _text(self, name: str) -> str:
        return self.values.get(name) or ""

    def _choice(self, name: str) -> str:
        value = self._text(name).strip().lower()
        choices = BY_NAME[name].choices
        if value and value not in choices:
            allowed = " or ".join(repr(c) for c in choices)
            raise ConfigError(f"{name} must be {allowed}, not {value!r}")
        return value

    @property
    def home(self) -> Path | None:
        value = self._text(HOME)
        return Path(value).expanduser() if value else None

    @property
    def driver(self) -> Driver:
        value = self._choice(DRIVER)
        return "libsql" if value == "libsql" else "sqlite3" if value == "sqlite3" else ""

    @property
    def debug(self) -> bool:
        return bool(self._text(DEBUG))

    @property
    def session(self) -> str | None:
        return self.values.get(SESSION) or None

    @property
    def llm_base_url(self) -> str:
        return self._text(LLM_BASE_URL)

    @property
    def llm_model(self) -> str:
        return self._text(LLM_MODEL)

    @property
    def llm_api_key(self) -> str:
        return self._text(LLM_API_KEY)

    @property
    def sync_url(self) -> str | None:
        return self.values.get(SYNC_URL) or None

    @property
    def sync_token(self) -> str | None:
        """None when unset; "" (set but empty) means "no token"."""
        return self.values.get(SYNC_TOKEN)

    @property
    def secret_store(self) -> Store:
        value = self._choice(SECRET_STORE)
        return "keyring" if value == "keyring" else "file" if value == "file" else ""

    def secrets(self) -> list[str]:
        """The values of the secret variables that are set (what a log must never show)."""
        return [v for name, v in self.values.items() if BY_NAME[name].secret and v]

    def validate(self) -> Environment:
        """Check every variable at once (a one-line `ConfigError` for the first bad one)."""
        for var in VARIABLES:
            if var.choices:
                self._choice(var.name)
        return self


def environment(environ: Mapping[str, str] | None = None) -> Environment:
    """The known `TIERMEM_*` variables of `environ` (default: this process's environment)."""
    source = os.environ if environ is None else environ
    values = {v.name: source[v.name] for v in VARIABLES if v.name in source}
    return Environment(MappingProxyType(values))


def environment_reference() -> str:
    """Markdown: the table of environment variables in docs/configuration.md."""
    lines = ["| variable | type | flag or config key | meaning |", "|---|---|---|---|"]
    for var in VARIABLES:
        kind = " \\| ".join(f"`{c}`" for c in var.choices) if var.choices else var.kind
        lines.append(f"| `{var.name}` | {kind} | {var.overrides} | {var.meaning} |")
    return "\n".join(lines) + "\n"
