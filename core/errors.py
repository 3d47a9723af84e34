"""The error hierarchy. Every error a person can cause is a TiermemError with a one-line message
and its own exit code; front ends print the message and exit with the code, never a traceback."""

from __future__ import annotations


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
