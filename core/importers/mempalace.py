"""MemPalace: a palace's drawers (verbatim text filed under a wing and a room).

Two layouts are read:

- **the palace itself** (`~/.mempalace/palace`): ChromaDB's `chroma.sqlite3`, opened read-only;
  each drawer's text is the `chroma:document` entry of `embedding_metadata`, beside its `wing`,
  `room`, `source_file` and `filed_at` (the vectors are not needed);
- **`mempalace export`**: `WING/ROOM.md` files, one `## DRAWER_ID` section per drawer with the
  text as a `> ` block quote and a `| Filed | … |` table row.

A drawer becomes one fact under `WING/ROOM` in the tree, keyed by its drawer id.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

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


def plan_mempalace(path: Path, ctx: PlanContext) -> Plan:
    """The drawers of a palace folder (chroma.sqlite3) or of a `mempalace export` folder."""
    folder = need_folder(path)
    plan = Plan("mempalace")
    database = folder / "chroma.sqlite3"
    if database.is_file():
        for drawer_id, text, meta in _chroma_drawers(database):
            _add(plan, ctx, drawer_id, text, meta.get("wing"), meta.get("room"), meta)
    else:
        for room_file in markdown_files(folder):
            if room_file.name in ("index.md", "overview.md") or room_file.parent == folder:
                continue
            _export_room(plan, ctx, room_file)
    if not plan.items and not plan.skipped:
        raise InvalidInput(f"{path}: no MemPalace drawers (chroma.sqlite3 or WING/ROOM.md)")
    return plan


def _chroma_drawers(database: Path) -> list[tuple[str, str, dict[str, str]]]:
    try:
        con = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise InvalidInput(f"{database}: cannot open ({exc})") from None
    try:
        rows = con.execute(
            "SELECT e.embedding_id, m.key, COALESCE(m.string_value, m.int_value, m.float_value) "
            "FROM embeddings e JOIN embedding_metadata m ON m.id = e.id ORDER BY e.id"
        ).fetchall()
    except sqlite3.Error as exc:
        raise InvalidInput(f"{database}: not a ChromaDB palace ({exc})") from None
    finally:
        con.close()
    drawers: dict[str, dict[str, str]] = {}
    for drawer_id, key, value in rows:
        drawers.setdefault(str(drawer_id), {})[str(key)] = "" if value is None else str(value)
    return [(d, meta.pop("chroma:document", ""), meta) for d, meta in drawers.items()]


def _export_room(plan: Plan, ctx: PlanContext, room_file: Path) -> None:
    try:
        text = read_file_text(room_file)
    except InvalidInput as exc:
        plan.skip(str(exc))
        return
    wing = room_file.parent.name
    sections = _DRAWER.split(text)
    for drawer_id, body in zip(sections[1::2], sections[2::2], strict=True):
        quote = [line[1:].removeprefix(" ") for line in body.splitlines() if line.startswith(">")]
        filed = _FILED.search(body)
        meta = {"filed_at": filed.group(1) if filed else ""}
        _add(plan, ctx, drawer_id, "\n".join(quote), wing, room_file.stem, meta)


def _add(
    plan: Plan,
    ctx: PlanContext,
    drawer_id: str,
    text: str,
    wing: str | None,
    room: str | None,
    meta: dict[str, str],
) -> None:
    text = " ".join(text.split())
    if not text:
        plan.skip(f"drawer {drawer_id}: empty")
        return
    if len(text) > MAX_DRAWER_CHARS:
        plan.skip(f"drawer {drawer_id}: longer than {MAX_DRAWER_CHARS} characters, cut")
        text = text[:MAX_DRAWER_CHARS].rsplit(" ", 1)[0] + " …"
    if distillmod.is_trivial(text, ctx.min_words):
        plan.skip(f"drawer {drawer_id}: trivial ({text[:40]!r})")
        return
    _kind, category, importance = distillmod.classify(text, ctx.projects)
    parts = [distillmod.slug(p) for p in (wing, room) if p and p not in ("unknown", "general")]
    if parts:
        category = "/".join(parts)
    created = timestamp(meta.get("filed_at"))
    plan.items.append(Item("mempalace", drawer_id, text, category, importance, created))
