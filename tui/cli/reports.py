"""Renderings shared by several commands: the ingestion report, MEMORY.md hand edits read back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiermem.core.ingest import IngestReport
    from tiermem.core.memory_md import MemoryMdReport


def ingest_payload(report: IngestReport) -> dict[str, Any]:
    return {
        "folder": str(report.folder),
        "files": [vars(f) for f in report.files],
        "added": report.added,
        "ignored": report.ignored,
        "errors": len(report.errors),
        "memory_md": report.memory_md.as_dict() if report.memory_md else None,
    }


def render_memory_md(report: MemoryMdReport) -> list[str]:
    if not report.edited and not report.error:
        return []
    lines = [f"{report.path.name}: hand edits read back"]
    lines += [f"  {change}" for change in report.applied]
    lines += [f"  kept as a warm fact: {line}" for line in report.unparsed]
    if report.error:
        lines.append(f"  {report.error}")
    if report.backup:
        lines.append(f"  copy: {report.backup}")
    return lines


def outline(value: Any, depth: int = 0) -> list[str]:
    """A nested report as indented `key: value` lines (no JSON or Python syntax for people)."""
    pad = "  " * depth
    lines: list[str] = []
    for key, item in value.items():
        label = str(key).replace("_", " ")
        if isinstance(item, dict):
            lines.append(f"{pad}{label}:")
            lines += outline(item, depth + 1) if item else [f"{pad}  -"]
        elif isinstance(item, list) and any(isinstance(i, dict) for i in item):
            lines.append(f"{pad}{label}:")
            lines += [f"{pad}  " + ", ".join(f"{k}: {v}" for k, v in i.items()) for i in item]
        elif isinstance(item, list):
            lines.append(f"{pad}{label}: {', '.join(map(str, item)) or '-'}")
        else:
            lines.append(f"{pad}{label}: {'-' if item is None else item}")
    return lines
