"""`tiermem demo`: a demo agent with months of realistic memories, for the TUI to show."""

from __future__ import annotations

import shlex
import sys

import click

from tiermem.core.paths import DEFAULT_AGENT
from tiermem.ops.demo import DEMO_AGENT, build_demo
from tiermem.tui.cli.options import Options, emit, pass_options


@click.command(name="demo")
@click.option(
    "--agent-id",
    "agent",
    default=None,
    help="Agent to create (default: demo, or the global --agent-id when given).",
)
@pass_options
def demo(opts: Options, agent: str | None) -> None:
    """Create a demo agent with five months of memories, so the TUI has something to show.

    It lives beside your own agents in the home and never touches them; it is refused when
    the agent already has memories."""
    agent_id = agent or (opts.agent_id if opts.agent_id != DEFAULT_AGENT else DEMO_AGENT)
    if opts.json:
        report = build_demo(opts.home, agent_id)
    else:
        with click.progressbar(length=1, label="building the demo agent", file=sys.stderr) as bar:

            def progress(done: int, total: int) -> None:
                bar.length = total
                bar.update(done - bar.pos)

            report = build_demo(opts.home, agent_id, progress=progress)
    home_arg = "" if opts.home is None else f"--home {shlex.quote(str(opts.home))} "
    warm, cold = report.tiers.get("warm_count", 0), report.tiers.get("cold_count", 0)
    payload = {
        "home": str(report.home),
        "agent_id": report.agent_id,
        "days": report.days,
        "memories": warm + cold,
        "stored": report.stored,
        "retrievals": report.retrievals,
        "tiers": report.tiers,
        "tree_nodes": report.tree_nodes,
        "conflicts": report.conflicts,
        "seconds": round(report.seconds, 2),
    }
    text = (
        f"demo agent {report.agent_id!r}: {report.days} days, {warm + cold} memories "
        f"({warm} warm, {cold} cold; {report.stored} stored, the rest learned by consolidation), "
        f"{report.tree_nodes} tree nodes, {report.retrievals} retrievals, "
        f"{report.conflicts} sync conflicts\n"
        f"open it:  tiermem {home_arg}--agent-id {report.agent_id}"
    )
    emit(opts, payload, text)
