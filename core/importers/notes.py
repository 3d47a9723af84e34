"""Markdown memory tools: an OpenClaw (EvoClaw) workspace and a Basic Memory project.

- **openclaw**: the workspace folder with `MEMORY.md` (long-term memory) and `memory/YYYY-MM-DD.md`
  daily notes; every meaningful line becomes a fact the way `ingest-daily` reads notes (a daily
  note's facts are dated at its day).
- **basic-memory**: a project folder of notes, each with YAML front matter (`title`, `type`,
  `tags`, `permalink`), free text, observations `- [category] content #tag (context)` and
  relations `- relation_type [[Target]]`. Each observation becomes a fact prefixed by the note's
  title, each relation the fact "Title relation_type Target"; free text lines are read like
  note lines. A note's folder becomes its category (`projects/auth.md` → `projects`); an
  observation whose category names a fact kind (decision, preference, lesson, task…) goes where
  distillation files that kind. A note tiermem wrote (`tiermem_category` in its front matter)
  is read back as written: its category, each observation's text and `#tags`; its
  `hot-memory.md` becomes hot memory.
"""

from __future__ import annotations

import re
from pathlib import Path

from tiermem.core import distill as distillmod
from tiermem.core.errors import InvalidInput
from tiermem.core.importers.base import Item, Plan, markdown_files, need_folder, read_file_text
from tiermem.core.importers.context import PlanContext
from tiermem.core.importers.export import CATEGORY_FIELD, HOT_NOTE
from tiermem.core.importers.own import hot_from_markdown
from tiermem.core.ingest import item_key, note_date, note_items, note_time

_OBSERVATION = re.compile(r"^\s*[-*]\s+\[([^\]\n]+)\]\s+(.+?)\s*$")
_RELATION = re.compile(r"^\s*[-*]\s+([\w-]+)\s+\[\[([^\]\n]+)\]\]\s*(?:\((.*)\))?\s*$")
_TAG = re.compile(r"(?:^|\s)#[\w-]+")
_KIND_ALIASES = {
    "decision": "decision",
    "decisions": "decision",
    "preference": "preference",
    "preferences": "preference",
    "lesson": "lesson",
    "learning": "lesson",
    "insight": "lesson",
    "todo": "task",
    "task": "task",
    "action": "task",
    "person": "person",
    "event": "event",
    "status": "event",
    "technique": "technical",
    "tech": "technical",
    "method": "technical",
}


def plan_openclaw(path: Path, ctx: PlanContext) -> Plan:
    """MEMORY.md and memory/YYYY-MM-DD.md of a workspace (or a `memory/` folder itself)."""
    folder = need_folder(path)
    plan = Plan("openclaw")
    notes = sorted((folder / "memory").glob("*.md")) if (folder / "memory").is_dir() else []
    if not notes and not (folder / "MEMORY.md").exists():
        notes = sorted(folder.glob("*.md"))
    if (folder / "MEMORY.md").is_file():
        _add_note(plan, folder / "MEMORY.md", "openclaw:MEMORY.md", None, ctx)
    for note in notes:
        day = note_date(note.name)
        if day is None:
            if note.name != "MEMORY.md":
                plan.skip(f"{note.name}: not a daily note (YYYY-MM-DD.md)")
            continue
        _add_note(plan, note, f"openclaw:memory/{note.name}", note_time(day, ctx.now), ctx)
    if not plan.items and not plan.skipped:
        raise InvalidInput(f"{path}: no MEMORY.md or memory/YYYY-MM-DD.md notes found")
    return plan


def _add_note(plan: Plan, path: Path, source: str, created: float | None, ctx: PlanContext) -> None:
    try:
        text = read_file_text(path)
    except InvalidInput as exc:
        plan.skip(str(exc))
        return
    items, warnings = note_items(
        text, created_at=created, source=source, projects=ctx.projects, min_words=ctx.min_words
    )
    plan.skipped += [f"{path.name} {w}" for w in warnings]
    for item in items:
        plan.items.append(
            Item(
                source=source,
                key=item.key,
                text=item.fact.text,
                category=item.fact.category,
                importance=item.fact.importance,
                created_at=created,
            )
        )


