"""The `tiermem` command line: the seed's commands and flags over the core facade.

Every command prints a human summary, or with `--json` one JSON document on stdout. Expected
failures print one line (`tiermem: error: …`) and exit with the error's code; nothing is
printed as a traceback unless TIERMEM_DEBUG=1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import socket
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import click
import msgspec

from tiermem.core.consolidate import MODES, ConsolidationReport
from tiermem.core.engine import TIER_CHOICES
from tiermem.core.errors import EXIT_INTERNAL, EXIT_USAGE, InvalidInput, TiermemError
from tiermem.core.interchange import (
    SEED_FILES,
    export_json,
    export_markdown,
    import_seed,
    record_dict,
)
from tiermem.core.llm import is_loopback
from tiermem.core.metrics import DayMetrics
from tiermem.core.paths import DEFAULT_AGENT
from tiermem.core.retrieve import RetrievalResult
from tiermem.core.scoring import half_life_days
from tiermem.core.tokens import count_tokens
from tiermem.core.tree import TreeIndex
from tiermem.tui import (
    cli_agent,
    cli_conflicts,
    cli_devices,
    cli_ops,
    cli_restore,
    cli_sync,
    cli_write,
)
from tiermem.tui.clikit import Options, emit, pass_options

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
TIER = click.Choice(TIER_CHOICES)


@click.group(context_settings=CONTEXT, invoke_without_command=True)
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="Memory home folder (default: $TIERMEM_HOME or the user data folder).",
)
@click.option(
    "--agent-id", default=DEFAULT_AGENT, show_default=True, help="Which agent's memory to use."
)
@click.option("--json", "as_json", is_flag=True, help="Print one machine-readable JSON document.")
@click.version_option(package_name="tiermem")
@click.pass_context
def app(ctx: click.Context, home: Path | None, agent_id: str, as_json: bool) -> None:
    """Tiered long-term memory for AI agents: hot, warm and cold tiers with a tree index.

    Without a command, opens the terminal UI (the same as `tiermem tui`).
    """
    ctx.obj = Options(home=home, agent_id=agent_id, json=as_json)
    if ctx.invoked_subcommand is None:
        if not interactive_terminal():  # a script or a pipe: the help, not a full-screen app
            click.echo(ctx.get_help())
            return
        run_tui(ctx.obj)


# -- store / retrieve / cold ---------------------------------------------------------------


@app.command()
@click.option("--text", required=True, help="The fact to remember.")
@click.option("--category", required=True, help="Category path, e.g. projects/evoclaw/bsc.")
@click.option(
    "--importance",
    type=float,
    default=0.5,
    show_default=True,
    help="0.9-1.0 critical, 0.7-0.8 decisions, 0.4-0.6 facts, below 0.4 casual.",
)
@click.option("--url", multiple=True, help="A URL (repeatable).")
@click.option("--command", multiple=True, help="A shell command (repeatable).")
@click.option("--path", multiple=True, help="A file path (repeatable).")
@pass_options
def store(
    opts: Options,
    text: str,
    category: str,
    importance: float,
    url: tuple[str, ...],
    command: tuple[str, ...],
    path: tuple[str, ...],
) -> None:
    """Store a fact in warm memory (storing a known fact reinforces it instead)."""
    with opts.open() as mem:
        outcome = mem.store(
            text, category, importance, urls=url, commands=command, paths=path, source="cli"
        )
        node = mem.trees.load().node_for(outcome.category)
        record = mem.get(outcome.id)
    payload = {
        "id": outcome.id,
        "created": outcome.created,
        "deduplicated": not outcome.created,
        "merged_into": outcome.merged_into,
        "similarity": outcome.similarity,
        "category": outcome.category,
        "tree_node": node,
        "tokens": outcome.tokens,
        "metadata": {"urls": record.urls, "commands": record.commands, "paths": record.paths},
    }
    verb = "stored" if outcome.created else "already known, reinforced"
    if outcome.similarity is not None and outcome.similarity < 1.0:
        verb = f"near-duplicate ({outcome.similarity:.0%} similar) of a known fact, reinforced"
    emit(opts, payload, f"{verb}: {outcome.id} in {node or 'root'}")


@app.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), help="Most results (default 5).")
@click.option(
    "--tier", type=TIER, help="Search only this tier (default: all; cold includes frozen)."
)
@click.option("--category", help="Only this category and below.")
@click.option("--budget", type=click.IntRange(min=1), help="Token budget for the results.")
@click.option(
    "--mode",
    type=click.Choice(["keyword", "vector", "hybrid"]),
    help="keyword (default), vector or hybrid (the vector extra; default: [retrieval] mode).",
)
@click.option(
    "--llm",
    is_flag=True,
    help="LLM tree search: the [llm] endpoint picks the categories (falls back to keyword).",
)
@cli_agent.session_option
@pass_options
def retrieve(
    opts: Options,
    query: str,
    limit: int | None,
    tier: str | None,
    category: str | None,
    budget: int | None,
    mode: str | None,
    llm: bool,
    session: str | None,
) -> None:
    """Find memories through the tree, with the reason each was found."""
    with opts.open() as mem:
        result = mem.retrieve(
            query, limit=limit, tier=tier, category=category, budget=budget, mode=mode, llm=llm
        )
        cli_agent.track(mem, session, result)
    emit(opts, retrieval_payload(result), lambda: render_retrieval(result))


@app.command()
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True)
@pass_options
def cold(opts: Options, query: str, limit: int) -> None:
    """Search the cold archive (cold and frozen facts)."""
    with opts.open() as mem:
        result = mem.retrieve(query, limit=limit, tier="cold")
    emit(opts, retrieval_payload(result), lambda: render_retrieval(result))


@app.command()
@click.argument("memory_id")
@pass_options
def get(opts: Options, memory_id: str) -> None:
    """Show one memory with its metadata and score."""
    with opts.open() as mem:
        memory = mem.get(memory_id)
        score = memory.score(mem.now(), mem.cfg.scoring)
    payload = record_dict(memory) | {"score": score}
    emit(opts, payload, lambda: "\n".join(f"{k}: {v}" for k, v in payload.items()))


def retrieval_payload(result: RetrievalResult) -> dict[str, Any]:
    return {
        "query": result.query,
        "terms": result.terms,
        "tree_matches": [{"path": c.path, "reason": c.reason} for c in result.categories],
        "candidates": result.candidates,
        "budget": result.budget,
        "tokens": result.tokens,
        "notes": result.notes,
        "mode": result.mode,
        "time_windows": result.time_windows,
        "results": [
            record_dict(h.memory)
            | {
                "explanation": dataclasses.asdict(h.explanation)
                | {"matched_terms": list(h.explanation.matched_terms)}
            }
            for h in result.hits
        ],
    }


def render_retrieval(result: RetrievalResult) -> str:
    lines = [f"note: {n}" for n in result.notes] if result.hits else []
    lines += [f"time: {w}" for w in result.time_windows]
    for c in result.categories:
        lines.append(f"tree: {c.path} ({c.reason})")
    if not result.hits:
        lines.append(
            "no memories found" + (f" ({'; '.join(result.notes)})" if result.notes else "")
        )
    for i, hit in enumerate(result.hits, 1):
        e = hit.explanation
        lines.append(f"{i}. [{e.tier}] {hit.memory.text}")
        why = f"   path {e.path or 'root'}; matched {', '.join(e.matched_terms) or '-'}"
        why += f"; relevance {e.relevance:.2f}"
        if e.similarity is not None:
            why += f" (similarity {e.similarity:.2f}, found by {e.found_by})"
        if e.category_boost:
            why += f" +{e.category_boost:.0%} category"
        if e.time_boost:
            why += f" +{e.time_boost:.0%} time {e.time_match}"
        why += f"; tier score {e.tier_score:.2f}; id {hit.memory.id}"
        lines.append(why)
        if e.llm_reason:
            lines.append(f"   LLM: {e.llm_reason}")
    if result.budget:
        lines.append(f"{result.tokens}/{result.budget} tokens")
    return "\n".join(lines)


# -- hot -----------------------------------------------------------------------------------


@app.command()
@click.option(
    "--update",
    nargs=2,
    metavar="KEY JSON",
    help="Merge a JSON object into identity or owner_profile (null removes a key).",
)
@click.option("--add-lesson", metavar="TEXT", help="Add a critical lesson.")
@click.option(
    "--importance", type=float, default=0.7, show_default=True, help="Importance of the lesson."
)
@click.option("--category", default="general", show_default=True, help="Lesson category.")
@click.option("--add-event", metavar="TEXT", help="Add a recent event.")
@click.option("--add-task", metavar="TEXT", help="Add a pending task.")
@click.option("--complete-task", metavar="ID|TEXT", help="Mark a task done (it becomes an event).")
@click.option("--add-project", metavar="NAME", help="Add or update a project.")
@click.option("--description", default="", help="Project description.")
@click.option("--status", default="", help="Project status.")
@click.option("--remove", metavar="ID|TEXT", help="Remove a lesson, event, task or project.")
@pass_options
def hot(
    opts: Options,
    update: tuple[str, str] | None,
    add_lesson: str | None,
    importance: float,
    category: str,
    add_event: str | None,
    add_task: str | None,
    complete_task: str | None,
    add_project: str | None,
    description: str,
    status: str,
    remove: str | None,
) -> None:
    """Show or edit hot memory (always in context; rendered as MEMORY.md)."""
    actions = [
        a
        for a in (update, add_lesson, add_event, add_task, complete_task, add_project, remove)
        if a is not None
    ]
    if len(actions) > 1:
        raise InvalidInput("give one hot edit at a time")
    with opts.open() as mem:
        pruned: list[str] = []
        if update is not None:
            pruned = mem.update_hot(update[0], _json_object(update[1]))
        elif add_lesson is not None:
            pruned = mem.add_lesson(add_lesson, importance, category)[1]
        elif add_event is not None:
            pruned = mem.add_event(add_event)[1]
        elif add_task is not None:
            pruned = mem.add_task(add_task)[1]
        elif complete_task is not None:
            pruned = mem.complete_task(complete_task)[1]
        elif add_project is not None:
            pruned = mem.add_project(add_project, description, status)[1]
        elif remove is not None:
            mem.remove_hot_item(remove)
        read_back = mem.last_memory_md or mem.read_back_memory_md()  # hand edits of MEMORY.md
        state = mem.hot()
        markdown = mem.memory_md()
        size = mem.hot_size_bytes()
        path = mem.home.memory_md(mem.agent_id)
        limit = mem.cfg.hot.max_bytes
    payload = {
        "hot": msgspec.to_builtins(state),
        "bytes": size,
        "limit_bytes": limit,
        "tokens": count_tokens(markdown),
        "pruned": pruned,
        "memory_md": str(path),
        "hand_edits": read_back.as_dict() if read_back.edited else None,
    }
    text = markdown + f"\n{size}/{limit} bytes · {path}"
    if pruned:
        text += "\nmoved to warm: " + "; ".join(pruned)
    if read_back.edited:
        text += "\n" + "\n".join(cli_write.render_memory_md(read_back))
    emit(opts, payload, text)


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--update value is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise InvalidInput("--update value must be a JSON object")
    return value


# -- tree ----------------------------------------------------------------------------------


@app.command()
@click.option("--show", is_flag=True, help="Print the tree (the default).")
@click.option("--add", nargs=2, metavar="PATH DESC", help="Add a category node.")
@click.option("--remove", metavar="PATH", help="Remove a node that holds no memories.")
@click.option("--prune", is_flag=True, help="Remove nodes idle for 60+ days.")
@pass_options
def tree(
    opts: Options, show: bool, add: tuple[str, str] | None, remove: str | None, prune: bool
) -> None:
    """Show or edit the category tree index."""
    if sum(x is not None and x is not False for x in (add, remove, prune)) > 1:
        raise InvalidInput("give one tree edit at a time")
    payload: dict[str, Any] = {}
    with opts.open() as mem:
        if add is not None:
            payload["added"] = mem.tree_add(add[0], add[1]).path
        elif remove is not None:
            payload["removed"] = mem.tree_remove(remove)
        elif prune:
            payload["removed"] = mem.tree_prune()
        index = mem.tree()
    payload |= tree_payload(index)
    emit(opts, payload, lambda: render_tree(index, payload))


def tree_payload(index: TreeIndex) -> dict[str, Any]:
    return {
        "nodes": [
            {
                "path": n.path,
                "description": n.description,
                "warm": n.warm,
                "cold": n.cold,
                "last_activity": n.last_activity,
            }
            for _, n in sorted(index.nodes.items())
        ],
        "root": {"warm": index.root_warm, "cold": index.root_cold},
        "node_count": len(index.nodes),
        "max_nodes": index.cfg.max_nodes,
        "bytes": index.size_bytes(),
        "max_bytes": index.cfg.max_bytes,
    }


def render_tree(index: TreeIndex, payload: dict[str, Any]) -> str:
    lines = []
    if payload.get("added"):
        lines.append(f"added {payload['added']}")
    if "removed" in payload:
        lines.append("removed " + (", ".join(payload["removed"]) or "nothing"))
    lines.append(f"Root (warm {index.root_warm}, cold {index.root_cold})")

    def walk(path: str, depth: int) -> Iterator[str]:
        for child in index.children(path):
            node = index.nodes[child]
            name = child.rpartition("/")[2]
            yield f"{'  ' * depth}{name} — {node.description} (warm {node.warm}, cold {node.cold})"
            yield from walk(child, depth + 1)

    lines += walk("", 1)
    lines.append(
        f"{len(index.nodes)}/{index.cfg.max_nodes} nodes · "
        f"{index.size_bytes()}/{index.cfg.max_bytes} bytes"
    )
    return "\n".join(lines)


# -- consolidation and metrics -------------------------------------------------------------


@app.command()
@click.option("--mode", default="quick", show_default=True, help=" | ".join(MODES))
@pass_options
def consolidate(opts: Options, mode: str) -> None:
    """Run memory maintenance: quick (hourly), daily, monthly or full (with a report)."""
    with opts.open() as mem:
        report = mem.consolidate(mode)
    emit(opts, consolidation_payload(report), lambda: render_consolidation(report))


def consolidation_payload(report: ConsolidationReport) -> dict[str, Any]:
    return {
        "mode": report.mode,
        "moves": [vars(m) for m in report.moves],
        "evicted": len(report.evicted),
        "promoted": len(report.promoted),
        "hot_pruned": report.hot_pruned,
        "deleted_frozen": report.deleted_frozen,
        "tree_pruned": report.tree_pruned,
        "tree_added": report.tree_added,
        "analysis": report.analysis,
        "before": vars(report.before),
        "after": vars(report.after) if report.after else None,
        "ingested": cli_write.ingest_payload(report.ingested) if report.ingested else None,
        "memory_md": report.memory_md.as_dict() if report.memory_md else None,
    }


def render_consolidation(report: ConsolidationReport) -> str:
    lines = [
        f"consolidation ({report.mode}): {len(report.promoted)} promoted to hot, "
        f"{len(report.evicted)} evicted from warm, {report.deleted_frozen} frozen deleted, "
        f"{len(report.tree_pruned)} tree nodes pruned"
    ]
    if report.mode == "full":
        for move in report.moves:
            lines.append(
                f"  {move.from_tier} → {move.to_tier} ({move.reason}, score "
                f"{move.score:.3f}): {move.text[:70]}"
            )
        lines += [f"  pruned from hot: {p}" for p in report.hot_pruned]
        lines += [f"  tree node added: {p}" for p in report.tree_added]
        lines += [f"  tree node pruned: {p}" for p in report.tree_pruned]
        lines += [f"  {note}" for note in report.analysis]
        if report.after:
            b, a = report.before, report.after
            lines.append("  sizes        before → after")
            for label, x, y in (
                ("warm facts", b.warm_count, a.warm_count),
                ("warm bytes", b.warm_bytes, a.warm_bytes),
                ("cold facts", b.cold_count, a.cold_count),
                ("frozen facts", b.frozen_count, a.frozen_count),
                ("hot bytes", b.hot_bytes, a.hot_bytes),
                ("tree nodes", b.tree_nodes, a.tree_nodes),
                ("tree bytes", b.tree_bytes, a.tree_bytes),
            ):
                lines.append(f"  {label:<12} {x:>6} → {y}")
    return "\n".join(lines)


@app.command()
@click.option(
    "--days", type=click.IntRange(min=1), default=7, show_default=True, help="Days of history."
)
@pass_options
def metrics(opts: Options, days: int) -> None:
    """Show memory metrics per day: retrievals, evictions, sizes, tokens saved."""
    with opts.open() as mem:
        history = mem.metrics_history(days)
        cfg = mem.cfg
    today = history[-1]
    payload = {
        "today": _day_payload(today),
        "history": [_day_payload(d) for d in history],
        "limits": {
            "hot_bytes": cfg.hot.max_bytes,
            "warm_bytes": cfg.warm.max_bytes,
            "tree_nodes": cfg.tree.max_nodes,
            "tree_bytes": cfg.tree.max_bytes,
        },
        "decay": {"tau_days": cfg.scoring.tau_days, "half_life_days": half_life_days(cfg.scoring)},
    }
    emit(opts, payload, lambda: render_metrics(history, cfg.warm.max_bytes, cfg.hot.max_bytes))


def _day_payload(day: DayMetrics) -> dict[str, Any]:
    return vars(day) | {"tokens_saved": day.tokens_saved}


def render_metrics(history: Sequence[DayMetrics], warm_limit: int, hot_limit: int) -> str:
    t = history[-1]
    lines = [
        f"today ({t.day}): {t.retrievals} retrievals, {t.stores} stored, {t.evictions} evicted, "
        f"{t.promotions} promoted",
        f"hot   {t.hot_bytes}/{hot_limit} bytes, {t.hot_tokens} tokens",
        f"warm  {t.warm_count} facts, {t.warm_bytes / 1024:.1f}/{warm_limit / 1024:.0f} KB",
        f"cold  {t.cold_count} facts",
        f"tree  {t.tree_nodes} nodes, {t.tree_bytes} bytes, {t.tree_tokens} tokens",
        f"context tokens saved today: {t.tokens_saved} (flat memory would be "
        f"{t.flat_tokens + t.hot_tokens} tokens per context)",
    ]
    if len(history) > 1:
        lines.append("day         retrievals evictions warm_kb saved")
        lines += [
            f"{d.day}  {d.retrievals:>10} {d.evictions:>9} {d.warm_bytes / 1024:>7.1f} "
            f"{d.tokens_saved:>5}"
            for d in history
        ]
    return "\n".join(lines)


# -- import / export -----------------------------------------------------------------------


@app.command(name="import")
@click.argument("folder", required=False, type=click.Path(path_type=Path))
@click.option("--warm", type=click.Path(path_type=Path), help="warm-memory.json")
@click.option("--tree", "tree_file", type=click.Path(path_type=Path), help="memory-tree.json")
@click.option("--hot", "hot_file", type=click.Path(path_type=Path), help="hot-memory-state.json")
@click.option("--config", type=click.Path(path_type=Path), help="config.json")
@pass_options
def import_(
    opts: Options,
    folder: Path | None,
    warm: Path | None,
    tree_file: Path | None,
    hot_file: Path | None,
    config: Path | None,
) -> None:
    """Import the seed's JSON files (idempotent: importing twice adds nothing)."""
    files = {"warm": warm, "tree": tree_file, "hot": hot_file, "config": config}
    if folder is not None:
        if not folder.is_dir():
            raise InvalidInput(f"{folder} is not a folder")
        for key, name in SEED_FILES.items():
            if files[key] is None and (folder / name).exists():
                files[key] = folder / name
    if not any(files.values()):
        raise InvalidInput("nothing to import: give a folder or --warm/--tree/--hot/--config")
    with opts.open() as mem:
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


