"""The version of tiermem: the one place it is written (pyproject.toml reads it from here).

A module of its own, with nothing to import, so the resident process's client can send it at
every hand-over for next to nothing (`tiermem.tui.resident.client`)."""

VERSION = "0.1.0"
