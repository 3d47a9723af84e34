"""The owner profile from what the person says: where they live, who they work for and as what,
who their manager is, their diet and their tools. Hot memory's owner profile follows the newest
statement of each field: a statement older than another stored statement of the same field
(a chat history imported late) never replaces its value."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.core.db import Database
from tiermem.core.distill.cues import (
    DATE_WORDS,
    MAX_TOOLS,
    NOT_VALUES,
    PROFILE,
    PROFILE_KEYS,
    TOOLS,
    VALUE_STOPS,
)
from tiermem.core.distill.signals import tokens
from tiermem.core.hot import HotState

_CONNECTORS = frozenset({"de", "da", "do", "dos", "van", "von", "del", "la", "le", "of", "y"})
_EDGE = ".,;:!?\"'()[]"
_NAMED = frozenset({"location", "employer", "manager"})
MAX_LATER = 2000
"""Memories stated after a conversation that are read for the profile fields they state."""


@dataclass(frozen=True)
class ProfileFact:
    """One owner-profile field the person stated ("location", "Porto"); `replaces` is the value
    it says it replaced ("switched from Vim to Neovim")."""

    field: str
    value: str
    replaces: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "value": self.value, "replaces": self.replaces}


def profile_facts(text: str) -> list[ProfileFact]:
    """The profile fields one sentence of the person states ("I moved to Porto" → location)."""
    lowercase = not any(w[:1].isupper() for w in tokens(text)[1:] if w.split("'")[0] != "I")
    out: list[ProfileFact] = []
    for field, pattern in PROFILE:
        for match in pattern.finditer(text):
            value = _value(field, match, lowercase)
            if value and not any(f.field == field for f in out):
                old = match.groupdict().get("old") or ""
                out.append(ProfileFact(field, value, _clean(old)))
    return out


def _value(field: str, match: re.Match[str], lowercase: bool) -> str:
    groups = match.groupdict()
    if groups.get("no"):
        return f"no {groups['no'].casefold()}"
    words = [_clean(w) for w in (groups.get("v") or "").split()]
    words = [w for w in words if w]
    if field == "diet":
        return " ".join(words).casefold()
    if field == "role":
        return " ".join(_until_stop(words, keep={"of"})[:4])
    if words and words[0].casefold() == "the" and len(words) > 1 and words[1][:1].isupper():
        words = words[1:]
    if not words or words[0].casefold() in NOT_VALUES:
        return ""
    if field == "tools":
        head = words[0]
        return head if head.casefold() in TOOLS or head[:1].isupper() else ""
    if field == "location" and words[0].casefold() in TOOLS:
        return ""  # "we moved to Postgres" is a switch of tools, not of home
    named = _capitalised(words)
    if named:
        return " ".join(named)
    if lowercase and field in _NAMED and field != "manager":
        return " ".join(w.capitalize() for w in _until_stop(words)[:2])
    return ""


def _clean(word: str) -> str:
    return word.strip(_EDGE)


def _until_stop(words: list[str], keep: Iterable[str] = ()) -> list[str]:
    """The words before the first one that ends a value ("Porto last weekend" → Porto)."""
    allowed = set(keep)
    out: list[str] = []
    for word in words:
        low = word.casefold()
        if low not in allowed and (low in VALUE_STOPS or low in DATE_WORDS):
            break
        out.append(word)
    return out


def _capitalised(words: list[str]) -> list[str]:
    """The leading run of capitalised words, with the small words names have between them."""
    out: list[str] = []
    for word in words:
        if word[:1].isupper() or (out and word.casefold() in _CONNECTORS):
            out.append(word)
        else:
            break
    while out and out[-1].casefold() in _CONNECTORS:
        out.pop()
    return out


def follow_profile(
    state: HotState, facts: Sequence[ProfileFact], later: Iterable[str] = ()
) -> list[str]:
    """Apply the person's statements to the owner profile: each replaces its field's value,
    under the key the profile already uses for it, unless one of the `later` statements (the
    texts stated after these) states the same field. Returns what changed as `key: value`."""
    stated_later = {f.field for text in later for f in profile_facts(text)}
    profile = state.owner_profile
    changes: list[str] = []
    for fact in facts:
        if fact.field in stated_later:
            continue
        key = _key_for(profile, fact.field)
        old = profile.get(key)
        new = _tools(old, fact) if fact.field == "tools" else fact.value
        if new == old:
            continue
        profile[key] = new
        changes.append(f"{key}: {', '.join(new) if isinstance(new, list) else new}")
    return changes


def stated_after(db: Database, agent_id: str, when: float, source: str) -> list[str]:
    """The texts of the memories stated after `when` by another source than `source`: an
    older statement (a chat history imported late) must not replace what they say."""
    rows = db.query(
        "SELECT text FROM memories WHERE agent_id = ? AND created_at > ? AND source != ? "
        "ORDER BY created_at DESC LIMIT ?",
        (agent_id, when, source, MAX_LATER),
    )
    return [str(r[0]) for r in rows]


def _key_for(profile: dict[str, Any], field: str) -> str:
    """The key the profile already uses for `field` ("city" for a location), else the field."""
    names = PROFILE_KEYS.get(field, frozenset({field}))
    for key in profile:
        if "_".join(key.casefold().split()) in names:
            return key
    return field


def _tools(old: Any, fact: ProfileFact) -> list[str]:
    """The tools list with the new one first and the one it replaced gone."""
    before = old if isinstance(old, list) else [str(old)] if old else []
    drop = {fact.value.casefold(), fact.replaces.casefold()}
    kept = [str(t) for t in before if str(t).casefold() not in drop]
    return [fact.value, *kept][:MAX_TOOLS]
