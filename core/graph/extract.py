"""Entities and relations from text, offline: names, roles, "X works on Y", "X moved to Y",
"X uses Y", URLs, known tools and the dates that bound a relation ("since March 2026",
"until 2026-03")."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from tiermem.core.lazy import lazy_import
from tiermem.core.terms import STOPWORDS

if TYPE_CHECKING:
    import calendar
else:  # only an extraction names months and days
    calendar = lazy_import("calendar")

KINDS = ("person", "project", "organisation", "place", "tool", "url", "other")
OWNER = "User"
"""The entity "I" stands for in the user's own words."""
EXCLUSIVE = frozenset({"lives_in", "works_at"})
"""Predicates a subject has one object of at a time: a new one closes the old."""

_NAME = r"(?:[A-Z][\w.&'-]*(?:\s+(?:of\s+|de\s+)?[A-Z][\w.&'-]*){0,3})"
_SUBJECT = rf"(?P<s>{_NAME}|I)"
_OBJECT = rf"(?P<o>{_NAME})"
_PATTERNS: list[tuple[str, str, str, str]] = [
    # (regex, predicate, subject kind, object kind)
    (
        rf"{_SUBJECT} (?:now )?(?:works|worked|is working|has been working|started working|"
        rf"am working|will work) on (?:the )?{_OBJECT}",
        "works_on",
        "person",
        "project",
    ),
    (
        rf"{_SUBJECT} (?:now )?(?:works|worked|is working|am working|started working) "
        rf"(?:at|for) {_OBJECT}",
        "works_at",
        "person",
        "organisation",
    ),
    (rf"{_SUBJECT} (?:has )?(?:joined|join) {_OBJECT}", "works_at", "person", "organisation"),
    (
        rf"{_SUBJECT} (?:now )?(?:lives|lived|live|is living|am living|moved|has moved|have "
        rf"moved|relocated|is moving|am moving) (?:back )?(?:in|to) {_OBJECT}",
        "lives_in",
        "person",
        "place",
    ),
    (
        rf"{_SUBJECT} (?:uses|use|is using|am using|switched to|migrated to) {_OBJECT}",
        "uses",
        "other",
        "tool",
    ),
    (
        rf"{_SUBJECT} (?:leads|manages|runs|owns|maintains|founded) (?:the )?{_OBJECT}",
        "leads",
        "person",
        "project",
    ),
]
_ROLE = (
    rf"{_SUBJECT} (?:is|was|am|became|has become) (?:a|an|the|our|my) "
    rf"(?P<r>[a-z][a-z -]{{1,30}}?) (?:at|of|for|in) {_OBJECT}"
)


@cache
def _compiled() -> tuple[list[tuple[re.Pattern[str], str, str, str]], re.Pattern[str]]:
    """The relation and role patterns, compiled on first extraction (a search that only reads
    the graph never needs them, and they take longer to compile than the rest of this module
    to load)."""
    relations = [(re.compile(p), pred, sk, ok) for p, pred, sk, ok in _PATTERNS]
    return relations, re.compile(_ROLE)


# The patterns below are compiled on first use (by `re`'s own cache): reading the graph never
# needs them.
_URL = r"https?://[^\s<>()\"']+"
_ORG_SUFFIX = (
    r"\b(?:Inc|Ltd|LLC|GmbH|Corp|Corporation|Labs|University|Bank|Foundation|Group|AG|SA)\.?$"
)
TOOLS = frozenset(
    """python docker git kubernetes postgres postgresql sqlite redis rust typescript javascript
    react terraform ansible nginx linux vim neovim emacs vscode github gitlab jira slack notion
    figma aws gcp azure kafka grafana prometheus django flask fastapi node.js nodejs npm pytest
    mypy ruff tmux zsh bash openai claude ollama turso libsql textual""".split()  # noqa: SIM905
)
_DATE = (
    r"\b(?P<w>since|from|in|on|as of|until|till|through)\s+(?:(?P<d>\d{1,2})\s+)?"
    r"(?:(?P<iso>(?:19|20)\d\d-\d\d(?:-\d\d)?)|(?P<m>[A-Z][a-z]+)\s+(?P<y>(?:19|20)\d\d))"
)
_SENTENCE = r"(?<=[.!?;])\s+|\n+|,\s*(?=(?:and\s+)?(?:then|but|later|now)\b)"
_PERSONAL = frozenset({"He", "She"})
_PRONOUN_SKIP = frozenset({"He", "She", "They", "We", "It", "This", "That", "You", "There"})


@dataclass(frozen=True)
class Relation:
    """Subject → predicate → object, valid between two dates when the text bounds it."""

    subject: str
    predicate: str
    object: str
    valid_from: float | None = None
    valid_to: float | None = None