@app.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
)
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    help="Write to this file (default: standard output).",
)
@pass_options
def export(opts: Options, fmt: str, output: Path | None) -> None:
    """Export the agent's whole memory as markdown or JSON."""
    if fmt not in ("markdown", "json"):
        raise InvalidInput(f"unknown format {fmt!r}: use markdown or json")
    with opts.open() as mem:
        pieces = export_json(mem) if fmt == "json" else export_markdown(mem)
        if output is None:
            for piece in pieces:
                sys.stdout.write(piece)
            return
        tmp = output.with_name(f".{output.name}.tmp")
        with tmp.open("w", encoding="utf-8") as handle:
            for piece in pieces:
                handle.write(piece)
        tmp.replace(output)
    emit(opts, {"written": str(output), "format": fmt}, f"wrote {output}")


# -- terminal UI (Textual is imported only here, so the other commands stay fast) ----------


def interactive_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def run_tui(opts: Options) -> None:
    from tiermem.tui.app import TiermemApp

    TiermemApp(opts.home, opts.agent_id).run()


@app.command()
@pass_options
def tui(opts: Options) -> None:
    """Open the terminal UI: browse and curate the tiers, the tree, metrics and sync."""
    run_tui(opts)


LOOPBACK = "127.0.0.1"


@app.command()
@click.option(
    "--host",
    default=None,
    help="Address to listen on (default 127.0.0.1; any other address needs --lan).",
)
@click.option(
    "--lan",
    is_flag=True,
    help="Listen beyond this machine (all interfaces unless --host) so a phone or tablet on "
    "your network can connect. There is no password: only on a network you trust.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@pass_options
def serve(opts: Options, host: str | None, lan: bool, port: int) -> None:
    """Serve the terminal UI to a web browser (loopback only unless --lan)."""
    address = serve_address(host, lan)
    command = [sys.executable, "-m", "tiermem.tui", "--agent-id", opts.agent_id]
    if opts.home is not None:
        command[3:3] = ["--home", str(opts.home.expanduser().resolve())]
    public = lan_address() if address == "0.0.0.0" else address
    url = f"http://{public if ':' not in public else f'[{public}]'}:{port}"
    from textual_serve.server import Server

    sys.stderr.write(f"tiermem: serving the UI at {url}" + ("" if lan else " (this machine only)"))
    sys.stderr.write("\n")
    if lan:
        sys.stderr.write("tiermem: anyone on your network can open it: stop with ctrl+c\n")
    Server(
        shlex.join([*command, "tui"]), host=address, port=port, title="tiermem", public_url=url
    ).serve()


def serve_address(host: str | None, lan: bool) -> str:
    """The address to bind: loopback unless `--lan` says otherwise, explicitly."""
    if host is None:
        return "0.0.0.0" if lan else LOOPBACK
    if not lan and not is_loopback(host):
        raise InvalidInput(f"{host} is reachable from other machines: add --lan to allow that")
    return host


def lan_address() -> str:
    """This machine's address on its network (what a phone types), or loopback if offline.
    Connecting a UDP socket sends nothing; it only picks the outgoing interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
            return str(probe.getsockname()[0])
        except OSError:
            return LOOPBACK


# -- entry point ---------------------------------------------------------------------------


# Each command module lists its top-level commands in COMMANDS and, where it has any, the
# subcommands of `tiermem sync` in SYNC_COMMANDS.
for command_module in (
    cli_write,
    cli_sync,
    cli_restore,
    cli_devices,
    cli_conflicts,
    cli_agent,
    cli_ops,
):
    for command in command_module.COMMANDS:
        app.add_command(command)
    for command in getattr(command_module, "SYNC_COMMANDS", []):
        cli_sync.sync_group.add_command(command)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI; turn every failure into one line on stderr and an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    sys.exit(run(args))


def run(args: list[str]) -> int:
    try:
        result = app.main(args=args, prog_name="tiermem", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except TiermemError as exc:
        return _fail(args, str(exc), exc.exit_code, type(exc).__name__)
    except click.exceptions.Abort:
        return _fail(args, "aborted", 130, "Aborted")
    except click.ClickException as exc:
        return _fail(args, exc.format_message(), EXIT_USAGE, "UsageError")
    except KeyboardInterrupt:
        return _fail(args, "interrupted", 130, "Interrupted")
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the last line of defence: still one line, never a traceback
        if os.environ.get("TIERMEM_DEBUG"):
            raise
        message = f"internal error ({type(exc).__name__}); rerun with TIERMEM_DEBUG=1 for details"
        return _fail(args, message, EXIT_INTERNAL, "InternalError")


def _fail(args: list[str], message: str, code: int, kind: str) -> int:
    message = " ".join(message.split())
    if "--json" in args:
        sys.stdout.write(json.dumps({"error": message, "type": kind, "exit_code": code}) + "\n")
    sys.stderr.write(f"tiermem: error: {message}\n")
    return code
