"""Coming from another tool: `import --from FORMAT PATH` and `export --format mem0|basic-memory`.

`import_from` and `export_as` are called by the `import` and `export` commands
(`commands/interchange.py`), which own the verbs.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from tiermem.core import agents, importers
from tiermem.core.db import Database
from tiermem.core.engine import Memory
from tiermem.core.importers import own
from tiermem.core.importers.base import Conversation
from tiermem.core.importers.export import export_basic_memory
from tiermem.core.importers.mem0 import export_mem0
from tiermem.tui.cli.options import Options, emit, write_stream

IMPORT_FORMATS = importers.FORMATS
EXPORT_FORMATS = ("mem0", "basic-memory")


@contextlib.contextmanager
def _target(opts: Options, dry_run: bool) -> Iterator[Memory]:
    """The agent's memory; a dry run for an agent that does not exist yet plans against an
    empty throwaway home, so that it creates nothing."""
    if dry_run and not agent_exists(opts):
        with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp), opts.agent_id) as mem:
            yield mem
        return
    with opts.open(create=not dry_run) as mem:
        yield mem


def agent_exists(opts: Options) -> bool:
    """Whether the home holds the agent (read-only: a check creates nothing)."""
    path = opts.resolved_home() / "tiermem.db"
    if not path.is_file():
        return False
    db = Database(path, read_only=True)
    try:
        return agents.agent_exists(db, opts.agent_id)
    finally:
        db.close()


def import_from(opts: Options, fmt: str, path: Path, dry_run: bool) -> None:
    """Import PATH written by another memory tool or chat app (idempotent; `dry_run` writes
    nothing and says what would happen)."""
    path = path.expanduser()
    import_plan(
        opts, lambda mem: importers.plan(fmt, path, importers.context_of(mem)), path, dry_run
    )


def import_export(opts: Options, path: Path, dry_run: bool) -> None:
    """Import a JSON or folder export of any agent (this one on another home, or another)."""
    if path.is_file():
        import_plan(opts, lambda _mem: own.plan_json(path), path, dry_run)
    else:
        import_plan(opts, lambda mem: own.plan_folder(path, mem.now()), path, dry_run)


def import_plan(
    opts: Options, planner: Callable[[Memory], importers.Plan], path: Path, dry_run: bool
) -> None:
    """Plan against the agent's memory, then apply (or only summarize, in a dry run)."""
    with _target(opts, dry_run) as mem:
        plan = planner(mem)
        if dry_run:
            summary = importers.summarize(mem, plan)
        else:
            with _progress(opts, plan.conversations) as tick:
                summary = importers.apply(mem, plan, tick)
    emit(opts, summary.as_dict() | {"path": str(path)}, lambda: _text(summary))


@contextlib.contextmanager
def _progress(
    opts: Options, conversations: list[Conversation]
) -> Iterator[Callable[[Conversation], None] | None]:
    """A progress bar on a terminal for conversation imports; nothing on a pipe or with --json."""
    if opts.json or len(conversations) < 2 or not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(
        length=len(conversations), label="conversations", file=sys.stderr
    ) as bar:
        yield lambda _conversation: bar.update(1)


def _text(s: importers.ImportSummary) -> str:
    head = "would import" if s.dry_run else "imported"
    if s.dry_run:
        lines = [f"{head} {s.new} facts, {s.conversations} conversations ({s.format})"]
    else:
        lines = [
            f"{head} {s.stored} facts ({s.merged} merged into known ones), "
            f"{s.conversations} conversations giving {s.facts_from_conversations} facts"
        ]
    if s.already_imported:
        lines.append(f"already imported: {s.already_imported}")
    if s.categories:
        lines.append("categories:")
        lines += [f"  {cat}: {n}" for cat, n in s.categories.items()]
    if s.skipped:
        lines.append(f"skipped: {len(s.skipped)}")
        lines += [f"  {reason}" for reason in s.skipped[:20]]
        if len(s.skipped) > 20:
            lines.append(f"  … and {len(s.skipped) - 20} more")
    return "\n".join(lines)


def export_as(opts: Options, fmt: str, output: Path | None) -> None:
    """Write the memory in mem0's JSON (a file, or standard output) or as a Basic Memory
    project folder (`--output` required)."""
    with opts.open() as mem:
        if fmt == "basic-memory":
            if output is None:
                raise click.UsageError("--format basic-memory needs --output FOLDER")
            written = export_basic_memory(mem, output)
            emit(
                opts,
                {"written": str(output), "format": fmt, "notes": len(written)},
                f"wrote {len(written)} notes to {output}",
            )
            return
        pieces = export_mem0(mem)
        write_stream(pieces, output)
    if output is None:
        return
    emit(opts, {"written": str(output), "format": fmt}, f"wrote {output}")
