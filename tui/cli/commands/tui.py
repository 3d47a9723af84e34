"""`tiermem tui` (and `tiermem` with no command on a terminal): the Textual app."""

from __future__ import annotations

import click

from tiermem.core.paths import DEFAULT_AGENT
from tiermem.tui.app import TiermemApp
from tiermem.tui.cli.options import Options, pass_options


@click.command()
@pass_options
def tui(opts: Options) -> None:
    """Open the terminal UI: browse and curate the tiers, the tree, metrics and sync."""
    if opts.agent_id != DEFAULT_AGENT:
        with opts.open():  # only the default agent is created on first run; a typo is refused
            pass
    TiermemApp(opts.home, opts.agent_id).run()
