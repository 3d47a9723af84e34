"""tiermem's own exports read back into any agent: `export --format json` (a file) and
`export --format folder` (a folder). Every memory keeps what its record carries (see
`records`); hot memory and the tree come along. Items are keyed by the exported memory's id
under the exporting agent, so importing the same export twice adds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from tiermem.core import folder as folder_export
from tiermem.core import hot as hotmod
from tiermem.core import memory_md
from tiermem.core.errors import InvalidInput
from tiermem.core.importers import records
from tiermem.core.importers.base import Plan, read_file_text, read_json_file

_FRONT_MATTER_DATES = {"created": "created_at", "expires": "expires_at"}


def is_json_export(path: Path) -> bool:
    """Whether PATH is a file `export --format json` wrote (read only as far as its head)."""
    if not path.is_file():
        return False
    try:
        with path.open("rb") as handle:
            head = handle.read(256).lstrip()
    except OSError:
        return False
    return head.startswith(b"{") and b'"agent_id"' in head


def plan_json(path: Path) -> Plan:
    """The memories, tree and hot memory of a JSON export."""
    data = read_json_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("memories"), list):
        raise InvalidInput(f"{path}: not a tiermem JSON export (no 'memories' list)")
    plan = Plan("json")
    source = f"tiermem:{data.get('agent_id') or path.name}"
    for i, record in enumerate(data["memories"]):
        try:
            if not isinstance(record, dict):
                raise InvalidInput("not an object")
            plan.items.append(records.item_from_record(source, record))
        except InvalidInput as exc:
            plan.skip(f"memory {i}: {exc}")
    plan.hot = _hot(data.get("hot"), path)
    plan.tree = _tree(data.get("tree"))
    return plan


def _hot(raw: Any, path: Path) -> hotmod.HotState | None:
    if raw is None:
        return None
    try:
        return hotmod.decode(json.dumps(raw))
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidInput(f"{path}: malformed hot memory ({exc})") from None


def _tree(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, dict):
        return []
    nodes = [
        (str(p), str(n.get("description", "")) if isinstance(n, dict) else "")
        for p, n in raw.items()
    ]
    return sorted(nodes, key=lambda node: (node[0].count("/"), node[0]))


def plan_folder(folder: Path, now: float) -> Plan:
    """A folder export copied into another agent: its fact files and MEMORY.md."""
    plan = Plan("folder")
    source = folder_source(folder)
    for path in sorted((folder / folder_export.FACTS).rglob("*.md")):
        rel = path.relative_to(folder).as_posix()
        try:
            meta, text = folder_export.parse_fact(read_file_text(path), rel)
            plan.items.append(records.item_from_record(source, _record(meta, text, path)))
        except InvalidInput as exc:
            plan.skip(f"{rel}: {exc}")
    if (folder / "MEMORY.md").is_file():
        plan.hot = hot_from_markdown(read_file_text(folder / "MEMORY.md"), now)
    return plan


def folder_source(folder: Path) -> str:
    """The source a folder export's copies are recorded under: its agent's name."""
    return f"tiermem-folder:{folder_export.exported_agent(folder) or folder.name}"


def _record(meta: dict[str, Any], text: str, path: Path) -> dict[str, Any]:
    """A fact file's front matter as an export record."""
    record = {_FRONT_MATTER_DATES.get(k, k): v for k, v in meta.items()}
    record["text"] = text
    record.setdefault("id", path.stem)
    record["metadata"] = {k: meta.get(k) or [] for k in ("urls", "commands", "paths")}
    return record


def hot_from_markdown(text: str, now: float) -> hotmod.HotState | None:
    """Hot memory as a MEMORY.md file shows it (None when the text is not one)."""
    parsed = memory_md.parse(text)
    if not parsed.recognized:
        return None
    state = hotmod.HotState()
    memory_md.apply(state, parsed, now)
    return state
