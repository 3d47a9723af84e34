"""CLI commands for encrypted sync: sync init/push/status, restore, daemon."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
