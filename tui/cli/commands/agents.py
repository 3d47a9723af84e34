"""`tiermem agents`: list, rename and delete the agents of a memory home."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from tiermem.core import agents as agentsmod
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.errors import InvalidInput
from tiermem.core.interchange import export_json
from tiermem.core.migrations import migrate
from tiermem.core.paths import Home, validate_agent_id
from tiermem.tui.cli.options import Options, emit, pass_options, when


@click.group(name="agents")
def agents_group() -> None:
    """List, rename or delete the agents of the memory home."""


def _database(opts: Options, *, write: bool) -> tuple[Home, Database]:
    home = Home(opts.resolved_home())
    read_only = home.require()
    if write and read_only:
        home.ensure()  # raises: the home is read-only
    db = Database(home.db_path, read_only=read_only)
    if write:
        try:
            migrate(db)
        except BaseException:
            db.close()
            raise
    return home, db


@agents_group.command(name="list")
@pass_options
def list_cmd(opts: Options) -> None:
    """List the agents with their memory count, last activity and sync."""
    home, db = _database(opts, write=False)
    try:
        found = agentsmod.list_agents(db)
    finally:
        db.close()
    rows = [
        {
            "agent_id": a.agent_id,
            "memories": a.memories,
            "last_activity": a.last_activity,
            "synced": a.synced,
        }
        for a in found
    ]
    lines = [
        f"{a.agent_id:<24} {a.memories:>6} memories  last active {when(a.last_activity)}"
        + ("  (synced)" if a.synced else "")
        for a in found
    ]
    emit(opts, {"home": str(home.root), "agents": rows}, "\n".join(lines) or "no agents yet")


@agents_group.command(name="rename")
@click.argument("old")
@click.argument("new")
@pass_options
def rename_cmd(opts: Options, old: str, new: str) -> None:
    """Rename an agent: all its memories, hot state, tree and history, in one transaction."""
    validate_agent_id(new)
    home, db = _database(opts, write=True)
    try:
        moved = agentsmod.rename_agent(db, old, new)
    finally:
        db.close()
    agentsmod.move_memory_md(home, old, new)
    payload = {"renamed": old, "to": new, "memories": moved}
    emit(opts, payload, f"renamed agent {old!r} to {new!r} ({moved} memories)")


@agents_group.command(name="delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_options
def delete_cmd(opts: Options, name: str, yes: bool) -> None:
    """Delete an agent and all its rows, after archiving its JSON export in <home>/archive/."""
    home, db = _database(opts, write=True)
    try:
        agentsmod.require_agent(db, name, home.root)
        agentsmod.check_unsynced(db, name, "deleted")
    finally:
        db.close()
    if not yes:
        if not _interactive():
            raise InvalidInput(f"deleting agent {name!r} needs --yes (no terminal to ask)")
        click.confirm(f"Delete agent {name!r} from {home.root}?", abort=True, err=True)
    archive = _archive(home.root, name)
    home, db = _database(opts, write=True)
    try:
        deleted = agentsmod.delete_agent(db, name)
    finally:
        db.close()
    agentsmod.move_memory_md(home, name, None)
    payload = {"deleted": name, "memories": deleted, "archive": str(archive)}
    emit(opts, payload, f"deleted agent {name!r} ({deleted} memories); archive: {archive}")


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (OSError, ValueError):  # a closed or replaced stdin
        return False


def _archive(root: Path, agent_id: str) -> Path:
    """The agent's JSON export (what `tiermem export --format json` writes), 0600."""
    folder = root / "archive"
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{agent_id}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    with Memory(root, agent_id, create=False) as mem:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for piece in export_json(mem):
                handle.write(piece)
            handle.flush()
            os.fsync(handle.fileno())
    tmp.replace(path)
    return path
