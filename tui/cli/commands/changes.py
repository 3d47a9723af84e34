"""Facts that change: `supersede`, `unsupersede`, `history` and `changes`."""

from __future__ import annotations

import click

from tiermem.core import supersession, temporal
from tiermem.tui.cli.options import Options, emit, pass_options


@click.command()
@click.argument("old")
@click.argument("new", required=False)
@click.option("--at", metavar="DATE", help="When the old fact stopped being true (YYYY-MM-DD).")
@pass_options
def supersede(opts: Options, old: str, new: str | None, at: str | None) -> None:
    """Mark memory OLD replaced by NEW (without NEW: no longer true); it stays, ranked below."""
    when = temporal.parse_day(at, "--at") if at else None
    with opts.open() as mem:
        change = supersession.supersede(mem, old, new, when)
    payload = change.as_dict()
    successor = f"by {change.new.id}" if change.new else "with no successor"
    emit(opts, payload, f"superseded: {change.old.id} {successor} on {payload['at']}")


@click.command()
@click.argument("memory_id")
@pass_options
def unsupersede(opts: Options, memory_id: str) -> None:
    """Make a superseded memory current again (undo a wrong supersession)."""
    with opts.open() as mem:
        record = supersession.unsupersede(mem, memory_id)
    emit(opts, {"id": record.id, "current": True}, f"current again: {record.id}")


@click.command()
@click.argument("memory_id")
@pass_options
def history(opts: Options, memory_id: str) -> None:
    """Show the chain a memory belongs to: what it replaced and what replaced it, oldest first."""
    with opts.open() as mem:
        chain = supersession.history(mem, memory_id)
    items = [
        {
            "id": m.id,
            "text": m.text,
            "since": supersession.iso(m.since),
            "until": supersession.iso(m.superseded_at) if m.superseded_at is not None else None,
            "superseded_by": m.superseded_by or None,
        }
        for m in chain
    ]

    def render() -> str:
        return "\n".join(
            f"{i['since']} – {i['until'] or 'now'}  {i['text']}  (id {i['id']})" for i in items
        )

    emit(opts, {"history": items}, render)


@click.command()
@click.option("--since", "since", required=True, metavar="DATE", help="From this day (YYYY-MM-DD).")
@click.option("--until", "until", metavar="DATE", help="Up to this day (default: now).")
@pass_options
def changes(opts: Options, since: str, until: str | None) -> None:
    """List the facts that changed since a date: old → new, when, and where the new one came from."""
    start = temporal.start_of(since, "--since")
    end = temporal.parse_day(until, "--until") if until else None
    with opts.open() as mem:
        found = supersession.changes(mem, start, end)
    items = [c.as_dict() for c in found]

    def render() -> str:
        if not items:
            return "no facts changed in that time"
        lines = []
        for item in items:
            new = item["new"]["text"] if item["new"] else "(no longer true)"
            lines.append(f"{item['at']}  {item['old']['text']}  →  {new}")
        return "\n".join(lines)

    emit(opts, {"changes": items}, render)
