"""CLI commands for the write path: distill, metadata and URLs, validate, daily-note ingestion,
conversation-end (the watcher: watch.py). Every command takes the global --home/--agent-id/--json."""

from __future__ import annotations

import time
from pathlib import Path

import click

from tiermem.core import llm as llmmod
from tiermem.core import metadata as meta
from tiermem.core import transcript as transcriptmod
from tiermem.core.config import load_config
from tiermem.core.distill import Distilled, distill
from tiermem.core.errors import EXIT_WARNINGS, InvalidInput, NotFound
from tiermem.core.ingest import DAILY_NAME, IngestReport, daily_dir
from tiermem.core.interchange import record_dict
from tiermem.core.paths import Home
from tiermem.core.validate import NoteCheck, check_file
from tiermem.sync.push import kick
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.reports import ingest_payload, render_memory_md

MODE = click.Choice(["rule", "llm"])


# -- distill ---------------------------------------------------------------------------------


@click.command(name="distill")
@click.argument("source", required=False, default="-", metavar="[FILE|-]")
@click.option("--mode", type=MODE, help="rule (default, no LLM) or llm ([llm] / TIERMEM_LLM_*).")
@pass_options
def distill_cmd(opts: Options, source: str, mode: str | None) -> None:
    """Distill a conversation (text or OpenClaw/JSONL transcript) into facts and a summary."""
    _, text = transcriptmod.read_text(source)
    parsed = transcriptmod.parse(text)
    try:
        with opts.open() as mem:
            cfg, projects = mem.cfg, [p.name for p in mem.hot().active_context.projects]
    except NotFound:  # no home or agent yet: distilling needs neither
        cfg, projects = load_config(Home(opts.resolved_home()).config_path), []
    result = distill(
        parsed, cfg.distill, mode=mode, settings=llmmod.settings_from(cfg.llm), projects=projects
    )
    emit(opts, result.as_dict() | {"format": parsed.format}, lambda: render_distilled(result))


def render_distilled(d: Distilled) -> str:
    lines = [f"summary: {d.summary or '(nothing worth keeping)'}  [{d.mode} mode]"]
    if d.fallback:
        lines.append(f"llm mode fell back to rule mode: {d.fallback}")
    for f in d.facts:
        lines.append(f"- ({f.importance:.2f} {f.category}) {f.text}")
    for label, items in (("people", d.people), ("urls", d.urls), ("commands", d.commands)):
        if items:
            lines.append(f"{label}: {', '.join(items)}")
    if d.paths:
        lines.append(f"paths: {', '.join(d.paths)}")
    for kind, items in d.restored.items():
        lines.append(f"restored {kind} the LLM dropped: {', '.join(items)}")
    raw, dist = d.raw_bytes, d.distilled_bytes
    lines.append(f"{raw:,} bytes → {dist:,} bytes of facts → {d.summary_bytes} bytes of summary")
    lines += [f"warning: {w}" for w in d.warnings]
    return "\n".join(lines)


# -- metadata and URLs -----------------------------------------------------------------------


@click.command(name="extract-metadata")
@click.argument("source", metavar="FILE|-")
@pass_options
def extract_metadata(opts: Options, source: str) -> None:
    """List the URLs, shell commands and file paths a file mentions."""
    name, text = transcriptmod.read_text(source)
    found = meta.extract(text)
    payload = {"file": name} | found.as_dict()

    def render() -> str:
        lines = []
        for kind, items in found.as_dict().items():
            lines.append(f"{kind} ({len(items)}):")
            lines += [f"  {item}" for item in items]
        return "\n".join(lines)

    emit(opts, payload, render)


@click.command(name="search-url")
@click.argument("fragment")
@pass_options
def search_url(opts: Options, fragment: str) -> None:
    """Find memories by a fragment of one of their URLs (case-insensitive)."""
    with opts.open() as mem:
        found = mem.search_url(fragment)
    payload = {"fragment": fragment, "results": [record_dict(m) for m in found]}

    def render() -> str:
        if not found:
            return f"no memory has a URL containing {fragment!r}"
        lines = []
        for m in found:
            urls = [u for u in m.urls if fragment.casefold() in u.casefold()]
            lines.append(f"[{m.tier}] {m.text}\n   {', '.join(urls)} · id {m.id}")
        return "\n".join(lines)

    emit(opts, payload, render)


@click.command(name="urls")
@pass_options
def urls(opts: Options) -> None:
    """Every stored URL, with the memories that hold it."""
    with opts.open() as mem:
        found = mem.all_urls()
    payload = {
        "count": len(found),
        "urls": [{"url": u, "memories": ids} for u, ids in sorted(found.items())],
    }
    emit(
        opts,
        payload,
        lambda: (
            "\n".join(f"{u}  ({len(ids)})" for u, ids in sorted(found.items())) or "no URLs stored"
        ),
    )


# -- validate --------------------------------------------------------------------------------


@click.command(name="validate")
@click.argument("file", required=False, type=click.Path(path_type=Path))
@click.option("--all", "all_notes", is_flag=True, help="Check every daily note of the folder.")
@click.option("--dir", "folder", type=click.Path(path_type=Path), help="Daily-note folder.")
@pass_options
def validate(opts: Options, file: Path | None, all_notes: bool, folder: Path | None) -> int:
    """Check daily notes for missing URLs, commands and next steps (exit 1 if any warning).

    Without FILE or --all, today's note is checked."""
    if file is not None and all_notes:
        raise InvalidInput("give FILE or --all, not both")
    paths = [file] if file is not None else _notes_to_check(opts, all_notes, folder)
    checks = [check_file(p) for p in paths]
    warnings = sum(len(c.warnings) for c in checks)
    errors = sum(c.error is not None for c in checks)
    payload = {
        "files": [c.as_dict() for c in checks],
        "warnings": warnings,
        "errors": errors,
        "ok": warnings == 0 and errors == 0,
    }
    emit(opts, payload, lambda: render_checks(checks))
    return 0 if warnings == 0 and errors == 0 else EXIT_WARNINGS


