"""Memory as a folder of markdown files an owner can browse and edit, and the import of the
edits back.

    DIR/MEMORY.md                       hot memory
    DIR/semantic/<category>/<id>.md     one file per fact: front matter (id, category, …), text
    DIR/episodes/<n>.md                 episodes, when the home has them (read-only)
    DIR/skills/<status>/<name>.json     skills in the OpenClaw declarative format
    DIR/.tiermem-folder.json            what was exported (each file's digest)

Import applies what changed since the export: an edited fact is edited in place (its id in the
front matter), a new file without an id is stored, a deleted fact file moves the memory to the
forgotten archive (`tiermem unforget` brings it back), an edited MEMORY.md is read back like a
hand edit, and a skill file moved to `accepted/` or `rejected/` (or deleted: rejected) records
the owner's verdict. The folder is then written again, so importing twice changes nothing.
Front matter is `key: <JSON value>` lines (valid YAML).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.core import curate, hygiene, links, skills
from tiermem.core.errors import InvalidInput, NotFound, StorageError
from tiermem.core.files import replace_text
from tiermem.core.rows import MemoryRow
from tiermem.core.warm import COLUMNS

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

MANIFEST = ".tiermem-folder.json"
FACTS = "semantic"
_FENCE = "---"


@dataclass
class FolderReport:
    folder: str
    files: int = 0
    edited: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    hot_edited: bool = False
    unchanged: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def is_export(folder: Path) -> bool:
    return (folder / MANIFEST).is_file()


def exported_agent(folder: Path) -> str | None:
    """The agent a folder export was written from (None when the manifest does not say)."""
    agent = _manifest(folder).get("agent")
    return None if agent is None else str(agent)


def export_folder(mem: Memory, folder: Path, *, applied: bool = False) -> FolderReport:
    """Write the agent's memory as a folder (replacing a previous export there, unless it
    holds edits not imported yet; `applied`: import has just applied them)."""
    old = _manifest(folder) if is_export(folder) else None
    if old is None and folder.exists() and any(folder.iterdir()):
        raise InvalidInput(f"{folder} is not empty and holds no tiermem export")
    pending = old is not None and (
        _changed(folder, old["files"]) or set(old["files"]) - _present(folder)
    )
    if pending and not applied:
        raise InvalidInput(f"{folder} has edits not imported yet: run `tiermem import {folder}`")
    files: dict[str, str] = {"MEMORY.md": mem.memory_md()}
    records = [
        MemoryRow.read(r)
        for r in mem.db.query(
            f"SELECT {COLUMNS} FROM memories WHERE agent_id = ? ORDER BY seq", (mem.agent_id,)
        )
    ]
    extras = hygiene.extras_for(mem, [r.id for r in records])
    related = links.linked(mem, [r.id for r in records])
    for record in records:
        tags, expires_at = extras.get(record.id, ((), None))
        files[_fact_path(record)] = render_fact(
            record, tags, expires_at, related.get(record.id, [])
        )
    files |= _episodes(mem)
    for skill in skills.listing(mem):
        files[f"skills/{skill.status}/{skill.name}.json"] = json.dumps(skill.spec, indent=2) + "\n"
    for rel in (old or {}).get("files", {}):
        (folder / rel).unlink(missing_ok=True)
    for rel, text in files.items():
        _write(folder / rel, text)
    manifest = {
        "agent": mem.agent_id,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mem.now())),
        "files": {rel: _digest(text) for rel, text in files.items()},
    }
    _write(folder / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    _prune_empty(folder)
    return FolderReport(folder=str(folder), files=len(files))


def _fact_path(record: MemoryRow) -> str:
    return f"{FACTS}/{record.category or 'root'}/{record.id}.md"


def render_fact(
    record: MemoryRow,
    tags: tuple[str, ...],
    expires_at: float | None = None,
    related_to: Sequence[str] = (),
) -> str:
    meta: dict[str, Any] = {
        "id": record.id,
        "category": record.category,
        "importance": record.importance,
        "tier": record.tier,
        "created": _iso(record.created_at),
        "tags": list(tags),
        "urls": list(record.urls),
        "commands": list(record.commands),
        "paths": list(record.paths),
        "pinned": record.pinned,
        "valid_from": _iso(record.valid_from),
        "superseded_by": record.superseded_by,
        "superseded_at": _iso(record.superseded_at),
        "expires": _iso(expires_at),
        "related_to": list(related_to),
    }
    lines = [_FENCE, *(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in meta.items())]
    return "\n".join([*lines, _FENCE, record.text, ""])


def _iso(ts: float | None) -> str | None:
    """A date in the front matter: ISO 8601 UTC, to the microsecond (None stays None)."""
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="microseconds")


def parse_fact(text: str, where: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a fact file; one clear line when it is malformed."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != _FENCE or _FENCE not in [x.strip() for x in lines[1:]]:
        return {}, text.strip()
    end = 1 + [x.strip() for x in lines[1:]].index(_FENCE)
    meta: dict[str, Any] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            if line.strip():
                raise InvalidInput(
                    f"{where}: front matter line {line.strip()[:60]!r} is not key: value"
                )
            continue
        try:
            meta[key.strip()] = json.loads(value.strip())
        except json.JSONDecodeError:
            meta[key.strip()] = value.strip()
    return meta, "\n".join(lines[end + 1 :]).strip()


def _episodes(mem: Memory) -> dict[str, str]:
    """Episodes as files, if the home has an episodes table (its columns as front matter)."""
    if not mem.db.scalar("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'episodes'"):
        return {}
    names = [str(r[1]) for r in mem.db.query("PRAGMA table_info(episodes)")]
    body = next((n for n in ("summary", "text", "body", "content") if n in names), None)
    out: dict[str, str] = {}
    where = " WHERE agent_id = ?" if "agent_id" in names else ""
    rows = mem.db.query(f"SELECT * FROM episodes{where}", (mem.agent_id,) if where else ())
    for n, row in enumerate(rows, 1):
        values = dict(zip(names, row, strict=True))
        meta = [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in values.items() if k != body]
        text = str(values.get(body, "")) if body else ""
        out[f"episodes/{n:05d}.md"] = "\n".join([_FENCE, *meta, _FENCE, text, ""])
    return out


def _manifest(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{folder / MANIFEST}: unreadable ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        raise InvalidInput(f"{folder / MANIFEST}: not a tiermem folder manifest")
    return data


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, text)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror}") from None


def _prune_empty(folder: Path) -> None:
    for path in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def import_folder(mem: Memory, folder: Path) -> FolderReport:
    """Apply the owner's edits of an exported folder (module doc), then write it again."""
    mem.require_memory()
    manifest = _manifest(folder)
    if manifest.get("agent") not in (None, mem.agent_id):
        raise InvalidInput(f"{folder} is an export of agent {manifest['agent']!r}")
    known: dict[str, str] = manifest["files"]
    report = FolderReport(folder=str(folder))
    present = _present(folder)
    changed = _changed(folder, known)
    report.unchanged = len(present - changed - {MANIFEST})
    if "MEMORY.md" in changed:
        _write(mem.home.memory_md(mem.agent_id), _read(folder / "MEMORY.md", "MEMORY.md"))
        mem.read_back_memory_md()
        report.hot_edited = True
    with mem.db.transaction():  # a refused edit (one clear line) applies no fact or verdict
        _apply_facts(mem, folder, known, present, changed, report)
        _apply_skills(mem, known, present, changed, folder, report)
    export_folder(mem, folder, applied=True)
    for rel in changed - set(_manifest(folder)["files"]):
        if rel.startswith((FACTS + "/", "skills/")):  # applied: the export wrote it anew
            (folder / rel).unlink(missing_ok=True)
    _prune_empty(folder)
    return report


