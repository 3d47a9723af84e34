"""Daily-note ingestion (seed v2.2): `memory/YYYY-MM-DD.md` → warm facts, idempotently.

Each non-trivial line of a note (a bullet, a checkbox, a paragraph line) becomes one fact, dated
at the note's day (noon UTC, never later than now). A `## Heading` that is a topic rather than a
generic section ("Decisions", "Tasks", "Notes"…) prefixes its lines ("BSC integration: switched
to raw JSON-RPC"), and a heading naming a hot project files them under `projects/<name>`.

What was ingested is recorded per note (`ingest_sources`: the file's digest; `ingest_items`: each
line's key → the memory it became), so:

- an unchanged note is skipped without being parsed;
- an edited note adds its new lines and forgets the memories of lines that are gone (only a
  memory that line created and no other line still uses; forgotten memories can be restored
  with the curation undo) — a deleted line is never brought back by a later run;
- a deleted note file changes nothing: its knowledge stays in memory;
- a binary, non-UTF-8 or empty note is a per-file error or warning, the other notes go on.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.core import curate
from tiermem.core import distill as distillmod
from tiermem.core import metadata as meta
from tiermem.core.errors import InvalidInput, TiermemError
from tiermem.core.memory_md import MemoryMdReport, read_back
from tiermem.core.paths import DEFAULT_AGENT
from tiermem.core.transcript import decode_text
from tiermem.core.warm import NewFact, normalize_text

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

DAILY_NAME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.md$")
MAX_NOTE_BYTES = 16 * 1024 * 1024
MAX_LINE_CHARS = 4000
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_CHECKBOX = re.compile(r"^\[([ xX])\]\s+")
_FENCE_OPEN = re.compile(r"^\s*(```|~~~)")
SECTIONS = {
    "decision": "decision",
    "decisions": "decision",
    "lesson": "lesson",
    "lessons": "lesson",
    "lessons learned": "lesson",
    "learned": "lesson",
    "learnings": "lesson",
    "task": "task",
    "tasks": "task",
    "todo": "task",
    "todos": "task",
    "to do": "task",
    "next": "task",
    "next steps": "task",
    "action items": "task",
    "tomorrow": "task",
    "events": "event",
    "done": "event",
    "log": "event",
    "timeline": "event",
    "people": "person",
    "preferences": "preference",
}
GENERIC_HEADINGS = {"notes", "note", "misc", "other", "summary", "today", "journal", "daily"}


@dataclass(frozen=True)
class NoteItem:
    key: str
    line: int
    fact: NewFact
    kind: str


@dataclass
class FileReport:
    name: str
    status: str
    """ingested (first time), updated, unchanged, skipped, error."""
    added: int = 0
    merged: int = 0
    """New lines whose fact was already known (exact or near duplicate): reinforced."""
    forgotten: int = 0
    lines: int = 0
    message: str = ""


@dataclass
class IngestReport:
    folder: Path
    files: list[FileReport] = field(default_factory=list)
    ignored: int = 0
    """Files in the folder whose name is not YYYY-MM-DD.md."""
    memory_md: MemoryMdReport | None = None

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def errors(self) -> list[FileReport]:
        return [f for f in self.files if f.status == "error"]


# -- bookkeeping shared with conversation-end ---------------------------------------------------


def source_digest(mem: Memory, source: str) -> str | None:
    value = mem.db.scalar(
        "SELECT digest FROM ingest_sources WHERE agent_id = ? AND source = ?",
        (mem.agent_id, source),
    )
    return None if value is None else str(value)


def record_source(mem: Memory, source: str, digest: str) -> None:
    mem.db.execute(
        "INSERT INTO ingest_sources (agent_id, source, digest, ingested_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (agent_id, source) DO UPDATE SET digest = excluded.digest, "
        "ingested_at = excluded.ingested_at",
        (mem.agent_id, source, digest, mem.now()),
    )


def source_items(mem: Memory, source: str) -> dict[str, tuple[str, bool]]:
    """item key → (memory id, whether the item created that memory)."""
    rows = mem.db.query(
        "SELECT item, memory_id, created FROM ingest_items WHERE agent_id = ? AND source = ?",
        (mem.agent_id, source),
    )
    return {r[0]: (r[1], bool(r[2])) for r in rows}


def record_items(mem: Memory, source: str, items: Sequence[tuple[str, str, bool]]) -> None:
    mem.db.executemany(
        "INSERT INTO ingest_items (agent_id, source, item, memory_id, created) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (agent_id, source, item) DO UPDATE SET "
        "memory_id = excluded.memory_id, created = excluded.created",
        [(mem.agent_id, source, key, mid, int(created)) for key, mid, created in items],
    )


def item_key(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode()).hexdigest()[:24]


# -- parsing ------------------------------------------------------------------------------------


def note_items(
    text: str,
    *,
    created_at: float | None,
    source: str,
    projects: Sequence[str] = (),
    min_words: int = 3,
) -> tuple[list[NoteItem], list[str]]:
    """The facts of a markdown note, one per meaningful line; (items, warnings)."""
    items: list[NoteItem] = []
    warnings: list[str] = []
    keys: set[str] = set()
    section = ""
    topic = ""
    project = ""
    fence: str | None = None
    lines = text.splitlines()
    start = _front_matter_end(lines)
    for number, raw in enumerate(lines[start:], start + 1):
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
            elif items:
                _attach_command(items, raw)
            continue
        opened = _FENCE_OPEN.match(raw)
        if opened:
            fence = opened.group(1)
            continue
        heading = _HEADING.match(raw)
        if heading:
            level, title = len(heading.group(1)), heading.group(2).strip()
            if level >= 2:
                section, topic, project = _heading_context(title, projects)
            continue
        line = raw.strip()
        if not line or line in ("---", "***") or line.startswith("<!--"):
            continue
        line = _ITEM.sub("", line)
        kind = section
        box = _CHECKBOX.match(line)
        if box:
            line = line[box.end() :]
            if box.group(1) == " ":
                kind = "task"
            else:
                kind, line = "event", f"Done: {line}"
        line = " ".join(line.split())
        if distillmod.is_trivial(line, min_words):
            continue
        if len(line) > MAX_LINE_CHARS:
            warnings.append(f"line {number}: longer than {MAX_LINE_CHARS} characters, cut")
            line = line[:MAX_LINE_CHARS].rsplit(" ", 1)[0] + " …"
        fact_text = f"{topic}: {line}" if topic else line
        found_kind, category, importance = distillmod.classify(fact_text, projects)
        if kind and kind != found_kind:
            category = distillmod.CATEGORY[kind]
            importance = distillmod.IMPORTANCE[kind]
        kind = kind or found_kind
        if project and kind not in ("lesson", "preference", "person"):
            category = f"projects/{distillmod.slug(project)}"
        key = item_key(fact_text)
        if key in keys:
            continue
        keys.add(key)
        try:
            fact = NewFact(
                text=fact_text,
                category=category,
                importance=importance,
                source=source,
                created_at=created_at,
            )
        except InvalidInput as exc:
            warnings.append(f"line {number}: skipped ({exc})")
            continue
        items.append(NoteItem(key=key, line=number, fact=fact, kind=kind))
    return items, warnings


def _front_matter_end(lines: list[str]) -> int:
    if lines and lines[0].strip() == "---":
        for i, line in enumerate(lines[1:50], 1):
            if line.strip() == "---":
                return i + 1
    return 0


def _heading_context(title: str, projects: Sequence[str]) -> tuple[str, str, str]:
    """(section kind, topic prefix, project) for the lines under a heading."""
    plain = " ".join(re.sub(r"[*_`#:]+", " ", title).split())
    lowered = plain.casefold()
    for name in projects:
        if name and name.casefold() == lowered:
            return "", "", name
    if lowered in SECTIONS:
        return SECTIONS[lowered], "", ""
    if lowered in GENERIC_HEADINGS or DAILY_NAME.match(lowered + ".md") or not plain:
        return "", "", ""
    return "", plain[:80], ""


def _attach_command(items: list[NoteItem], line: str) -> None:
    """A shell line inside a code block belongs to the fact written just before the block."""
    command = line.strip().removeprefix("$ ").strip()
    if not command or command.startswith("#") or not meta.looks_like_command(command):
        return
    last = items[-1]
    if command in last.fact.commands or len(last.fact.commands) >= 50:
        return
    fact = NewFact(
        text=last.fact.text,
        category=last.fact.category,
        importance=last.fact.importance,
        commands=(*last.fact.commands, command),
        source=last.fact.source,
        created_at=last.fact.created_at,
    )
    items[-1] = NoteItem(last.key, last.line, fact, last.kind)


def note_date(name: str) -> dt.date | None:
    match = DAILY_NAME.match(name)
    if not match:
        return None
    try:
        return dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return None


def note_time(day: dt.date, now: float) -> float:
    """Noon UTC of the note's day, never in the future."""
    noon = calendar.timegm((day.year, day.month, day.day, 12, 0, 0))
    return float(min(noon, now))


