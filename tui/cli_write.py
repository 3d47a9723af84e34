"""CLI commands for the write path: distill, ingest, validate, conversation-end, watch."""

from __future__ import annotations

import click

COMMANDS: list[click.Command] = []
