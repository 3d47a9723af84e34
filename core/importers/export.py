"""The way out: a Basic Memory project folder (mem0's JSON is `mem0.export_mem0`).

One note per category (`projects/evoclaw` → `projects/evoclaw.md`), with Basic Memory's front
matter (plus `tiermem_category`, the category itself) and one observation per memory
(`- [evoclaw] text #tag …`), plus `hot-memory.md` (`type: tiermem-hot`) holding MEMORY.md.
Basic Memory indexes such a folder as a project (`basic-memory project add`); `import --from
basic-memory` reads it back as it was written (no title prefix, the category, tags, hot
memory).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.core import interchange
from tiermem.core.errors import InvalidInput
from tiermem.core.files import replace_text

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

CATEGORY_FIELD = "tiermem_category"
"""Front matter of a note tiermem wrote: the category its observations belong to."""
HOT_NOTE = "tiermem-hot"
"""The `type` of the note holding hot memory (MEMORY.md)."""


def export_basic_memory(mem: Memory, folder: Path) -> list[Path]:
    """Write the notes into `folder` (created if needed); the files written."""
    if folder.exists() and not folder.is_dir():
        raise InvalidInput(f"{folder}: exists and is not a folder")
    by_category: dict[str, list[str]] = defaultdict(list)
    for m, record in interchange.export_records(mem):
        tags = " ".join(f"#{tag_word(t)}" for t in record["tags"])
        label = m.category.rsplit("/", 1)[-1]
        by_category[m.category].append(f"- [{label}] {' '.join(m.text.split())} {tags}".rstrip())
    hot = _note("Hot memory", "hot", {"type": HOT_NOTE}, mem.memory_md())
    written = [_write(folder / "hot-memory.md", hot)]
    for category, lines in sorted(by_category.items()):
        title = category.rsplit("/", 1)[-1]
        body = f"# {title}\n\n## Observations\n" + "\n".join(lines) + "\n"
        fields = {"type": "note", CATEGORY_FIELD: category}
        written.append(_write(folder / f"{category}.md", _note(title, category, fields, body)))
    return written


def tag_word(tag: str) -> str:
    """A tag as a Basic Memory `#tag`: one word (spaces and other signs become hyphens)."""
    return re.sub(r"[^\w-]+", "-", tag).strip("-") or "tag"


def _note(title: str, category: str, fields: dict[str, str], body: str) -> str:
    permalink = category.replace("/", "-")
    head = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return f"---\ntitle: {title}\n{head}tags: [tiermem]\npermalink: {permalink}\n---\n\n{body}"


def _write(path: Path, text: str) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, text)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot write ({exc.strerror})") from None
    return path