# -- ingestion ----------------------------------------------------------------------------------


def daily_dir(mem: Memory) -> Path:
    """`[ingest] daily_dir` (relative to the home), else `memory/` in the home (and
    `memory/<agent>/` for agents other than the default, as in the original layout)."""
    configured = mem.cfg.ingest.daily_dir.strip()
    if configured:
        folder = Path(configured).expanduser()
        return folder if folder.is_absolute() else mem.home.root / folder
    base = mem.home.root / "memory"
    return base if mem.agent_id == DEFAULT_AGENT else base / mem.agent_id


def ingest_daily(
    mem: Memory, folder: Path | None = None, *, memory_md: bool = True
) -> IngestReport:
    """Ingest every `YYYY-MM-DD.md` of `folder` (default: `daily_dir`), then read back hand
    edits of MEMORY.md. A missing default folder is simply nothing to ingest."""
    mem.require_memory()
    target = folder if folder is not None else daily_dir(mem)
    report = IngestReport(folder=target)
    if folder is not None and not folder.is_dir():
        raise InvalidInput(f"{folder} is not a folder")
    if target.is_dir():
        try:
            entries = sorted(target.iterdir())
        except OSError as exc:
            raise InvalidInput(f"{target}: cannot list ({exc.strerror})") from None
        for path in entries:
            if not DAILY_NAME.match(path.name) or not path.is_file():
                report.ignored += path.is_file()
                continue
            report.files.append(ingest_note(mem, path))
    if memory_md:
        report.memory_md = read_back(mem)
    return report


