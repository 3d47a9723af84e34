"""mem0: the memories `Memory.get_all()` / `MemoryClient.get_all()` return, saved as JSON.

The shapes read: `{"results": [...]}` (mem0 ≥ 1.0), a bare list (older versions and the
platform's v1 API) and `{"memories": [...]}`; one memory is `{"id", "memory", "hash",
"metadata", "categories", "created_at", "updated_at", "user_id", "agent_id", …}`. The first of
`categories` (the platform's labels) becomes the category, else distillation's placement; the
memory's `id` keys it, so importing the same export twice adds nothing.

`export_mem0` writes the same shape back (`{"results": [...]}` with tiermem's fields in
`metadata`), which `Memory.add(..., infer=False)` or the platform's import takes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.core import distill as distillmod
from tiermem.core.errors import InvalidInput
from tiermem.core.importers.base import Item, Plan, read_json_file, timestamp
from tiermem.core.importers.context import PlanContext
from tiermem.core.ingest import item_key
from tiermem.core.tree import normalize_path

if TYPE_CHECKING:
    from tiermem.core.engine import Memory


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
    _kind, category, importance = distillmod.classify(text, ctx.projects)
    labels = raw.get("categories") or (raw.get("metadata") or {}).get("categories") or []
    if isinstance(labels, list) and labels and isinstance(labels[0], str):
        try:
            category = normalize_path(labels[0])
        except InvalidInput:
            plan.skip(f"{name} memory {i}: category {labels[0]!r} unusable, placed by content")
    key = str(raw.get("id") or raw.get("hash") or item_key(text))
    created = timestamp(raw.get("created_at"))
    plan.items.append(Item("mem0", key, text, category, importance, created))


def export_mem0(mem: Memory, user_id: str | None = None) -> Iterator[str]:
    """Every memory as mem0's `get_all` JSON (`{"results": [...]}`), produced in pieces."""
    yield '{"results": ['
    first = True
    for chunk in mem.memories.iter_all():
        for m in chunk:
            record = {
                "id": m.id,
                "memory": m.text,
                "hash": hashlib.md5(m.text.encode(), usedforsecurity=False).hexdigest(),
                "metadata": {
                    "tiermem_category": m.category,
                    "tiermem_tier": m.tier,
                    "importance": m.importance,
                    "urls": list(m.urls),
                },
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
