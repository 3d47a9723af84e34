"""The way out: a Basic Memory project folder (mem0's JSON is `mem0.export_mem0`).

One note per category (`projects/evoclaw` → `projects/evoclaw.md`), with Basic Memory's front
matter and one observation per memory (`- [tier] text #category`), plus `hot-memory.md` holding
MEMORY.md. Basic Memory indexes such a folder as a project (`basic-memory project add`).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.core.errors import InvalidInput
from tiermem.core.files import replace_text

if TYPE_CHECKING:
    from tiermem.core.engine import Memory


def export_basic_memory(mem: Memory, folder: Path) -> list[Path]:
    """Write the notes into `folder` (created if needed); the files written."""
    if folder.exists() and not folder.is_dir():
        raise InvalidInput(f"{folder}: exists and is not a folder")
    by_category: dict[str, list[str]] = defaultdict(list)
    for chunk in mem.memories.iter_all():
        for m in chunk:
            tag = m.category.replace("/", "-")
            by_category[m.category].append(f"- [{m.tier}] {' '.join(m.text.split())} #{tag}")
    written = [_write(folder / "hot-memory.md", _note("Hot memory", "hot", mem.memory_md()))]
    for category, lines in sorted(by_category.items()):
        title = category.rsplit("/", 1)[-1]
        body = f"# {title}\n\n## Observations\n" + "\n".join(lines) + "\n"
        written.append(_write(folder / f"{category}.md", _note(title, category, body)))
    return written


def _note(title: str, category: str, body: str) -> str:
    permalink = category.replace("/", "-")
    return (
        f"---\ntitle: {title}\ntype: note\ntags: [tiermem]\npermalink: {permalink}\n---\n\n{body}"
    )


def _write(path: Path, text: str) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_text(path, text)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot write ({exc.strerror})") from None
    return path
