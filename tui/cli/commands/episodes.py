"""`tiermem episodes`: the episodic memory (one episode per conversation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tiermem.core import dreaming, episodes
from tiermem.core.errors import StorageError
from tiermem.tui.cli.options import Options, emit, pass_options


@click.group(name="episodes")
def episodes_group() -> None:
    """Episodic memory: one summary per conversation (list, show, search, export, dream)."""


def _line(e: episodes.Episode) -> str:
    promoted = " · promoted" if e.promoted_at else ""
    return f"{e.id}  {episodes.iso(e.started_at)[:16]}  {e.abstract}{promoted}"


@episodes_group.command(name="list")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@pass_options
def list_(opts: Options, limit: int) -> None:
    """The newest episodes."""
    with opts.open() as mem:
        found = episodes.recent(mem.db, mem.agent_id, limit)
        total = episodes.count(mem.db, mem.agent_id)
    payload = {"episodes": [e.as_dict() for e in found], "total": total}
    emit(opts, payload, lambda: "\n".join([*map(_line, found), f"{total} episodes"]))


@episodes_group.command()
@click.argument("episode_id")
@pass_options
def show(opts: Options, episode_id: str) -> None:
    """One episode: summary, topics, participants, time span, facts."""
    with opts.open() as mem:
        e = episodes.get(mem.db, mem.agent_id, episode_id)
    emit(opts, e.as_dict(), lambda: render_episode(e))


def render_episode(e: episodes.Episode) -> str:
    return "\n".join(
        [
            f"{e.id} ({episodes.iso(e.started_at)} – {episodes.iso(e.ended_at)})",
            f"abstract: {e.abstract}",
            f"summary: {e.summary}",
            f"topics: {', '.join(e.topics) or '-'}",
            f"participants: {', '.join(e.participants) or '-'}",
            f"facts: {', '.join(e.fact_ids) or '-'}",
            f"expires: {episodes.iso(e.expires_at)}"
            + (f" · promoted {episodes.iso(e.promoted_at)}" if e.promoted_at else ""),
        ]
    )


@episodes_group.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@pass_options
def search(opts: Options, query: str, limit: int) -> None:
    """Episodes whose summary, topics or participants match the query."""
    with opts.open() as mem:
        found = episodes.search(mem.db, mem.agent_id, query, limit)
    payload = {
        "query": query,
        "episodes": [e.as_dict() | {"relevance": round(r, 4)} for e, r in found],
    }
    emit(opts, payload, lambda: "\n".join(map(_line, (e for e, _ in found))) or "no episodes found")


@episodes_group.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@pass_options
def export(opts: Options, folder: Path) -> None:
    """Write every episode as a markdown file with YAML front matter into FOLDER."""
    with opts.open() as mem:
        found = episodes.recent(mem.db, mem.agent_id, 1_000_000)
    written: list[str] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for e in found:
            path = folder / f"{episodes.iso(e.started_at)[:10]}-{e.id}.md"
            path.write_text(episodes.markdown(e), encoding="utf-8")
            written.append(str(path))
    except OSError as exc:
        raise StorageError(f"cannot write episodes to {folder}: {exc.strerror or exc}") from None
    payload: dict[str, Any] = {"folder": str(folder), "files": written}
    emit(opts, payload, f"{len(written)} episodes written to {folder}")


@episodes_group.command()
@click.option("--force", is_flag=True, help="Ignore the debounce (not the episode threshold).")
@pass_options
def dream(opts: Options, force: bool) -> None:
    """Synthesise unpromoted episodes into long-term facts now (consolidation does it too)."""
    with opts.open() as mem, mem.db.transaction():
        report = dreaming.dream(mem, force=force)
    lines = [report.reason, *report.notes]
    if report.ran:
        lines.append(f"{len(report.episodes)} episodes → {len(report.facts)} facts ({report.mode})")
    emit(opts, report.as_dict(), "\n".join(lines))
