"""Import of the original layout's files and export of an agent's memory.

Seed files (EvoClaw tiered-memory v2.x): `warm-memory.json` (a list of facts), `memory-tree.json`
(path → {desc, ...}, with a `root` entry), `hot-memory-state.json` (the hot state) and
`config.json`. Import is idempotent: facts are content-addressed, tree nodes and hot items keyed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from tiermem.core import hot as hotmod
from tiermem.core import rows
from tiermem.core.config import config_from_mapping, render_toml, seed_config_to_mapping
from tiermem.core.errors import InvalidInput, LimitExceeded, TiermemError
from tiermem.core.paths import read_text
from tiermem.core.rows import TIERS, MemoryRow
from tiermem.core.warm import NewFact

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

SEED_FILES = {
    "warm": "warm-memory.json",
    "tree": "memory-tree.json",
    "hot": "hot-memory-state.json",
    "config": "config.json",
}


@dataclass
class ImportReport:
    """What an import added and merged, and what it warns about."""

    facts_added: int = 0
    facts_merged: int = 0
    nodes_added: list[str] = field(default_factory=list)
    hot_imported: bool = False
    config_written: Path | None = None
    warnings: list[str] = field(default_factory=list)


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path, InvalidInput))
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:  # the json module decodes nested arrays recursively
        raise InvalidInput(f"{path}: invalid JSON (nested too deeply)") from None


def import_seed(
    mem: Memory,
    *,
    warm: Path | None = None,
    tree: Path | None = None,
    hot: Path | None = None,
    config: Path | None = None,
) -> ImportReport:
    """Import whichever seed files are given. Every file is parsed and validated before
    anything is written, so a bad file changes nothing."""
    mem.require_memory()
    report = ImportReport()
    facts = _parse_warm(read_json(warm), warm, report) if warm else []
    nodes = _parse_tree(read_json(tree), tree) if tree else []
    state = _parse_hot(read_json(hot), hot) if hot else None
    cfg_text = None
    if config:
        mapping, ignored = seed_config_to_mapping(
            _object(read_json(config), config), with_ignored=True
        )
        report.warnings += [f"{config.name}: {reason}" for reason in ignored]
        cfg_text = render_toml(config_from_mapping(mapping, str(config)))
    if state is not None:
        # raises before any write if it cannot fit; what it would prune, the save moves to warm
        hotmod.enforce_limits(hotmod.decode(hotmod.encode(state)), mem.cfg.hot)
    for path, desc in nodes:
        try:
            before = set(mem.trees.load().nodes)
            mem.tree_add(path, desc)
            report.nodes_added += sorted(set(mem.trees.load().nodes) - before)
        except (LimitExceeded, InvalidInput) as exc:
            report.warnings.append(f"tree node {path} skipped: {exc}")
    if facts:
        outcomes = mem.store_many(facts)
        report.facts_added = sum(o.created for o in outcomes)
        report.facts_merged = len(outcomes) - report.facts_added
    if state is not None:
        mem.edit_hot(lambda current: merge_hot(current, state))
        report.hot_imported = True
    if cfg_text is not None:
        mem.home.config_path.write_text(cfg_text, encoding="utf-8")
        report.config_written = mem.home.config_path
    return report


def _object(data: Any, path: Path) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a JSON object")
    return data


def _parse_warm(data: Any, path: Path, report: ImportReport) -> list[NewFact]:
    if isinstance(data, dict):
        data = data.get("facts", data.get("memories"))
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: expected a list of facts")
    facts = []
    for i, item in enumerate(data):
        try:
            if not isinstance(item, dict):
                raise InvalidInput("not an object")
            if not isinstance(item.get("metadata") or {}, dict):
                raise InvalidInput("metadata is not an object")
            meta = item.get("metadata") or {}
            facts.append(
                NewFact(
                    text=str(item["text"]),
                    category=str(item.get("category") or "general"),
                    importance=float(item.get("importance", 0.5)),
                    urls=tuple(meta.get("urls", ())),
                    commands=tuple(meta.get("commands", ())),
                    paths=tuple(meta.get("file_paths", meta.get("paths", ()))),
                    source="import",
                    created_at=float(item["created_at"]) if "created_at" in item else None,
                    access_count=int(item.get("access_count", 0)),
                )
            )
        except (KeyError, TypeError, ValueError, TiermemError) as exc:
            report.warnings.append(f"{path.name} fact {i} skipped: {_reason(exc)}")
    return facts


def _reason(exc: Exception) -> str:
    return f"missing {exc}" if isinstance(exc, KeyError) else str(exc)


def _parse_tree(data: Any, path: Path) -> list[tuple[str, str]]:
    nodes = _object(data, path)
    out = []
    for key, node in nodes.items():
        if key == "root":
            continue
        desc = node.get("desc", node.get("description", "")) if isinstance(node, dict) else ""
        out.append((str(key), str(desc)))
    return sorted(out, key=lambda kv: (kv[0].count("/"), kv[0]))


def _parse_hot(data: Any, path: Path) -> hotmod.HotState:
    raw = _object(data, path)
    mappings = {key: raw.get(key) or {} for key in ("identity", "owner_profile")}
    for key, value in mappings.items():
        if not isinstance(value, dict):
            raise InvalidInput(f"{path}: malformed hot state ({key} is not an object)")
    state = hotmod.HotState(
        identity=dict(mappings["identity"]), owner_profile=dict(mappings["owner_profile"])
    )
    ctx = raw.get("active_context") or {}
    try:
        for p in ctx.get("projects", []):
            hotmod.HotStore.upsert_project(
                state,
                str(p["name"]),
                str(p.get("description", "")),
                str(p.get("status", "")),
                float(p.get("updated_at", 0)),
            )
        for e in ctx.get("events", []):
            hotmod.HotStore.add_event(state, str(e["text"]), float(e.get("timestamp", 0)))
        for t in ctx.get("tasks", []):
            hotmod.HotStore.add_task(
                state, str(t["text"]), float(t.get("timestamp", 0)), str(t.get("status", "pending"))
            )
        for lesson in raw.get("critical_lessons", []):
            if isinstance(lesson, str):
                lesson = {"text": lesson}
            hotmod.HotStore.add_lesson(
                state,
                str(lesson["text"]),
                float(lesson.get("importance", 0.7)),
                str(lesson.get("category", "general")),
                float(lesson.get("timestamp", 0)),
            )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidInput(f"{path}: malformed hot state ({_reason(exc)})") from None
    return state


def merge_hot(current: hotmod.HotState, incoming: hotmod.HotState) -> None:
    """Add what `incoming` holds to `current`; items both hold are kept once."""
    current.identity.update(incoming.identity)
    current.owner_profile.update(incoming.owner_profile)
    ctx = current.active_context
    for project in incoming.active_context.projects:
        hotmod.HotStore.upsert_project(
            current, project.name, project.description, project.status, project.updated_at
        )
    known = {e.id for e in ctx.events} | {t.id for t in ctx.tasks}
    ctx.events += [e for e in incoming.active_context.events if e.id not in known]
    ctx.tasks += [t for t in incoming.active_context.tasks if t.id not in known]
    lessons = {lesson.id for lesson in current.critical_lessons}
    current.critical_lessons += [x for x in incoming.critical_lessons if x.id not in lessons]


# -- export --------------------------------------------------------------------------------


_DERIVED = frozenset({"size_bytes", "tokens"})
"""Fields an import computes again from the text: not exported."""
_METADATA = ("urls", "commands", "paths")


def record_dict(memory: MemoryRow) -> dict[str, Any]:
    """A memory as exports and `--json` show it: every `MemoryRow` field but the derived ones,
    the URLs, commands and paths under ``metadata``."""
    out: dict[str, Any] = {}
    for name in rows.NAMES:
        if name in _DERIVED:
            continue
        value = getattr(memory, name)
        if name in _METADATA:
            out.setdefault("metadata", {})[name] = list(value)
        else:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def export_records(mem: Memory) -> Iterator[tuple[MemoryRow, dict[str, Any]]]:
    """Every memory with its export record: `record_dict` plus its tags, expiry (epoch
    seconds, or None) and the ids it is linked to (`related_to`)."""
    from tiermem.core import hygiene, links  # only an export reads tags and links

    for chunk in mem.memories.iter_all():
        ids = [m.id for m in chunk]
        extras = hygiene.extras_for(mem, ids)
        linked = links.linked(mem, ids)
        for memory in chunk:
            tags, expires_at = extras.get(memory.id, ((), None))
            extra = {
                "tags": list(tags),
                "expires_at": expires_at,
                "related_to": linked.get(memory.id, []),
            }
            yield memory, record_dict(memory) | extra


def export_json(mem: Memory) -> Iterator[str]:
    """The agent's whole memory as one JSON document, produced in pieces (never all in RAM)."""
    tree = mem.tree()
    yield "{"
    yield f'"agent_id": {json.dumps(mem.agent_id)},\n'
    yield f'"hot": {msgspec.json.encode(mem.hot()).decode()},\n'
    nodes = {
        p: {
            "description": n.description,
            "warm": n.warm,
            "cold": n.cold,
            "last_activity": n.last_activity,
        }
        for p, n in sorted(tree.nodes.items())
    }
    yield f'"tree": {json.dumps(nodes, ensure_ascii=False)},\n'
    yield '"memories": ['
    first = True
    for _memory, record in export_records(mem):
        yield ("" if first else ",") + "\n" + json.dumps(record, ensure_ascii=False)
        first = False
    yield "\n]}\n"


def export_markdown(mem: Memory) -> Iterator[str]:
    """MEMORY.md, the tree, then every memory grouped by tier (for people and for git)."""
    yield mem.memory_md()
    tree = mem.tree()
    yield "\n## Tree index\n\n"
    for path in sorted(tree.nodes):
        node = tree.nodes[path]
        indent = "  " * (node.depth - 1)
        yield f"{indent}- `{path}` — {node.description} (warm {node.warm}, cold {node.cold})\n"
    for tier in TIERS:
        yield f"\n## {tier.title()} memories\n\n"
        for chunk in mem.memories.iter_tier(tier):
            for m in chunk:
                meta = " ".join(f"<{u}>" for u in m.urls)
                yield (
                    f"- [{m.category}] {m.text} (importance {m.importance:g}) {meta}".rstrip()
                    + "\n"
                )