def _read(path: Path, rel: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{rel}: not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInput(f"{rel}: unreadable ({exc.strerror})") from None


def _present(folder: Path) -> set[str]:
    """The export's own kinds of files in the folder (anything else there is left alone)."""
    out = set()
    for path in folder.rglob("*"):
        rel = path.relative_to(folder).as_posix()
        kind = rel == "MEMORY.md" or rel.startswith((FACTS + "/", "skills/", "episodes/"))
        if rel == MANIFEST or (kind and path.is_file() and not path.name.startswith(".")):
            out.add(rel)
    return out


def _changed(folder: Path, known: dict[str, str]) -> set[str]:
    """Files added or edited since the export (deletions are the known files not present)."""
    return {
        rel
        for rel in _present(folder) - {MANIFEST}
        if known.get(rel) != hashlib.sha256((folder / rel).read_bytes()).hexdigest()
    }


def _apply_facts(
    mem: Memory,
    folder: Path,
    known: dict[str, str],
    present: set[str],
    changed: set[str],
    report: FolderReport,
) -> None:
    ids_by_file = {rel: Path(rel).stem for rel in known if rel.startswith(FACTS + "/")}
    edited_ids: set[str] = set()
    for rel in sorted(r for r in changed if r.startswith(FACTS + "/") and r.endswith(".md")):
        meta, text = parse_fact(_read(folder / rel, rel), rel)
        try:
            _apply_fact(mem, rel, meta, text, edited_ids, report)
        except InvalidInput as exc:
            raise InvalidInput(f"{rel}: {exc}") from None
    for rel, memory_id in ids_by_file.items():
        if rel not in present and memory_id not in edited_ids:
            try:
                curate.move_to_forgotten(mem, memory_id)
                report.forgotten.append(memory_id)
            except NotFound:
                continue


def _apply_fact(
    mem: Memory,
    rel: str,
    meta: dict[str, Any],
    text: str,
    edited_ids: set[str],
    report: FolderReport,
) -> None:
    """One new or edited fact file: edit the memory its front matter names, or store it."""
    if not text:
        raise InvalidInput("the fact's text is empty (delete the file to forget it)")
    memory_id = str(meta.get("id") or "")
    category = str(meta.get("category") or Path(rel).parent.relative_to(FACTS))
    try:
        importance = float(meta.get("importance", 0.5))
    except (TypeError, ValueError):
        raise InvalidInput(f"importance {meta.get('importance')!r} is not a number") from None
    tags = _strings(meta.get("tags"))
    if memory_id and mem.memories.get_many([memory_id]):
        edited_ids.add(memory_id)
        record = curate.edit(
            mem,
            memory_id,
            text=text,
            category=category,
            importance=importance,
            urls=_strings(meta.get("urls")),
            commands=_strings(meta.get("commands")),
            paths=_strings(meta.get("paths")),
        )
        _replace_tags(mem, record.id, tags)
        pinned = meta.get("pinned")
        if isinstance(pinned, bool) and pinned != record.pinned:
            curate.set_pinned(mem, record.id, pinned)
        report.edited.append(record.id)
        return
    outcome = mem.store(text, category, importance, source="folder")
    _replace_tags(mem, outcome.id, tags)
    report.stored.append(outcome.id)


def _strings(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [str(v) for v in value if str(v).strip()]
    return [str(value)]


def _replace_tags(mem: Memory, memory_id: str, tags: list[str]) -> None:
    with mem.db.transaction():
        mem.db.execute(
            "UPDATE memory_extras SET tags = '' WHERE agent_id = ? AND id = ?",
            (mem.agent_id, memory_id),
        )
        if tags:
            hygiene.set_extras(mem, memory_id, tags, None)


def _apply_skills(
    mem: Memory,
    known: dict[str, str],
    present: set[str],
    changed: set[str],
    folder: Path,
    report: FolderReport,
) -> None:
    """A skill file under another status folder, edited, or deleted: the owner's verdict."""
    exported = {Path(rel).stem: rel for rel in known if rel.startswith("skills/")}
    now_at = {Path(rel).stem: rel for rel in present if rel.startswith("skills/")}
    for name, rel in exported.items():
        where = now_at.get(name)
        status = "rejected" if where is None else Path(where).parent.name
        if where is not None and where == rel and where not in changed:
            continue
        if status not in ("accepted", "rejected", "proposed"):
            raise InvalidInput(f"{where}: put skills under accepted/, rejected/ or proposed/")
        spec = None
        if where is not None:
            try:
                spec = json.loads(_read(folder / where, where))
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{where}: not valid JSON ({exc.msg})") from None
        if status == "proposed":
            continue
        try:
            skills.decide(mem, name, status, spec)
            report.skills.append(f"{name}: {status}")
        except NotFound:
            continue
