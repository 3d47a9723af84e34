"""What every importer hands back: facts keyed for idempotence, conversations, what was skipped.

An importer only reads; `apply_facts` and `apply_conversations` (in `__init__`) write. A fact's
`source` groups it (one file, one export) and its `key` names it inside the group: an item already
recorded under the same source and key is never stored again, so importing twice adds nothing.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.core.errors import InvalidInput
from tiermem.core.transcript import Message, decode_text

if TYPE_CHECKING:
    from tiermem.core.hot import HotState

MAX_FILE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Item:
    """One fact to import: `source` groups it, `key` identifies it within the source."""

    source: str
    key: str
    text: str
    category: str
    importance: float = 0.5
    created_at: float | None = None
    urls: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    expires_at: float | None = None
    links: tuple[str, ...] = ()
    """Keys of the items of the same source this one is linked to (`related_to`)."""
    state: dict[str, Any] = field(default_factory=dict, hash=False)
    """`MemoryRow` fields a tiermem export carries (tier, pin, dates, supersession, reads),
    restored after the store; `superseded_by` names the successor's key."""


@dataclass(frozen=True)
class Conversation:
    """One chat to run through conversation-end, dated by its own time."""

    id: str
    title: str
    started_at: float | None
    messages: tuple[Message, ...]


@dataclass
class Plan:
    """What an import would do: the facts, the conversations and what was skipped (and why)."""

    format: str
    items: list[Item] = field(default_factory=list)
    conversations: list[Conversation] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    hot: HotState | None = None
    """Hot memory the source carries, merged into the agent's."""
    tree: list[tuple[str, str]] = field(default_factory=list)
    """Tree nodes (path, description) the source carries, shallowest first."""

    def skip(self, what: str) -> None:
        self.skipped.append(what)


def read_file_text(path: Path) -> str:
    """A file's checked text; a clear InvalidInput when it is unreadable or not text."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read ({exc.strerror})") from None
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInput(f"{path}: larger than {MAX_FILE_BYTES // 2**20} MB")
    return decode_text(str(path), data)


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(read_file_text(path))
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None


def markdown_files(folder: Path) -> Iterator[Path]:
    """Every `.md` file under a folder, in a stable order, hidden folders left out."""
    for path in sorted(folder.rglob("*.md")):
        parts = path.relative_to(folder).parts
        if not any(part.startswith(".") for part in parts):
            yield path


def timestamp(value: Any) -> float | None:
    """Epoch seconds from an epoch number, a numeric string (Slack's `ts`) or an ISO 8601 date."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def need_folder(path: Path) -> Path:
    if not path.is_dir():
        raise InvalidInput(f"{path}: not a folder")
    return path


def need_exists(path: Path) -> Path:
    if not path.exists():
        raise InvalidInput(f"{path}: no such file or folder")
    return path
