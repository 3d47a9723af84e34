"""CLI commands: placeholder module, filled in by its issue (registered in tui/cli.py)."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
SYNC_COMMANDS: list[click.Command] = []
