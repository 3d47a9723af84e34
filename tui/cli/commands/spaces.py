"""`tiermem spaces`: shared memory spaces the agent includes (docs/spaces.md).

A space is a memory of its own in the home (scope `space:NAME`); an agent that includes it
searches it with its own memory, and a writer can `store --space NAME` into it.
"""

from __future__ import annotations

from typing import Any

import click

from tiermem.core import space_undo, spaces, temporal
from tiermem.core.spaces import SpaceInfo, Written
from tiermem.tui.cli.options import Options, emit, pass_options, when

SHOWN = 20
"""Memories `spaces show` lists unless `--limit` says otherwise."""


@click.group(name="spaces")
def spaces_group() -> None:
    """List, create, include, exclude or share memory spaces; invite members; undo their writes."""


def _info_dict(info: SpaceInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "created_at": info.created_at,
        "created_by": info.created_by,
        "memories": info.memories,
        "members": info.members,
        "included": info.role is not None,
        "role": info.role,
    }


def _info_line(info: SpaceInfo) -> str:
    mark = "*" if info.role is not None else " "
    role = f"  ({info.role})" if info.role else ""
    members = ", ".join(f"{a} ({r})" for a, r in info.members.items()) or "no members"
    return f"{mark} {info.name:<20} {info.memories:>6} memories{role}  members: {members}"


@spaces_group.command(name="list")
@pass_options
def list_cmd(opts: Options) -> None:
    """List the home's spaces; * marks those this agent includes."""
    with opts.open() as mem:
        found = spaces.listing(mem.db, mem.agent_id)
    text = "\n".join(_info_line(i) for i in found) or "no spaces yet (tiermem spaces create NAME)"
    emit(opts, {"agent_id": opts.agent_id, "spaces": [_info_dict(i) for i in found]}, text)


@spaces_group.command(name="create")
@click.argument("name")
@pass_options
def create_cmd(opts: Options, name: str) -> None:
    """Create a space; this agent includes it as a writer."""
    spaces.check_name(name)
    with opts.open(create=True) as mem:
        spaces.create(mem.db, name, mem.agent_id, mem.now())
        mem.open_space(name).close()  # registers its scope: its memories' row-id range
        info = spaces.info(mem.db, name, mem.agent_id)
    emit(opts, _info_dict(info), f"created space {name!r}; {opts.agent_id!r} includes it (writer)")


@spaces_group.command(name="include")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(spaces.ROLES),
    default="writer",
    show_default=True,
    help="writer: may store into the space; reader: only searches it.",
)
@pass_options
def include_cmd(opts: Options, name: str, role: str) -> None:
    """Search a space with this agent's memory from now on (as a writer or a reader)."""
    with opts.open(create=True) as mem:
        spaces.include(mem.db, mem.agent_id, name, spaces.check_role(role), mem.now())
        info = spaces.info(mem.db, name, mem.agent_id)
    emit(opts, _info_dict(info), f"{opts.agent_id!r} includes space {name!r} ({role})")


@spaces_group.command(name="exclude")
@click.argument("name")
@pass_options
def exclude_cmd(opts: Options, name: str) -> None:
    """Stop searching a space (the space and its memories stay)."""
    with opts.open() as mem:
        spaces.exclude(mem.db, mem.agent_id, name)
        info = spaces.info(mem.db, name, mem.agent_id)
    emit(opts, _info_dict(info), f"{opts.agent_id!r} no longer includes space {name!r}")


def _written_dict(w: Written) -> dict[str, Any]:
    m = w.memory
    return {
        "id": w.memory_id,
        "written_by": w.writer,
        "device": w.device,
        "written_at": w.written_at,
        "undone_at": w.undone_at,
        "text": None if m is None else m.text,
        "category": None if m is None else m.category,
        "tier": None if m is None else m.tier,
    }


def _written_line(w: Written) -> str:
    text = "(undone)" if w.memory is None else w.memory.text
    return f"  {when(w.written_at)}  {w.writer:<16} {text}  (id {w.memory_id})"


def _since(value: str | None) -> float | None:
    return None if value is None else temporal.start_of(value, "--since")


by_option = click.option("--by", "by", metavar="WRITER", help="Only this member's writes.")
since_option = click.option(
    "--since", "since", metavar="DATE", help="Only writes from this day on (YYYY-MM-DD)."
)


@spaces_group.command(name="show")
@click.argument("name")
@by_option
@since_option
@click.option("--limit", type=click.IntRange(min=1), default=SHOWN, show_default=True)
@pass_options
def show_cmd(opts: Options, name: str, by: str | None, since: str | None, limit: int) -> None:
    """Show a space: its members and its memories with who wrote each, newest first."""
    start = _since(since)
    with opts.open() as mem:
        info = spaces.info(mem.db, name, mem.agent_id)
        found = spaces.written(mem.db, name, by=by, since=start)
    payload = _info_dict(info) | {"writes": [_written_dict(w) for w in found[:limit]]}
    payload["total_writes"] = len(found)

    def text() -> str:
        lines = [_info_line(info), f"  created {when(info.created_at)} by {info.created_by}"]
        who = f" by {by}" if by else ""
        lines.append(f"  {len(found)} memories written{who}" + ("" if found else "."))
        lines += [_written_line(w) for w in found[:limit]]
        return "\n".join(lines)

    emit(opts, payload, text)


@spaces_group.command(name="undo")
@click.argument("name")
@click.option("--by", "by", metavar="WRITER", required=True, help="The member whose writes go.")
@since_option
@pass_options
def undo_cmd(opts: Options, name: str, by: str, since: str | None) -> None:
    """Archive a member's writes to a space (kept; `spaces restore` brings them back)."""
    start = _since(since)
    with opts.open(create=True) as mem:
        spaces.require_writer(mem.db, mem.agent_id, name)
        with mem.open_space(name) as space:
            done = space_undo.undo(space, by, start)
    emit(
        opts,
        {"space": name, "by": by, "undone": [_written_dict(w) for w in done]},
        f"archived {len(done)} memories {by!r} wrote to space {name!r} "
        f"(tiermem spaces restore {name} --by {by})",
    )


@spaces_group.command(name="restore")
@click.argument("name")
@click.option("--by", "by", metavar="WRITER", required=True, help="The member whose writes return.")
@since_option
@pass_options
def restore_cmd(opts: Options, name: str, by: str, since: str | None) -> None:
    """Bring back a member's writes that `spaces undo` archived."""
    start = _since(since)
    with opts.open(create=True) as mem:
        spaces.require_writer(mem.db, mem.agent_id, name)
        with mem.open_space(name) as space:
            back = space_undo.restore(space, by, start)
    emit(
        opts,
        {"space": name, "by": by, "restored": [w.memory_id for w in back]},
        f"restored {len(back)} memories {by!r} wrote to space {name!r}",
    )


def _add_sharing() -> None:
    """The commands that share a space across people and devices (spaces_share.py)."""
    from tiermem.tui.cli.commands import spaces_share as sharing

    for command in (
        sharing.share_cmd,
        sharing.invite_cmd,
        sharing.join_cmd,
        sharing.members_cmd,
        sharing.remove_member_cmd,
        sharing.sync_cmd,
    ):
        spaces_group.add_command(command)


_add_sharing()
