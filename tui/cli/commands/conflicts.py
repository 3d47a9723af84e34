"""CLI commands for merge conflicts: `tiermem sync conflicts`, `tiermem sync resolve`.

A conflict is a value of the critical state (hot memory or tree) that lost a merge between
devices, or an item pruned to keep a limit after a merge (`tiermem.core.conflicts`). Listing
needs no network; resolving changes the local state and is pushed by the next sync.
"""

from __future__ import annotations

import time

import click

from tiermem.core.conflicts import TAKES, Conflict, list_conflicts, resolve_conflict, show
from tiermem.tui.cli.options import Options, emit, pass_options


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _line(c: Conflict) -> str:
    state = f"  [{c.resolution}]" if c.resolved else ""
    lines = [
        f"{c.id}  {_when(c.detected_at)}  {c.item} · {c.field}{state}",
        f"    kept: {show(c.kept_value)}",
        f"    lost: {show(c.lost_value)}  (device {c.lost_device[:8] or '?'})",
    ]
    if c.reason:
        lines.append(f"    why:  {c.reason}")
    return "\n".join(lines)


def _list_text(found: list[Conflict], every: bool) -> str:
    if not found:
        return "no conflicts" if every else "no open conflicts"
    head = f"{len(found)} conflict(s)" + ("" if every else " open")
    hint = "resolve with: tiermem sync resolve ID --take kept|lost"
    return "\n".join([head, *(_line(c) for c in found), hint])


@click.command(name="conflicts")
@click.option("--all", "every", is_flag=True, help="Include resolved conflicts.")
@pass_options
def conflicts_cmd(opts: Options, every: bool) -> None:
    """List values that lost a merge between devices (newest first)."""
    with opts.open() as mem:
        found = list_conflicts(mem.db, mem.agent_id, include_resolved=every)
    emit(
        opts,
        {"conflicts": [c.to_dict() for c in found], "count": len(found)},
        lambda: _list_text(found, every),
    )


@click.command(name="resolve")
@click.argument("conflict_id")
@click.option(
    "--take",
    type=click.Choice(TAKES),
    required=True,
    help="kept: leave the merged value; lost: apply the lost value as a new change.",
)
@pass_options
def resolve_cmd(opts: Options, conflict_id: str, take: str) -> None:
    """Close a conflict, keeping the merged value or bringing the lost one back."""
    with opts.open() as mem:
        closed = resolve_conflict(mem.db, mem.agent_id, conflict_id, take, mem=mem)
    verb = "kept the merged value" if take == "kept" else "applied the lost value"
    emit(
        opts,
        {"resolved": closed.to_dict(), "take": take},
        f"resolved {closed.id}: {verb} ({closed.item} · {closed.field})",
    )
