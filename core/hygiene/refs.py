"""Naming entries: a hot lesson or memory id, or `category:slug` / `slug` (see the package doc),
resolved to the one entry it names."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tiermem.core.errors import InvalidInput, NotFound
from tiermem.core.tree import normalize_path

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

MAX_KEYWORD_FORGET = 1000
_WORD = re.compile(r"[^\W_]+")


def slugify(text: str) -> str:
    """Lower-case words joined by '-': "Two-tier architecture!" → "two-tier-architecture"."""
    return "-".join(_WORD.findall(text.casefold()))


@dataclass(frozen=True)
class Target:
    kind: Literal["memory", "lesson", "forgotten"]
    id: str
    text: str
    category: str


def resolve(mem: Memory, ref: str, *, forgotten: bool = False) -> Target:
    """The one entry `ref` names: a hot lesson id, a memory id, (with `forgotten`) a forgotten
    memory's id, or `category:slug` / `slug` (see the module doc). A slug matching several
    entries is an error listing them."""
    ref = " ".join(ref.split())
    if not ref:
        raise InvalidInput("no entry named: give an id or category:slug")
    state = mem.hot()
    if forgotten:
        row = mem.db.query_one(
            "SELECT data FROM forgotten WHERE agent_id = ? AND id = ?", (mem.agent_id, ref)
        )
        if row is not None:
            data = json.loads(row[0])
            return Target("forgotten", ref, data["text"], data["category"])
    else:
        for lesson in state.critical_lessons:
            if lesson.id == ref:
                return Target("lesson", lesson.id, lesson.text, lesson.category)
        found = mem.memories.get_many([ref])
        if found:
            return Target("memory", found[0].id, found[0].text, found[0].category)
    layer, _, slug_part = ref.rpartition(":")
    layer = normalize_path(layer) if layer.strip() else ""
    slug = slugify(slug_part)
    if not slug:
        raise InvalidInput(f"{ref!r} names no entry: give an id or category:slug")
    matches: list[Target] = []
    if forgotten:
        matches = _forgotten_matching(mem, slug, layer)
    else:
        lessons = [
            x
            for x in state.critical_lessons
            if _in_layer(x.category, layer) and slug in slugify(x.text)
        ]
        sources = {x.source_id for x in lessons}
        matches = [Target("lesson", x.id, x.text, x.category) for x in lessons]
        matches += [
            Target("memory", m_id, text, category)
            for m_id, text, category in memories_matching(mem, slug, layer, limit=50)
            if m_id not in sources
        ]
    what = "forgotten memory" if forgotten else "entry"
    if not matches:
        raise NotFound(f"no {what} matches {ref!r}")
    if len(matches) > 1:
        shown = "; ".join(f"{t.id} {t.text[:40]!r}" for t in matches[:3])
        raise InvalidInput(
            f"{ref!r} matches {len(matches)} entries ({shown}…): name one by its id"
            if len(matches) > 3
            else f"{ref!r} matches {len(matches)} entries ({shown}): name one by its id"
        )
    return matches[0]


def _in_layer(category: str, layer: str) -> bool:
    return not layer or category == layer or category.startswith(layer + "/")


def memories_matching(
    mem: Memory, slug: str, layer: str = "", limit: int = MAX_KEYWORD_FORGET + 1
) -> list[tuple[str, str, str]]:
    """(id, text, category) of memories whose slugified text or category contains `slug`:
    full-text candidates holding all its words, checked as a continuous piece."""
    words = slug.split("-")
    match = " AND ".join('"' + w.replace('"', '""') + '"' for w in words)
    rows = mem.db.query(
        "SELECT m.id, m.text, m.category FROM memories_fts JOIN memories m "
        "ON m.seq = memories_fts.rowid WHERE memories_fts MATCH ? AND memories_fts.rowid "
        "BETWEEN ? << 32 AND (? << 32) + 4294967295 AND m.agent_id = ? LIMIT ?",
        (match, mem.memories.slot, mem.memories.slot, mem.agent_id, 20 * limit),
    )
    out = []
    for memory_id_, text, category in rows:
        if not _in_layer(str(category), layer):
            continue
        if slug in slugify(str(text)) or slug in slugify(str(category)):
            out.append((str(memory_id_), str(text), str(category)))
            if len(out) >= limit:
                break
    return out


def _forgotten_matching(mem: Memory, slug: str, layer: str) -> list[Target]:
    first = slug.split("-")[0]
    rows = mem.db.query(
        "SELECT id, data FROM forgotten WHERE agent_id = ? AND instr(lower(data), ?) > 0",
        (mem.agent_id, first),
    )
    out = []
    for memory_id_, raw in rows:
        data = json.loads(raw)
        if _in_layer(data["category"], layer) and slug in slugify(data["text"]):
            out.append(Target("forgotten", str(memory_id_), data["text"], data["category"]))
    return out
