"""mem0: the memories `Memory.get_all()` / `MemoryClient.get_all()` return, saved as JSON.

The shapes read: `{"results": [...]}` (mem0 ≥ 1.0), a bare list (older versions and the
platform's v1 API) and `{"memories": [...]}`; one memory is `{"id", "memory", "hash",
"metadata", "categories", "created_at", "updated_at", "user_id", "agent_id", …}`. The first of
`categories` (the platform's labels) becomes the category, else distillation's placement; the
memory's `id` keys it, so importing the same export twice adds nothing.

`metadata.importance`, `metadata.tags` and `metadata.urls|commands|paths` are read when a
memory has them. `export_mem0` writes the same shape back (`{"results": [...]}`, which
`Memory.add(..., infer=False)` or the platform's import takes) with those keys in `metadata`
and the rest of the memory under `metadata.tiermem`, so a tiermem → mem0 → tiermem round trip
loses nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.core import distill as distillmod
from tiermem.core import interchange
from tiermem.core.errors import InvalidInput
from tiermem.core.importers import records
from tiermem.core.importers.base import Plan, read_json_file
from tiermem.core.importers.context import PlanContext
from tiermem.core.ingest import item_key
from tiermem.core.tree import normalize_path

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

_KEPT = "tiermem"
"""The `metadata` key holding the rest of a tiermem export record."""
_IN_MEM0 = frozenset({"id", "text", "category", "importance", "metadata", "tags"})
"""Record fields mem0's own keys or `metadata` already carry."""


def plan_mem0(path: Path, ctx: PlanContext) -> Plan:
    """The memories of a mem0 `get_all` JSON file (or every *.json file of a folder)."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise InvalidInput(f"{path}: no *.json files")
    plan = Plan("mem0")
    for file in files:
        for i, raw in enumerate(_memories(read_json_file(file), file)):
            _one(plan, file.name, i, raw, ctx)
    return plan


def _memories(data: Any, path: Path) -> list[Any]:
    if isinstance(data, dict):
        data = data.get("results", data.get("memories"))
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: not a mem0 export (expected a list or {{'results': [...]}})")
    return data


def _one(plan: Plan, name: str, i: int, raw: Any, ctx: PlanContext) -> None:
    if not isinstance(raw, dict):
        plan.skip(f"{name} memory {i}: not an object")
        return
    text = " ".join(str(raw.get("memory") or raw.get("text") or "").split())
    if not text:
        plan.skip(f"{name} memory {i}: no text")
        return
    given_meta = raw.get("metadata")
    meta: dict[str, Any] = given_meta if isinstance(given_meta, dict) else {}
    _kind, category, importance = distillmod.classify(text, ctx.projects)
    labels = raw.get("categories") or meta.get("categories") or []
    if isinstance(labels, list) and labels and isinstance(labels[0], str):
        try:
            category = normalize_path(labels[0])
        except InvalidInput:
            plan.skip(f"{name} memory {i}: category {labels[0]!r} unusable, placed by content")
    given = meta.get("importance")
    if isinstance(given, int | float) and not isinstance(given, bool) and 0 <= given <= 1:
        importance = float(given)
    record = {
        "id": str(raw.get("id") or raw.get("hash") or item_key(text)),
        "text": text,
        "category": category,
        "importance": importance,
        "created_at": raw.get("created_at"),
        "metadata": meta,
        "tags": meta.get("tags"),
    }
    kept = meta.get(_KEPT)
    try:
        plan.items.append(records.item_from_record("mem0", record | _kept(kept)))
    except InvalidInput as exc:
        plan.skip(f"{name} memory {i}: {exc}")


def _kept(kept: Any) -> dict[str, Any]:
    """What a tiermem export keeps under `metadata.tiermem` (its own record's other fields)."""
    return dict(kept) if isinstance(kept, dict) else {}


def export_mem0(mem: Memory, user_id: str | None = None) -> Iterator[str]:
    """Every memory as mem0's `get_all` JSON (`{"results": [...]}`), produced in pieces: what
    mem0 reads itself in `metadata` (importance, URLs, commands, paths, tags), the rest of the
    memory's export record under `metadata.tiermem`."""
    yield '{"results": ['
    first = True
    for m, full in interchange.export_records(mem):
        kept = {k: v for k, v in full.items() if k not in _IN_MEM0}
        record = {
            "id": m.id,
            "memory": m.text,
            "hash": hashlib.md5(m.text.encode(), usedforsecurity=False).hexdigest(),
            "metadata": full["metadata"]
            | {"importance": m.importance, "tags": full["tags"], _KEPT: kept},
            "categories": [m.category],
            "created_at": _iso(m.created_at),
            "updated_at": _iso(m.last_access or m.created_at),
            "user_id": user_id or mem.agent_id,
        }
        yield ("" if first else ",") + "\n" + json.dumps(record, ensure_ascii=False)
        first = False
    yield "\n]}\n"


def _iso(value: float) -> str:
    return dt.datetime.fromtimestamp(value, dt.UTC).isoformat()