# -- Basic Memory -------------------------------------------------------------------------------


def plan_basic_memory(path: Path, ctx: PlanContext) -> Plan:
    """Every note of a Basic Memory project folder (observations, relations, text lines)."""
    folder = need_folder(path)
    plan = Plan("basic-memory")
    for note in markdown_files(folder):
        relative = note.relative_to(folder)
        try:
            text = read_file_text(note)
        except InvalidInput as exc:
            plan.skip(str(exc))
            continue
        _basic_note(plan, relative, text, ctx)
    if not plan.items and not plan.skipped:
        raise InvalidInput(f"{path}: no Basic Memory notes (*.md) found")
    return plan


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """The simple `key: value` front matter of a note and the body after it."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            fields = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep and not line.startswith((" ", "\t", "-")):
                    fields[key.strip()] = value.strip().strip("'\"")
            return fields, "\n".join(lines[end + 1 :])
    return {}, text


def _basic_note(plan: Plan, relative: Path, text: str, ctx: PlanContext) -> None:
    fields, body = front_matter(text)
    if fields.get("type") == HOT_NOTE:
        plan.hot = hot_from_markdown(body, ctx.now)
        return
    if fields.get(CATEGORY_FIELD):
        _tiermem_note(plan, relative, fields[CATEGORY_FIELD], body)
        return
    title = fields.get("title") or relative.stem
    source = f"basic-memory:{relative.as_posix()}"
    folder = "/".join(distillmod.slug(p) for p in relative.parent.parts)
    rest = []
    for line in body.splitlines():
        observation = _OBSERVATION.match(line)
        relation = _RELATION.match(line)
        if observation and observation.group(1).strip().casefold() not in ("x", ""):
            _observation(plan, source, title, folder, observation, ctx)
        elif relation:
            kind, target = relation.group(1), relation.group(2)
            fact = f"{title} {kind.replace('_', ' ')} {target}"
            plan.items.append(Item(source, item_key(fact), fact, folder or "notes", 0.5))
        elif not line.strip().casefold().startswith(f"# {title.casefold()}"):
            rest.append(line)
    items, warnings = note_items(
        "\n".join(rest),
        created_at=None,
        source=source,
        projects=ctx.projects,
        min_words=ctx.min_words,
    )
    plan.skipped += [f"{relative} {w}" for w in warnings]
    for item in items:
        category = folder if folder and item.kind == "note" else item.fact.category
        plan.items.append(
            Item(source, item.key, item.fact.text, category, item.fact.importance, None)
        )


def _tiermem_note(plan: Plan, relative: Path, category: str, body: str) -> None:
    """A note `export --format basic-memory` wrote: each observation is one memory as it was
    (its text, the note's category, its trailing `#tags`)."""
    source = f"basic-memory:{relative.as_posix()}"
    for line in body.splitlines():
        observation = _OBSERVATION.match(line)
        if observation is None:
            continue
        words = observation.group(2).split()
        tags: list[str] = []
        while len(words) > 1 and _TAG.fullmatch(words[-1]):
            tags.insert(0, words.pop()[1:])
        text = " ".join(words)
        plan.items.append(Item(source, item_key(text), text, category, tags=tuple(tags)))


def _observation(
    plan: Plan, source: str, title: str, folder: str, match: re.Match[str], ctx: PlanContext
) -> None:
    label = match.group(1).strip().casefold()
    content = " ".join(_TAG.sub(" ", match.group(2)).split())
    if distillmod.is_trivial(content, ctx.min_words):
        plan.skip(f"{source.split(':', 1)[1]}: trivial observation [{label}] {content!r}")
        return
    fact = f"{title}: {content}"
    kind, category, importance = distillmod.classify(fact, ctx.projects)
    if label in _KIND_ALIASES:
        kind = _KIND_ALIASES[label]
        category = distillmod.CATEGORY[kind]
        importance = distillmod.IMPORTANCE[kind]
    elif folder and kind in ("note", "technical"):
        category = folder
    plan.items.append(Item(source, item_key(fact), fact, category, importance, None))
