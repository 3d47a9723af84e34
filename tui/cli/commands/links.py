"""`tiermem link`: relate two memories, so recall with context brings one along with the other."""

from __future__ import annotations

import click

from tiermem.core import links as linksmod
from tiermem.tui.cli.options import Options, emit, pass_options


@click.command(name="link")
@click.argument("a")
@click.argument("b")
@click.option("--remove", is_flag=True, help="Remove the link instead.")
@pass_options
def link(opts: Options, a: str, b: str, remove: bool) -> None:
    """Link two memories (related_to): `recall --include-context` returns each with the other."""
    with opts.open() as mem:
        changed = linksmod.unlink(mem, a, b) if remove else linksmod.link(mem, a, b)
        now = linksmod.linked(mem, [a]).get(a, [])
    verb = "unlinked" if remove else "linked"
    text = f"{verb}: {a} – {b}" if changed else f"nothing to do: {a} – {b}"
    emit(opts, {"a": a, "b": b, "changed": changed, "linked_to": now}, text)