def _notes_to_check(opts: Options, all_notes: bool, folder: Path | None) -> list[Path]:
    """Every daily note of the folder, or today's (the folder defaults to the home's)."""
    if folder is None:
        with opts.open() as mem:
            folder = daily_dir(mem)
    if all_notes:
        if not folder.is_dir():
            raise NotFound(f"no daily-note folder {folder}")
        return sorted(p for p in folder.iterdir() if DAILY_NAME.match(p.name) and p.is_file())
    today_note = folder / f"{time.strftime('%Y-%m-%d', time.gmtime())}.md"
    if not today_note.exists():
        raise NotFound(f"no daily note for today ({today_note}); give FILE or --all")
    return [today_note]


def render_checks(checks: list[NoteCheck]) -> str:
    lines = []
    for check in checks:
        if check.error:
            lines.append(f"{check.path}: error: {check.error}")
            continue
        if not check.warnings:
            lines.append(f"{check.path}: ok")
            continue
        for w in check.warnings:
            where = f"{check.path}:{w.line}" if w.line else str(check.path)
            lines.append(f"{where}: warning: {w.message} — {w.suggestion}")
    total = sum(len(c.warnings) for c in checks)
    lines.append(f"{len(checks)} note(s), {total} warning(s)")
    return "\n".join(lines)


# -- ingestion -------------------------------------------------------------------------------


@click.command(name="ingest-daily")
@click.argument("folder", required=False, type=click.Path(path_type=Path))
@pass_options
def ingest_daily(opts: Options, folder: Path | None) -> int:
    """Ingest daily notes (memory/YYYY-MM-DD.md; idempotent) and MEMORY.md hand edits.

    Exits 1 when a note could not be read (the others are still ingested)."""
    with opts.open(create=True) as mem:
        report = mem.ingest_daily(folder)
    emit(opts, ingest_payload(report), lambda: render_ingest(report))
    return EXIT_WARNINGS if report.errors else 0


def render_ingest(report: IngestReport) -> str:
    lines = []
    for f in report.files:
        if f.status == "unchanged":
            continue
        detail = f"{f.added} added, {f.merged} already known, {f.forgotten} forgotten"
        if f.status in ("error", "skipped"):
            detail = f.message
        elif f.message:
            detail += f" ({f.message})"
        lines.append(f"{f.name}: {f.status}: {detail}")
    unchanged = sum(f.status == "unchanged" for f in report.files)
    lines.append(
        f"{len(report.files)} daily note(s) in {report.folder}: {report.added} facts added, "
        f"{unchanged} unchanged"
    )
    if report.memory_md:
        lines += render_memory_md(report.memory_md)
    return "\n".join(lines)


@click.command(name="conversation-end")
@click.argument("source", required=False, default="-", metavar="[TRANSCRIPT|-]")
@click.option("--mode", type=MODE, help="Distillation mode (default: [distill] mode, rule).")
@click.option(
    "--session",
    envvar="TIERMEM_SESSION",
    help="Session id for session hygiene (default: $TIERMEM_SESSION, else the transcript's).",
)
@pass_options
def conversation_end(opts: Options, source: str, mode: str | None, session: str | None) -> None:
    """After a conversation: distill, store, update hot, consolidate, queue the sync push, act
    on the [[pin:…]]-style tags and run session hygiene (promotion, demotion).

    With sync set up, the push starts in the background at once (the daemon if it runs, else a
    one-shot pusher that outlives this command); this command never waits for the network.

    Calling it again with the same transcript changes nothing."""
    _, text = transcriptmod.read_text(source)
    parsed = transcriptmod.parse(text)
    with opts.open(create=True) as mem:
        report = mem.conversation_end(parsed, text, mode=mode, session=session)
        push = kick.kick(mem)
    payload = report.as_dict() | {"push": push}

    def render() -> str:
        if report.already_processed:
            return "already processed: nothing changed"
        lines = [
            f"summary: {payload['summary'] or '-'}  [{payload['mode']} mode]",
            f"{len(report.stored)} facts stored, {len(report.deduplicated)} already known "
            f"(reinforced), {len(report.hot_added)} hot items added",
        ]
        if payload["fallback"]:
            lines.append(f"llm mode fell back to rule mode: {payload['fallback']}")
        lines += [f"  hot {item}" for item in report.hot_added]
        lines += [f"  moved from hot to warm: {item}" for item in report.hot_pruned]
        if report.memory_md:
            lines += render_memory_md(report.memory_md)
        lines += [f"warning: {w}" for w in payload["warnings"]]
        if report.episode is not None:
            g = report.graph
            lines.append(
                f"episode {report.episode.id}: {report.episode.abstract}"
                + (
                    f" · graph: {len(g.entities)} entities, {g.relations} new relations"
                    if g
                    else ""
                )
            )
        lines += [f"note: {n}" for n in report.notes]
        lines.append(kick.PUSH_NOTES[push])
        if report.hygiene:
            lines += [f"  {line}" for line in report.hygiene.lines()]
            lines += [report.hygiene.health] if report.hygiene.health else []
        return "\n".join(lines)

    emit(opts, payload, render)
