"""Memory maintenance and its figures: `consolidate`, `metrics`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from tiermem.core.consolidate import MODES, ConsolidationReport, check_mode
from tiermem.core.metrics import DayMetrics
from tiermem.core.scoring import half_life_days
from tiermem.tui.cli.options import Options, emit, pass_options
from tiermem.tui.cli.reports import ingest_payload


@click.command()
@click.option("--mode", default="quick", show_default=True, help=" | ".join(MODES))
@pass_options
def consolidate(opts: Options, mode: str) -> None:
    """Run memory maintenance: quick (hourly), daily, monthly or full (with a report)."""
    check_mode(mode)
    opts.start_log()
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
        "ingested": ingest_payload(report.ingested) if report.ingested else None,
        "memory_md": report.memory_md.as_dict() if report.memory_md else None,
        "episodes_pruned": report.episodes_pruned,
        "dreaming": report.dream.as_dict() if report.dream else None,
    }


def render_consolidation(report: ConsolidationReport) -> str:
    lines = [
        f"consolidation ({report.mode}): {len(report.promoted)} promoted to hot, "
        f"{len(report.evicted)} evicted from warm, {report.deleted_frozen} frozen deleted, "
        f"{len(report.tree_pruned)} tree nodes pruned"
    ]
    if report.episodes_pruned:
        lines.append(f"  {len(report.episodes_pruned)} expired episodes deleted")
    if report.dream and report.dream.ran:
        d = report.dream
        lines.append(f"  dreaming: {len(d.episodes)} episodes → {len(d.facts)} facts ({d.mode})")
        lines += [f"  {note}" for note in d.notes]
    if report.mode == "full":
        for move in report.moves:
            lines.append(
                f"  {move.from_tier} → {move.to_tier} ({move.reason}, score "
                f"{move.score:.3f}): {move.text[:70]}"
            )
        lines += [f"  moved from hot to warm: {p}" for p in report.hot_pruned]
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


@click.command()
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
