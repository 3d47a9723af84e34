"""MemPalace: a palace's drawers (verbatim text filed under a wing and a room).

Two layouts are read:

- **the palace itself** (`~/.mempalace/palace`): ChromaDB's `chroma.sqlite3`, opened read-only;
  each drawer's text is the `chroma:document` entry of `embedding_metadata`, beside its `wing`,
  `room`, `source_file` and `filed_at` (the vectors are not needed). Only the
  `mempalace_drawers` collection holds memories: the `mempalace_closets` entries are the
  palace's index (pointers to drawers) and are skipped;
- **an exported palace** (`mempalace.exporter.export_palace`; MemPalace 3.11 has no `export`
  command): `WING/ROOM.md` files, one `## DRAWER_ID` section per drawer with the text as a
  `> ` block quote and `| Source | … |`, `| Filed | … |` table rows.

A drawer becomes one fact under `WING/ROOM` in the tree, keyed by its drawer id, dated when
it was filed, its source file among its paths; a markdown heading becomes a lead-in
(`# Car` → `Car: …`).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from tiermem.core import distill as distillmod
from tiermem.core.errors import InvalidInput
from tiermem.core.importers.base import (
    Item,
    Plan,
    markdown_files,
    need_folder,
    read_file_text,
    timestamp,
)
from tiermem.core.importers.context import PlanContext

MAX_DRAWER_CHARS = 8000
_DRAWER = re.compile(r"^## (\S+)\s*$", re.M)
_FILED = re.compile(r"^\|\s*Filed\s*\|\s*(.*?)\s*\|\s*$", re.M)
_SOURCE = re.compile(r"^\|\s*Source\s*\|\s*(.*?)\s*\|\s*$", re.M)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
DRAWERS = "mempalace_drawers"
"""The collection holding the drawers (`mempalace_closets` is the palace's index of them)."""


def plan_mempalace(path: Path, ctx: PlanContext) -> Plan:
    """The drawers of a palace folder (chroma.sqlite3) or of an exported folder."""
    folder = need_folder(path)
    plan = Plan("mempalace")
    database = folder / "chroma.sqlite3"
    if database.is_file():
        for drawer_id, text, meta in _chroma_drawers(database, plan):
            _add(plan, ctx, drawer_id, text, meta)
    else:
        for room_file in markdown_files(folder):
            if room_file.name in ("index.md", "overview.md") or room_file.parent == folder:
                continue
            _export_room(plan, ctx, room_file)
    if not plan.items and not plan.skipped:
        raise InvalidInput(f"{path}: no MemPalace drawers (chroma.sqlite3 or WING/ROOM.md)")
    return plan


def _chroma_drawers(database: Path, plan: Plan) -> list[tuple[str, str, dict[str, str]]]:
    """Every drawer's text and metadata; a closet (MemPalace's own index) is skipped."""
    rows = _chroma_rows(database)
    entries: dict[str, dict[str, str]] = {}
    collections: dict[str, str] = {}
    for entry_id, key, value, collection in rows:
        entries.setdefault(str(entry_id), {})[str(key)] = "" if value is None else str(value)
        collections[str(entry_id)] = str(collection or "")
    drawers = []
    for entry_id, meta in entries.items():
        collection = collections[entry_id]
        if collection != DRAWERS and (collection or entry_id.startswith("closet_")):
            plan.skip(f"{entry_id}: {collection or 'closet'} entry, MemPalace's index of drawers")
            continue
        drawers.append((entry_id, meta.pop("chroma:document", ""), meta))
    return drawers


def _chroma_rows(database: Path) -> list[tuple[Any, ...]]:
    """(entry id, metadata key, value, collection name) of every embedding, read-only."""
    try:
        con = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InvalidInput(f"{database}: cannot open ({exc})") from None
    value = "COALESCE(m.string_value, m.int_value, m.float_value)"
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if {"segments", "collections"} <= tables:
            sql = (
                f"SELECT e.embedding_id, m.key, {value}, c.name FROM embeddings e "
                "JOIN embedding_metadata m ON m.id = e.id "
                "LEFT JOIN segments s ON s.id = e.segment_id "
                "LEFT JOIN collections c ON c.id = s.collection ORDER BY e.id"
            )
        else:
            sql = (
                f"SELECT e.embedding_id, m.key, {value}, NULL FROM embeddings e "
                "JOIN embedding_metadata m ON m.id = e.id ORDER BY e.id"
            )
        return con.execute(sql).fetchall()
    except sqlite3.Error as exc:
        raise InvalidInput(f"{database}: not a ChromaDB palace ({exc})") from None
    finally:
        con.close()


def _export_room(plan: Plan, ctx: PlanContext, room_file: Path) -> None:
    try:
        text = read_file_text(room_file)
    except InvalidInput as exc:
        plan.skip(str(exc))
        return
    sections = _DRAWER.split(text)
    for drawer_id, body in zip(sections[1::2], sections[2::2], strict=True):
        quote = [line[1:].removeprefix(" ") for line in body.splitlines() if line.startswith(">")]
        meta = {"wing": room_file.parent.name, "room": room_file.stem}
        for key, pattern in (("filed_at", _FILED), ("source_file", _SOURCE)):
            found = pattern.search(body)
            if found:
                meta[key] = found.group(1)
        _add(plan, ctx, drawer_id, "\n".join(quote), meta)


def drawer_text(raw: str) -> str:
    """A drawer's markdown as one fact: a heading becomes a lead-in (`# Car` → `Car:`)."""
    lines = []
    for line in raw.splitlines():
        heading = _HEADING.match(line)
        lines.append(f"{heading.group(1).rstrip(':')}:" if heading else line)
    return " ".join(" ".join(lines).split())


def _add(plan: Plan, ctx: PlanContext, drawer_id: str, raw: str, meta: dict[str, str]) -> None:
    text = drawer_text(raw)
    if not text or (text.endswith(":") and ":" not in text[:-1]):
        plan.skip(f"drawer {drawer_id}: empty")
        return
    if len(text) > MAX_DRAWER_CHARS:
        plan.skip(f"drawer {drawer_id}: longer than {MAX_DRAWER_CHARS} characters, cut")
        text = text[:MAX_DRAWER_CHARS].rsplit(" ", 1)[0] + " …"
    if distillmod.is_trivial(text, ctx.min_words):
        plan.skip(f"drawer {drawer_id}: trivial ({text[:40]!r})")
        return
    _kind, category, importance = distillmod.classify(text, ctx.projects)
    wing, room = meta.get("wing"), meta.get("room")
    parts = [distillmod.slug(p) for p in (wing, room) if p and p not in ("unknown", "general")]
    if parts:
        category = "/".join(parts)
    created = timestamp(meta.get("filed_at"))
    paths = (meta["source_file"],) if meta.get("source_file") else ()
    plan.items.append(
        Item("mempalace", drawer_id, text, category, importance, created, paths=paths)
    )
