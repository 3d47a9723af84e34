"""How an answer is judged: pure functions of what the CLI returned and the question's keywords.

- retrieve (current and as-of): a result holding a current keyword is in the top 3, and no result
  holding only stale keywords (superseded, later or planned values) ranks above it. When nothing
  is current yet (`current: []`), the answer passes when no result holds a stale keyword.
- context: the block holds a current keyword, and every line that holds only stale keywords
  comes after it, unless that line says the fact was superseded.
- changes: an expected change is found when one entry's old text holds an old keyword and its
  new text a new keyword (a closed fact, `new: []`, is found by its old text alone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchmarks.current_truth.dataset import Change, first_at, has, is_ack

MARK = "superseded"


def rank_pass(texts: Sequence[str], current: Sequence[str], stale: Sequence[str]) -> bool:
    """Whether the current answer comes first among the results (see the module docstring)."""
    if not current:
        return not any(has(t, tuple(stale)) for t in texts)
    for text in texts:
        if has(text, tuple(current)):
            return True
        if has(text, tuple(stale)):
            return False
    return False


def context_pass(block: str, current: Sequence[str], stale: Sequence[str]) -> bool:
    """Whether the injected block states the current answer before any unmarked stale one."""
    where = first_at(block, tuple(current))
    if where is None:
        return False
    offset = 0
    for line in block.splitlines(keepends=True):
        if offset >= where:
            return True
        stale_only = has(line, tuple(stale)) and not has(line, tuple(current))
        if stale_only and MARK not in line.lower():
            return False
        offset += len(line)
    return True


def entries_of(data: Any) -> list[dict[str, Any]]:
    """The change entries of `tiermem changes --json`: a list, or {"changes": [...]}."""
    if isinstance(data, dict):
        data = data.get("changes", [])
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _text(side: Any) -> str:
    return str(side.get("text", "")) if isinstance(side, dict) else ""


def change_matches(entry: dict[str, Any], change: Change) -> bool:
    """Whether one listed change is the expected one."""
    if not has(_text(entry.get("old")), change.old):
        return False
    return not change.new or has(_text(entry.get("new")), change.new)


def changes_found(entries: Sequence[dict[str, Any]], expected: Sequence[Change]) -> int:
    """How many of the expected changes the listing holds."""
    return sum(any(change_matches(e, c) for e in entries) for c in expected)


def spurious_changes(entries: Sequence[dict[str, Any]], not_expected: Sequence[str]) -> int:
    """Listed changes whose new side is something that never became true (a plan, a what-if)."""
    return sum(
        bool(not_expected) and has(_text(e.get("new")), tuple(not_expected)) for e in entries
    )


def acks_stored(memories: Sequence[str], acks: Sequence[str]) -> list[str]:
    """The stored texts that repeat one of the assistant's acknowledgements."""
    return [m for m in memories if is_ack(m, tuple(acks))]
