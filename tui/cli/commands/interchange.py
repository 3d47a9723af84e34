"""Memories in and out as files: `import` (the original JSON layout), `export`."""

from __future__ import annotations

from pathlib import Path

import click

from tiermem.core import folder as folder_export
from tiermem.core.errors import InvalidInput
from tiermem.core.importers import own
from tiermem.core.ingest import source_items
from tiermem.core.interchange import SEED_FILES, export_json, export_markdown, import_seed
from tiermem.tui.cli.commands.importers import (
    EXPORT_FORMATS,
    IMPORT_FORMATS,
    agent_exists,
    export_as,
    import_export,
    import_from,
)
from tiermem.tui.cli.options import Options, emit, pass_options, write_stream


@click.command(name="import")
@click.argument("folder", required=False, type=click.Path(path_type=Path))
@click.option("--warm", type=click.Path(path_type=Path), help="warm-memory.json")
@click.option("--tree", "tree_file", type=click.Path(path_type=Path), help="memory-tree.json")
@click.option("--hot", "hot_file", type=click.Path(path_type=Path), help="hot-memory-state.json")
@click.option("--config", type=click.Path(path_type=Path), help="config.json")
@click.option(
    "--from",
    "source_format",
    type=click.Choice(IMPORT_FORMATS),
    help="Read FOLDER (a folder or a file) as another tool's memory or a chat history.",
)
@click.option("--dry-run", is_flag=True, help="With --from: show what would be imported.")
@pass_options
def import_(
    opts: Options,
    folder: Path | None,
    warm: Path | None,
    tree_file: Path | None,
    hot_file: Path | None,
    config: Path | None,
    source_format: str | None,
    dry_run: bool,
) -> None:
    """Import the original JSON files, an exported folder's edits, or another tool's memory
    (`--from`); importing twice adds nothing."""
    if source_format is not None:
        if folder is None:
            raise InvalidInput(f"--from {source_format} needs a PATH")
        import_from(opts, source_format, folder, dry_run)
        return
    if folder is not None and own.is_json_export(folder):
        import_export(opts, folder, dry_run)
        return
    if folder is not None and folder_export.is_export(folder):
        if dry_run or not _edits_of_this_agent(opts, folder):
            import_export(opts, folder, dry_run)
            return
        with opts.open() as mem:
            done = folder_export.import_folder(mem, folder)
        emit(opts, done.as_dict(), _folder_text(done))
        return
    if dry_run:
        raise InvalidInput("--dry-run goes with --from FORMAT, a JSON export or a folder export")
    files = {"warm": warm, "tree": tree_file, "hot": hot_file, "config": config}
    if folder is not None:
        if not folder.is_dir():
            raise InvalidInput(f"{folder} is not a folder")
        for key, name in SEED_FILES.items():
            if files[key] is None and (folder / name).exists():
                files[key] = folder / name
    if not any(files.values()):
        raise InvalidInput("nothing to import: give a folder or --warm/--tree/--hot/--config")
    with opts.open(create=True) as mem:
        report = import_seed(mem, **files)
    payload = vars(report) | {"files": {k: str(v) for k, v in files.items() if v}}
    text = (
        f"imported {report.facts_added} facts ({report.facts_merged} already known), "
        f"{len(report.nodes_added)} tree nodes"
        + (", hot state" if report.hot_imported else "")
        + (f", config → {report.config_written}" if report.config_written else "")
    )
    text += "".join(f"\nwarning: {w}" for w in report.warnings)
    emit(opts, payload, text)


def _edits_of_this_agent(opts: Options, folder: Path) -> bool:
    """Whether FOLDER is this agent's own export, so importing it applies the owner's edits
    (another agent's export, one for an agent not here yet, or one this agent was copied
    from, is copied instead)."""
    if folder_export.exported_agent(folder) != opts.agent_id or not agent_exists(opts):
        return False
    with opts.open() as mem:
        return not source_items(mem, own.folder_source(folder))


def _folder_text(done: folder_export.FolderReport) -> str:
    return (
        f"{done.folder}: {len(done.edited)} edited, {len(done.stored)} stored, "
        f"{len(done.forgotten)} forgotten (tiermem unforget), {len(done.skills)} skill verdicts"
        + (", MEMORY.md read back" if done.hot_edited else "")
        + f", {done.unchanged} files unchanged"
    )


@click.command()
@click.argument("folder", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json", "folder", *EXPORT_FORMATS]),
    default="markdown",
    show_default=True,
    help="folder: a folder of markdown files (FOLDER), edited and imported back with `import`.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    help="Write to this file (default: standard output).",
)
@pass_options
def export(opts: Options, folder: Path | None, fmt: str, output: Path | None) -> None:
    """Export the agent's whole memory as markdown, JSON, a folder of markdown files, or in
    another tool's format."""
    if fmt == "folder":
        if folder is None:
            raise InvalidInput("--format folder needs the FOLDER to write")
        with opts.open() as mem:
            done = folder_export.export_folder(mem, folder)
        emit(opts, done.as_dict(), f"wrote {done.files} files to {folder}")
        return
    if folder is not None:
        raise InvalidInput("FOLDER is for --format folder (use --output for a file)")
    if fmt in EXPORT_FORMATS:
        export_as(opts, fmt, output)
        return
    with opts.open() as mem:
        pieces = export_json(mem) if fmt == "json" else export_markdown(mem)
        write_stream(pieces, output)
    if output is None:
        return
    emit(opts, {"written": str(output), "format": fmt}, f"wrote {output}")