@dataclass
class Extraction:
    """The entities and relations one text states."""

    entities: dict[str, str] = field(default_factory=dict)
    """name → kind."""
    relations: list[Relation] = field(default_factory=list)
    text_keys: set[str] = field(default_factory=set)
    """Name keys of the text, for mentions of entities the graph already knows."""
    last_person: str = ""
    """The person a relation last named, whom a later "he" or "she" stands for."""

    def add(self, name: str, kind: str) -> None:
        if self.entities.get(name, "other") == "other":
            self.entities[name] = kind


def extract(text: str, speaker: str = "") -> Extraction:
    """The entities and relations `text` states. `speaker` "user" lets "I" be the owner."""
    out = Extraction()
    for url in re.findall(_URL, text):
        out.add(url.rstrip(".,;:!?"), "url")
    for sentence in re.split(_SENTENCE, text):
        _sentence(sentence, out, speaker)
    for word in re.findall(r"[\w.+-]+", text):
        word = word.rstrip(".")
        if word.casefold() in TOOLS and len(word) > 2:
            out.add(word if word[0].isupper() else word.casefold(), "tool")
    return out


def _sentence(sentence: str, out: Extraction, speaker: str) -> None:
    start, end = _window(sentence)
    relations, roles = _compiled()
    for regex, predicate, skind, okind in relations:
        for m in regex.finditer(sentence):
            _relation(out, m.group("s"), predicate, m.group("o"), skind, okind, start, end, speaker)
    for m in roles.finditer(sentence):
        role = "_".join(m.group("r").split())
        _relation(
            out,
            m.group("s"),
            f"{role}_at",
            m.group("o"),
            "person",
            "organisation",
            start,
            end,
            speaker,
        )
    for name in proper_names(sentence):
        kind = "organisation" if re.search(_ORG_SUFFIX, name) else "other"
        out.add(name, kind)


def _relation(
    out: Extraction,
    subject: str,
    predicate: str,
    obj: str,
    skind: str,
    okind: str,
    start: float | None,
    end: float | None,
    speaker: str,
) -> None:
    if subject == "I":
        if speaker not in ("user", ""):
            return
        subject = OWNER
    if subject in _PERSONAL and out.last_person:
        subject = out.last_person  # "Maya works on Ledgerly. She moved to Porto."
    subject, obj = clean_name(subject), clean_name(obj)
    if not subject or not obj or subject in _PRONOUN_SKIP or obj in _PRONOUN_SKIP:
        return
    if skind == "person" and subject != OWNER:
        out.last_person = subject
    if re.search(_ORG_SUFFIX, obj) and okind in ("project", "place"):
        okind = "organisation"
    if obj.casefold() in TOOLS:
        okind = "tool"
        predicate = "uses" if predicate == "lives_in" else predicate
    out.add(subject, skind)
    out.add(obj, okind)
    out.relations.append(Relation(subject, predicate, obj, start, end))


def clean_name(name: str) -> str:
    name = " ".join(name.split()).strip(".,;:!?'\"")
    name = re.sub(r"['’]s$", "", name)
    if name.casefold() in STOPWORDS or len(name) < 2:
        return ""
    return name


def proper_names(sentence: str) -> list[str]:
    """Capitalised phrases that are not only the sentence's first word."""
    out = []
    for m in re.finditer(_NAME, sentence):
        name = clean_name(m.group(0))
        if not name or name in _PRONOUN_SKIP or name.casefold() in _months():
            continue
        if m.start() == 0 and " " not in name:
            continue
        if name.split()[0].casefold() in STOPWORDS or name.casefold() in _days():
            continue
        if " " not in name and name.isupper() and len(name) <= 4:
            continue  # an acronym (API, EUR, VAT) is a word, not a thing
        out.append(name)
    return out


def _window(sentence: str) -> tuple[float | None, float | None]:
    """The dates a sentence bounds its relations with: (from, until)."""
    start = end = None
    for m in re.finditer(_DATE, sentence):
        ts = _date(m)
        if ts is None:
            continue
        if m.group("w") in ("until", "till", "through"):
            end = ts
        else:
            start = ts
    return start, end


def _date(m: re.Match[str]) -> float | None:
    try:
        if m.group("iso"):
            parts = [int(p) for p in m.group("iso").split("-")]
            day = dt.date(parts[0], parts[1], parts[2] if len(parts) > 2 else 1)
        else:
            month = _months().get(m.group("m").casefold())
            if month is None:
                return None
            day = dt.date(int(m.group("y")), month, int(m.group("d") or 1))
    except ValueError:
        return None
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()


@cache
def _months() -> dict[str, int]:
    """Month names and abbreviations → 1..12 (folded)."""
    names = {m.casefold(): i for i, m in enumerate(calendar.month_name) if m}
    return names | {m.casefold(): i for i, m in enumerate(calendar.month_abbr) if m}


@cache
def _days() -> frozenset[str]:
    """Day names and abbreviations (folded)."""
    return frozenset(d.casefold() for d in [*calendar.day_name, *calendar.day_abbr])
