"""Changing a stored memory in place: `edit`."""

from __future__ import annotations

import click

from tiermem.core import curate
from tiermem.core.errors import InvalidInput
from tiermem.core.interchange import record_dict
from tiermem.tui.cli.options import Options, emit, pass_options


@click.command()
@click.argument("memory_id")
@click.option("--text", help="The new text.")
@click.option("--category", help="The new category path, e.g. projects/evoclaw/bsc.")
@click.option("--importance", type=float, help="The new importance, 0 to 1.")
@click.option("--url", multiple=True, help="A URL (repeatable; replaces the URLs; '' clears).")
@click.option(
    "--command", multiple=True, help="A shell command (repeatable; replaces them; '' clears)."
)
@click.option("--path", multiple=True, help="A file path (repeatable; replaces them; '' clears).")
@pass_options
def edit(
    opts: Options,
    memory_id: str,
    text: str | None,
    category: str | None,
    importance: float | None,
    url: tuple[str, ...],
    command: tuple[str, ...],
    path: tuple[str, ...],
) -> None:
    """Edit a memory's text, category, importance or metadata (its id stays)."""
    if text is None and category is None and importance is None and not (url or command or path):
        raise InvalidInput("nothing to change: give --text, --category, --importance, --url, …")
    with opts.open() as mem:
        record = curate.edit(
            mem,
            memory_id,
            text=text,
            category=category,
            importance=importance,
            urls=url or None,
            commands=command or None,
            paths=path or None,
        )
    payload = record_dict(record)
    emit(opts, payload, f"edited: {record.id} in {record.category}")
