"""Directive tags in a transcript (`[[pin:…]]`, `[[forget:…]]`, `[[memory_health]]`, …): finding,
stripping and acting on them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tiermem.core.errors import InvalidInput, LimitExceeded, NotFound
from tiermem.core.hygiene.actions import (
    demote_from_hot,
    forget_entry,
    forget_keyword,
    pin,
    promote_to_hot,
    restore,
)
from tiermem.core.hygiene.health import health
from tiermem.core.hygiene.moves import HygieneReport

if TYPE_CHECKING:
    from tiermem.core.engine import Memory

TAG = re.compile(
    r"\[\[\s*(pin|unpin|promote|demote|forget keyword|forget|restore)\s*:\s*([^\]\n]+?)\s*\]\]"
    r"|\[\[\s*(memory_health)\s*\]\]",
    re.I,
)


@dataclass(frozen=True)
class Tag:
    action: str
    """pin, unpin, promote, demote, forget, forget keyword, restore or memory_health."""
    argument: str

    @property
    def text(self) -> str:
        return f"[[{self.action}:{self.argument}]]" if self.argument else f"[[{self.action}]]"


def find_tags(text: str) -> list[Tag]:
    tags = []
    for match in TAG.finditer(text):
        if match.group(3):
            tags.append(Tag("memory_health", ""))
        else:
            action = " ".join(match.group(1).casefold().split())
            tags.append(Tag(action, match.group(2).strip()))
    return tags


def strip_tags(text: str) -> str:
    return re.sub(r"[ \t]{2,}", " ", TAG.sub("", text)).strip()


def apply_tag(mem: Memory, tag: Tag, session: str | None = None) -> HygieneReport:
    """Act on one tag. A tag that cannot act (nothing matches, ambiguous) is reported as
    skipped, never fatal: the rest of the conversation is still processed."""
    report = HygieneReport()
    try:
        if tag.action == "memory_health":
            report.health = health(mem).text()
        elif tag.action in ("pin", "unpin"):
            report.pinned.append(pin(mem, tag.argument, tag.action == "pin"))
        elif tag.action == "promote":
            report.promoted.append(promote_to_hot(mem, tag.argument))
        elif tag.action == "demote":
            report.demoted.append(demote_from_hot(mem, tag.argument))
        elif tag.action == "forget":
            done = forget_entry(mem, tag.argument)
            (report.demoted if done["action"] == "demoted" else report.archived).append(done)
        elif tag.action == "forget keyword":
            report.merge(forget_keyword(mem, tag.argument))
        elif tag.action == "restore":
            report.restored.append(restore(mem, tag.argument, session))
    except (InvalidInput, NotFound, LimitExceeded) as exc:
        report.skipped.append(f"{tag.text}: {exc}")
    return report
