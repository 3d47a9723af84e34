"""CLI commands for agent integration: context injection, recall within a budget, the
session-hygiene actions (the CLI twins of the transcript tags), health, audit and status.

    tag in a transcript            CLI
    [[pin:REF]]                    tiermem pin REF          (tiermem unpin REF)
    [[promote:REF]]                tiermem promote REF      (tiermem demote REF)
    [[forget:REF]]                 tiermem forget REF
    [[forget keyword:WORD]]        tiermem forget --keyword WORD
    [[restore:REF]]                tiermem unforget REF     (`restore` is the sync restore)
    [[memory_health]]              tiermem health

REF is a memory id, a hot lesson id, or category:slug (see core/hygiene.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from tiermem.core import audit, hygiene, provenance
from tiermem.core import context as ctx
from tiermem.core.errors import InvalidInput
from tiermem.core.hygiene import HygieneReport
from tiermem.tui.cli.options import Options, emit, pass_options, session_option
from tiermem.tui.cli.reports import outline

PRIORITY = click.Choice(list(ctx.PRIORITIES))


@click.command(name="context")
@click.option("--query", "-q", help="The user's message (without it: the always-loaded part).")
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=ctx.DEFAULT_CONTEXT_BUDGET,
    show_default=True,
    help="Most tokens of the whole block.",
)
@session_option
@pass_options
def context_cmd(opts: Options, query: str | None, budget: int, session: str | None) -> None:
    """Print the block to put in the prompt: hot memory, the tree index (under 1,500 tokens
    together) and the memories relevant to the query, all within the budget."""
    with opts.open(create=session is not None) as mem:  # a session's first turn creates
        block = ctx.build_context(mem, query, budget=budget, session=session)
    emit(opts, block.as_dict() | {"session": session}, block.text)


@click.command(name="recall")
@click.argument("query")
@click.option("--category", "categories", multiple=True, help="Only this category (repeatable).")
@click.option("--priority-min", type=PRIORITY, help="Leave out entries below this priority.")
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=ctx.DEFAULT_RECALL_BUDGET,
    show_default=True,
    help="Most tokens of the entries' text (the best one always, shortened if need be).",
)
@click.option(
    "--format", "fmt", type=click.Choice(list(ctx.FORMATS)), default="brief", show_default=True
)
@click.option("--tag", "tags", multiple=True, help="Only entries with this tag (repeatable).")
@click.option(
    "--include-context", is_flag=True, help="Add the memories linked to the entries (same budget)."
)
@session_option
@pass_options
def recall(
    opts: Options,
    query: str,
    categories: tuple[str, ...],
    priority_min: str | None,
    budget: int,
    fmt: str,
    tags: tuple[str, ...],
    include_context: bool,
    session: str | None,
) -> None:
    """Recall memories within a token budget (the CLI twin of MCP memory_recall)."""
    with opts.open(create=session is not None) as mem:
        found = ctx.recall(
            mem,
            query,
            categories=categories,
            priority_min=priority_min,
            budget=budget,
            fmt=fmt,
            session=session,
            tags=tags,
            include_context=include_context,
        )

    def render() -> str:
        lines = [f"note: {n}" for n in found.notes]
        for i, e in enumerate(found.entries, 1):
            lines.append(f"{i}. [{e['priority']}] {e['content']}")
            lines.append(f"   {e['why']}; id {e['id']}")
        if not found.entries:
            lines.append("no memories found")
        lines.append(
            f"{found.token_count}/{found.budget} tokens, {found.total_entries_matched} matched"
        )
        return "\n".join(lines)

    emit(opts, found.as_dict(), render)


def _action(
    name: str, doc: str, work: Callable[[Any, str], dict[str, Any]], verb: str
) -> click.Command:
    @click.command(name=name, help=doc)
    @click.argument("ref")
    @pass_options
    def command(opts: Options, ref: str) -> None:
        with opts.open() as mem:
            done = work(mem, ref)
        emit(opts, done, f"{done.get('action', verb)}: {done.get('text', ref)}")

    return command


pin = _action(
    "pin",
    "Pin a memory or hot lesson (the [[pin:REF]] tag): never evicted, never demoted.",
    lambda mem, ref: hygiene.pin(mem, ref, True),
    "pinned",
)
unpin = _action(
    "unpin",
    "Remove a pin.",
    lambda mem, ref: hygiene.pin(mem, ref, False),
    "unpinned",
)
promote = _action(
    "promote",
    "Promote a memory into hot memory now (the [[promote:REF]] tag).",
    hygiene.promote_to_hot,
    "promoted to hot",
)
demote = _action(
    "demote",
    "Take a lesson out of hot memory (it stays in warm).",
    hygiene.demote_from_hot,
    "demoted from hot",
)
unforget = _action(
    "unforget",
    "Restore a forgotten (archived) memory (the [[restore:REF]] tag).",
    lambda mem, ref: hygiene.restore(mem, ref),
    "restored",
)


@click.command(name="forget")
@click.argument("ref", required=False)
@click.option("--keyword", help="Forget every entry containing this word.")
@pass_options
def forget(opts: Options, ref: str | None, keyword: str | None) -> None:
    """Forget (the [[forget:REF]] / [[forget keyword:WORD]] tags): a hot entry leaves hot memory
    (kept in warm), any other memory is archived (`tiermem unforget` brings it back)."""
    if (ref is None) == (keyword is None):
        raise InvalidInput("give REF or --keyword (one of them)")
    with opts.open() as mem:
        if keyword is not None:
            report = hygiene.forget_keyword(mem, keyword)
            emit(opts, report.as_dict(), lambda: render_hygiene(report) or "nothing matched")
            return
        done = hygiene.forget_entry(mem, ref or "")
    emit(opts, done, f"{done['action']}: {done['text']}")


def render_hygiene(report: HygieneReport) -> str:
    lines = report.lines()
    if report.health:
        lines.append(report.health)
    return "\n".join(lines)


@click.command(name="health")
@click.option("--log", "show_log", is_flag=True, help="The hygiene log instead (and its file).")
@pass_options
def health(opts: Options, show_log: bool) -> None:
    """The session-hygiene report (the [[memory_health]] tag)."""
    with opts.open() as mem:
        if show_log:
            lines, path = provenance.log_lines(mem), provenance.write_log(mem)
            emit(opts, {"log": lines, "file": str(path)}, "\n".join([*lines, f"({path})"]))
            return
        report = hygiene.health(mem)
    emit(opts, report.as_dict(), report.text())


@click.command(name="audit")
@click.option("--scope", type=click.Choice(list(audit.SCOPES)), default="all", show_default=True)
@click.option("--no-recommend", is_flag=True, help="Only the analysis.")
@pass_options
def audit_cmd(opts: Options, scope: str, no_recommend: bool) -> None:
    """Token audit: tokens per source, near-duplicates, recommendations with savings."""
    with opts.open() as mem:
        found = audit.audit(mem, scope, not no_recommend)

    def render() -> str:
        a = found["analysis"]
        lines = [f"total {a['total_tokens']} tokens"]
        lines += [
            f"  {b['tokens']:>8} {b['percentage']:>6.2f}%  {b['source']}" for b in a["breakdown"]
        ]
        for d in a["duplicates"]:
            lines.append(
                f"duplicate ({d['similarity']:.0%}): {d['id_a']} ~ {d['id_b']}: {d['content_b']}"
            )
        for r in found.get("recommendations", []):
            lines.append(
                f"- {r['action']} (saves ~{r['estimated_savings_tokens']} tokens, risk "
                f"{r['risk']}): {r['description']}"
            )
        return "\n".join(lines)

    emit(opts, found, render)


@click.command(name="index-status")
@pass_options
def index_status(opts: Options) -> None:
    """Memory statistics: files, structured store, always-loaded tokens, on-demand domains."""
    with opts.open() as mem:
        status = audit.index_status(mem)
    emit(opts, status, lambda: "\n".join(outline(status)))