def read_note(path: Path) -> bytes:
    """A note's bytes (at most one byte over the size limit); raises OSError."""
    with path.open("rb") as handle:
        return handle.read(MAX_NOTE_BYTES + 1)


def ingest_note(mem: Memory, path: Path, data: bytes | None = None) -> FileReport:
    """Ingest one daily note (its `data` if already read); every failure is this file's
    report, never an exception."""
    name = path.name
    day = note_date(name)
    if day is None:
        return FileReport(name, "skipped", message="not a daily note (YYYY-MM-DD.md)")
    if data is None:
        try:
            data = read_note(path)
        except OSError as exc:
            return FileReport(name, "error", message=f"cannot read ({exc.strerror})")
    if len(data) > MAX_NOTE_BYTES:
        return FileReport(name, "error", message=f"larger than {MAX_NOTE_BYTES // 2**20} MB")
    if not data.strip():
        return FileReport(name, "skipped", message="empty (its memories are kept)")
    try:
        text = decode_text(name, data)
    except InvalidInput as exc:
        return FileReport(name, "error", message=str(exc).removeprefix(f"{name}: "))
    source = f"daily/{name}"
    digest = hashlib.sha256(data).hexdigest()
    try:
        return _ingest_text(mem, source, name, digest, text, day)
    except TiermemError as exc:
        return FileReport(name, "error", message=str(exc))


def _ingest_text(
    mem: Memory, source: str, name: str, digest: str, text: str, day: dt.date
) -> FileReport:
    known_digest = source_digest(mem, source)
    if known_digest == digest:
        return FileReport(name, "unchanged")
    projects = [p.name for p in mem.hot().active_context.projects]
    items, warnings = note_items(
        text,
        created_at=note_time(day, mem.now()),
        source=source,
        projects=projects,
        min_words=mem.cfg.distill.min_words,
    )
    report = FileReport(name, "ingested" if known_digest is None else "updated", lines=len(items))
    report.message = "; ".join(warnings[:5])
    with mem.db.transaction():
        previous = source_items(mem, source)
        current = {item.key for item in items}
        gone = {key: value for key, value in previous.items() if key not in current}
        if gone:
            mem.db.executemany(
                "DELETE FROM ingest_items WHERE agent_id = ? AND source = ? AND item = ?",
                [(mem.agent_id, source, key) for key in gone],
            )
            for memory_id_, created in gone.values():
                gone_for_good = created and not _still_used(mem, memory_id_)
                if gone_for_good and mem.memories.get_many([memory_id_]):
                    curate.move_to_forgotten(mem, memory_id_)
                    report.forgotten += 1
        new = [item for item in items if item.key not in previous]
        outcomes = mem.store_many([item.fact for item in new])
        record_items(
            mem, source, [(i.key, o.id, o.created) for i, o in zip(new, outcomes, strict=True)]
        )
        report.added = sum(o.created for o in outcomes)
        report.merged = len(outcomes) - report.added
        record_source(mem, source, digest)
    return report


def _still_used(mem: Memory, memory_id_: str) -> bool:
    return (
        mem.db.scalar(
            "SELECT 1 FROM ingest_items WHERE agent_id = ? AND memory_id = ? LIMIT 1",
            (mem.agent_id, memory_id_),
        )
        is not None
    )
