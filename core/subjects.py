"""Whom a statement is about, as frames compare statements: the user ("I", "my"), a relative
("my sister"), a pronoun ("she"), a person by name, or whom a note quotes."""

from __future__ import annotations

import re

from tiermem.core.frame_words import (
    _COMMON_STARTS,
    _POSSESSIVE,
    _POSSESSIVES,
    _RELATIVE_PRONOUNS,
    _THIRD_PERSON,
    _WORD,
    FIRST_PERSON,
    RELATIVES,
    SECOND_PERSON,
    SLOT_WORDS,
    fold_accents,
)
from tiermem.core.temporal import MONTHS, WEEKDAYS

_SAYS = re.compile(r",\s*(he|she)\s+(?:says|said|insists|thinks)\b", re.IGNORECASE)
"""An attributed note ("filter coffee at 4pm is non-negotiable, he says"): about whom it quotes."""


_LEAD_IN = re.compile(
    r"^\s*(?:(?:[\w'’]+\s+){0,3}[\w'’]+:\s+(?=\S)|"
    r"(?:[\w'’]+\s+){1,3}(?:told (?:me|us)|said|says|confirmed)\b[^.]*?\bthat\s+(?=\S))",
    re.IGNORECASE,
)
"""A short lead-in before a colon ("Family news: Chidi joined Arup") or who said it ("Priya
told me today that I will be tech lead"): the statement is about whom the rest names."""


def subject_of(text: str, words: list[str], folded: list[str]) -> str:
    """Whom a statement is about: "user", "~sister", "~he", a name (folded), past a lead-in
    ("Family news: …") and for a quoted note, whom it quotes ("…, he says")."""
    if said := _SAYS.search(text):
        return "~" + said[1].casefold()
    lead = _LEAD_IN.match(text)
    if lead is None or any(SLOT_WORDS.get(w.casefold()) for w in lead[0].split()):
        return _subject(words, folded)  # "New manager in Pune: Neha" names its value
    rest = _WORD.findall(text[lead.end() :])
    if not rest:
        return _subject(words, folded)
    return _subject(rest, [_POSSESSIVE.sub("", w.casefold().strip(".'’")) for w in rest])


def _subject(words: list[str], folded: list[str]) -> str:
    """Who a statement is about: the first person, a third person ("she", "my sister": never
    the user), or its first capitalised name before the verb."""
    if folded[0] in _RELATIVE_PRONOUNS:
        return "~other"  # "…, who lives in Leeds": about whom the sentence before named
    for word, low in zip(words[:4], folded[:4], strict=False):
        if low in SLOT_WORDS:
            break  # "New boss is Diego": a name after the attribute is its value
        if low in WEEKDAYS or low in MONTHS:
            continue
        if low in SECOND_PERSON:
            return "~you"  # "omg dana ur moving to austin": the person spoken to
        if low in _THIRD_PERSON:
            return "~" + low
        if low in FIRST_PERSON:
            following = folded[folded.index(low) + 1] if low in _POSSESSIVES else ""
            return "~" + following if following in RELATIVES else "user"
        if low not in _COMMON_STARTS and (word[0].isupper() or _acts(folded, low)):
            return fold_accents(_POSSESSIVE.sub("", low))
    return "user"


_SUBJECT_VERBS = frozenset(
    "moved moves lives lived works worked joined left started quit".split()  # noqa: SIM905
)


def _acts(folded: list[str], low: str) -> bool:
    """A name written in lower case, known by the verb after it ("kayla moved to sf")."""
    at = folded.index(low)
    verb = at + 1 < len(folded) and folded[at + 1] in _SUBJECT_VERBS
    named = at == 0 or folded[at - 1] not in _ARTICLES  # "the department works": no name
    return verb and named and low.isalpha() and not low.endswith("ly")  # "officially moved"


_ARTICLES = frozenset({"the", "a", "an", "this", "that", "whole", "entire"})
