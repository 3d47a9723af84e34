"""CLI commands for merge conflicts: `tiermem sync conflicts`, `tiermem sync resolve`.

A conflict is a value that lost a merge between devices: of the critical state (hot memory or
tree), of a memory both devices edited (`memory/<id>`), or an item pruned to keep a limit after
a merge (`tiermem.core.conflicts`). Each is shown by what it is about (the memory's text, the
tree node, the hot item), with its item id beside it. Listing needs no network; resolving
changes the local state and is pushed, with the resolution, by the next sync.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from tiermem.core import spaces
from tiermem.core.conflicts import (
    SIDES,
    TAKES,
    Conflict,
    about,
    get_conflict,
    list_conflicts,
    resolve_conflict,
    show,
    take_for,
)
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound
from tiermem.sync.state import read_settings
from tiermem.tui.cli.options import Options, emit, pass_options


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def _line(c: Conflict, label: str) -> str:
    state = f"  [{c.resolution}]" if c.resolved else ""
    lines = [
        f"{c.id}  {_when(c.detected_at)}  {label} · {c.field}{state}",
        f"    item: {c.item}",
        f"    kept: {show(c.kept_value)}",
        f"    lost: {show(c.lost_value)}  (device {c.lost_device[:8] or '?'})",
    ]
    if c.reason:
        lines.append(f"    why:  {c.reason}")
    return "\n".join(lines)


def _list_text(found: list[tuple[Conflict, str]], every: bool) -> str:
    if not found:
        return "no conflicts" if every else "no open conflicts"
    head = f"{len(found)} conflict(s)" + ("" if every else " open")
    hint = "resolve with: tiermem sync resolve ID --take local|remote (or kept|lost)"
    return "\n".join([head, *(_line(c, label) for c, label in found), hint])


def _device(db: Database, agent_id: str) -> str:
    """This device's id (hex), '' when the agent does not sync."""
    settings = read_settings(db, agent_id)
    return "" if settings is None else settings.device_id.hex()


SPACE = click.option(
    "--space", metavar="NAME", help="A shared space this agent includes: its members' conflicts."
)


@contextmanager
def open_scoped(opts: Options, space: str | None, *, write: bool = False) -> Iterator[Memory]:
    """The agent's memory, or the shared space `space` it includes (as a writer to `write`)."""
    with opts.open() as mem:
        if space is None:
            yield mem
            return
        if write:
            spaces.require_writer(mem.db, mem.agent_id, space)
        elif spaces.membership(mem.db, mem.agent_id, spaces.require(mem.db, space)) is None:
            raise NotFound(f"agent {mem.agent_id!r} does not include space {space!r}")
        with mem.open_space(space) as scoped:
            yield scoped


@click.command(name="conflicts")
@click.option("--all", "every", is_flag=True, help="Include resolved conflicts.")
@SPACE
@pass_options
def conflicts_cmd(opts: Options, every: bool, space: str | None) -> None:
    """List values that lost a merge between devices (newest first), by what they are about."""
    with open_scoped(opts, space) as mem:
        found = [
            (c, about(mem.db, mem.agent_id, c))
            for c in list_conflicts(mem.db, mem.agent_id, include_resolved=every)
        ]
    records: list[dict[str, Any]] = [c.to_dict() | {"about": label} for c, label in found]
    emit(
        opts,
        {"conflicts": records, "count": len(found)},
        lambda: _list_text(found, every),
    )


@click.command(name="resolve")
@click.argument("conflict_id")
@click.option(
    "--take",
    type=click.Choice(SIDES + TAKES),
    required=True,
    help="local: the value this device wrote (else the one it shows); remote: the other "
    "device's; kept: leave the merged value; lost: apply the lost value as a new change.",
)
@SPACE
@pass_options
def resolve_cmd(opts: Options, conflict_id: str, take: str, space: str | None) -> None:
    """Close a conflict, keeping the merged value or bringing the lost one back."""
    with open_scoped(opts, space, write=True) as mem:
        found = get_conflict(mem.db, mem.agent_id, conflict_id)
        chosen = take_for(found, take, _device(mem.db, mem.agent_id))
        closed = resolve_conflict(mem.db, mem.agent_id, conflict_id, chosen, mem=mem)
        label = about(mem.db, mem.agent_id, closed)
    verb = "kept the merged value" if chosen == "kept" else "applied the lost value"
    emit(
        opts,
        {"resolved": closed.to_dict() | {"about": label}, "take": take, "applied": chosen},
        f"resolved {closed.id}: {verb} ({label} · {closed.field}; {closed.item})",
    )
