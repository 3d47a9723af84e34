"""What counts as a name and how names compare: accents and case fold ("Inês" = "Ines"),
capitalised runs are names unless they are a sentence's filler, an acknowledgement, a weekday,
a month or a holiday, and a tool goes by one canonical name whatever alias a text uses."""

from __future__ import annotations

import re
import unicodedata
from functools import cache, lru_cache

from tiermem.core.graph import lexicon as lx
from tiermem.core.graph.lexicon import (
    DEMONYMS,
    FILLERS,
    HOLIDAYS,
    PREFERENCE_CATALOGUE,
    TIME_NAMES,
    TOOL_CATALOGUE,
    TOOL_PERSON_NAMES,
    TOOL_WORDS,
)
from tiermem.core.terms import STOPWORDS

_PUNCT = re.compile(r"[^\w\s:/.@+-]")
_CANDIDATE = re.compile(
    r"(?<![\w'’.&+-])(?:[A-ZÀ-ÖØ-ÞĀ-ſͰ-ϿЀ-ӿ][\w.&'’+-]*|(?:of|de|da|du|van|von|der|den|la|le|"
    r"del|di|y|al|bin)(?![\w'’])|&)"
)
"""The words a name may be made of: capitalised ones (checked again with `isupper`) and the
connectors between them; what lies between two of them decides if they are one run."""
_CONNECTORS = frozenset(
    [
        "of",
        "de",
        "da",
        "du",
        "van",
        "von",
        "der",
        "den",
        "la",
        "le",
        "del",
        "di",
        "y",
        "&",
        "al",
        "bin",
    ]
)
_SELF = frozenset({"i", "i'm", "i'll", "i've", "i'd", "i’m", "i’ll", "i’ve", "i’d"})
_ORG_SUFFIX = re.compile(
    r"\b(?:Inc|Ltd|LLC|GmbH|Corp|Corporation|Labs|University|Bank|Foundation|Group|AG|SA|"
    r"Company|Co|Technologies|Systems|Studios|Agency|Institute|Hospital|School|College)\.?$"
)
_NOT_PEOPLE = lx.NOT_PEOPLE
_ADVERB = re.compile(
    r"(?:ically|ively|ously|fully|ately|ently|antly|ingly|edly|ably|ibly|ually|ionally)$", re.I
)
_ABBREVIATIONS = frozenset(
    ["inc", "ltd", "co", "corp", "st", "dr", "mr", "mrs", "ms", "jr", "sr", "prof", "mt", "ave"]
)
_POSSESSIVE = re.compile(r"['’]s$")
_ACRONYM = re.compile(r"[A-Z]{2,4}|[A-Z]{2,5}s")
_NEVER = FILLERS | STOPWORDS | TIME_NAMES | HOLIDAYS | _SELF
WEEKDAYS = frozenset(
    [
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "mondays",
        "tuesdays",
        "wednesdays",
        "thursdays",
        "fridays",
        "saturdays",
        "sundays",
    ]
)


@lru_cache(maxsize=65536)
def fold(text: str) -> str:
    """Case and accents folded: "Inês" and "INES" compare equal."""
    if text.isascii():
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def name_key(name: str) -> str:
    """How names compare: case, accents, punctuation, spacing and a leading "the" do not
    count."""
    return _key(name.casefold() if name.isascii() else fold(name))


def legacy_key(name: str) -> str:
    """The key a home written before accents folded has for `name` (accents kept)."""
    return _key(name.casefold())


def _key(folded: str) -> str:
    key = " ".join(_PUNCT.sub(" ", folded).split())
    if key.startswith(("http://", "https://")):
        key = key.split("://", 1)[1].rstrip("/")
    return key[4:] if key.startswith("the ") else key


def keys(name: str) -> tuple[str, ...]:
    """The keys to look `name` up by: the folded one, and the accented one older homes kept."""
    folded, old = name_key(name), legacy_key(name)
    return (folded,) if folded == old else (folded, old)


def never_a_name(word: str) -> bool:
    """A word that is never a thing of its own: filler, stopword, time or holiday word."""
    w = _bare(word)
    return w in _NEVER or len(w) < 2


def _bare(word: str) -> str:
    return _POSSESSIVE.sub("", fold(word).strip(".,;:!?'\"’"))


def _leading_filler(word: str) -> bool:
    """A word that opens a phrase without being part of the name ("Thanks Maya", "Monday
    Sam"): not a month or a holiday word, which may be a name's own ("May Chen", "Bank of")."""
    w = _bare(word)
    return w in FILLERS or w in STOPWORDS or w in _SELF or w in WEEKDAYS or w in _CONNECTORS


def clean_name(name: str) -> str:
    """`name` without punctuation around it, a possessive "'s", leading fillers ("Thanks Maya"
    → "Maya") or trailing time words; "" when nothing named is left."""
    words = " ".join(name.split()).strip(".,;:!?'\"’()[]").split()
    while words and _leading_filler(words[0]):
        words.pop(0)
    while words and (
        fold(words[-1]).strip(".,") in TIME_NAMES or words[-1].casefold() in _CONNECTORS
    ):
        words.pop()
    if not words:
        return ""
    if all(fold(w).strip(".,") in TIME_NAMES | HOLIDAYS | FILLERS for w in words):
        return ""
    text = _POSSESSIVE.sub("", " ".join(words)).strip(".,;:!?'\"’")
    if len(text) < 2 or fold(text) in STOPWORDS or fold(text) in DEMONYMS:
        return ""
    return text


def proper_names(sentence: str) -> list[str]:
    """Capitalised runs of words ("Maya Chen", "Bank of Portugal"), except a sentence's first
    word alone, acronyms of four letters or fewer, and fillers, weekdays, months, holidays."""
    out = []
    first = _first_word_at(sentence)
    for start, words in _runs(sentence):
        if start < first:
            continue  # a label ("Lesson:", "Note:")
        if start == first and fold(words[0]) in _sentence_words():
            words = words[1:]  # "Prefer Postgres …", "Use uv …": a verb opening a sentence
        name = clean_name(" ".join(words))
        if not name:
            continue
        if start == first and " " not in name and name == words[0]:
            continue  # "Maya" opening a sentence is found by the relation patterns instead
        if " " not in name and _ACRONYM.fullmatch(name):
            continue  # an acronym (API, EUR, VAT, UIs) is a word, not a thing
        out.append(name)
    return out


@cache
def _sentence_words() -> frozenset[str]:
    """Words of the relation verb lists: capitalised only because they open a sentence."""
    phrases = (
        *lx.LIVE_VERBS,
        *lx.WORK_VERBS,
        *lx.USE_VERBS,
        *lx.LEAD_VERBS,
        *lx.PREFER_VERBS,
        *lx.SWITCH_VERBS,
        *lx.LEAVE_VERBS,
        *lx.MIGRATE_VERBS,
        *lx.ROLE_VERBS,
    )
    return frozenset(fold(p.split()[0]) for p in phrases) | lx.IMPERATIVES


def _first_word_at(sentence: str) -> int:
    """Where a sentence's first word starts (after a "Note:" label, a bullet or a quote)."""
    m = re.match(r"\s*[-*•>\"'“(\s]*(?:[\w-]{1,20}:\s+)?[-*•>\"'“(\s]*", sentence)
    return m.end() if m else 0


def _runs(sentence: str) -> list[tuple[int, list[str]]]:
    """Runs of capitalised words, joined by spaces or name connectors ("of", "de")."""
    runs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = end = 0
    pending: list[str] = []
    stop = False
    for m in _CANDIDATE.finditer(sentence):
        word = m.group(0).rstrip(".")
        gap = sentence[end : m.start()]
        joined = current and gap.strip() == "" and len(current) < 5 and not stop
        if word[:1].isupper() and word.casefold() not in _SELF:
            if joined:
                current += [*pending, word]
            else:
                if current:
                    runs.append((start, current))
                current, start = [word], m.start()
            pending = []
        elif joined and word.casefold() in _CONNECTORS and not pending:
            pending = [word]
        else:
            if current:
                runs.append((start, current))
            current, pending = [], []
        end = m.end()
        stop = m.group(0).endswith(".") and word.casefold() not in _ABBREVIATIONS
    if current:
        runs.append((start, current))
    return runs


def personish(name: str) -> bool:
    """Could be a person's name: one to three words, not an acronym, a plural, an adverb or
    a place or organisation ("Prices", "GSB", "Specifically", "American Airlines")."""
    words = name.split()
    if not 1 <= len(words) <= 3 or organisation_like(name):
        return False
    if any(fold(w) in _NOT_PEOPLE or fold(w) in DEMONYMS for w in words):
        return False
    last = words[-1]
    if any(w.isupper() and len(w) > 1 for w in words):
        return False  # an acronym: "MIT Sloan", "GSB"
    if _ADVERB.search(last) or last[0].isdigit():
        return False
    return not (len(words) == 1 and re.search(r"[^su]s$", last) and len(last) > 4)


def organisation_like(name: str) -> bool:
    return _ORG_SUFFIX.search(name) is not None


def display(name: str, kind: str) -> str:
    """A name written all in lower case ("leeds", "maya chen") as a name is written."""
    if name.islower() and kind in ("person", "place", "organisation", "project", "event"):
        return " ".join(w if w in _CONNECTORS else w[:1].upper() + w[1:] for w in name.split())
    return name


@cache
def tools() -> dict[str, tuple[str, str]]:
    """Folded alias → (canonical name, category), for every tool the lexicon knows."""
    out: dict[str, tuple[str, str]] = {}
    for category, entries in TOOL_CATALOGUE.items():
        for entry in entries:
            names = entry.split("|")
            for alias in names:
                out.setdefault(fold(alias), (names[0], category))
    return out


@cache
def preferences() -> dict[str, str]:
    """Folded preference → its slot ("tea" → "drink")."""
    return {fold(value): slot for slot, values in PREFERENCE_CATALOGUE.items() for value in values}


@cache
def _tools_by_first_word() -> dict[str, list[tuple[str, ...]]]:
    """First word of a tool alias → the aliases (as words) it starts, longest first."""
    out: dict[str, list[tuple[str, ...]]] = {}
    for alias in tools():
        words = tuple(alias.split())
        out.setdefault(words[0], []).append(words)
    for found in out.values():
        found.sort(key=len, reverse=True)
    return out


_TOOL_TOKEN = re.compile(r"[^\W_][\w.+#/-]*")


def tool_mentions(text: str) -> list[tuple[str, str, str]]:
    """(surface, canonical, category) of each tool `text` names on its own: a tool name that is
    also a word ("rust", "linear") only with a capital, one that is also a person's name
    ("Julia") never (the object of "uses" is a tool whatever its name)."""
    tokens = [t.rstrip(".,/-") for t in _TOOL_TOKEN.findall(text)]
    folded = [fold(t) for t in tokens]
    index = _tools_by_first_word()
    out = []
    i = 0
    while i < len(tokens):
        for words in index.get(folded[i], ()):
            if tuple(folded[i : i + len(words)]) == words:
                surface = " ".join(tokens[i : i + len(words)])
                if _bare_tool(surface, " ".join(words)):
                    canonical, category = tools()[" ".join(words)]
                    out.append((surface, canonical, category))
                i += len(words) - 1
                break
        i += 1
    return out


def _bare_tool(surface: str, alias: str) -> bool:
    """A tool named on its own counts: not a person's name, a word only with a capital."""
    if alias in TOOL_PERSON_NAMES or len(surface) <= 2:
        return False
    return alias not in TOOL_WORDS or surface[0].isupper()


def tool(name: str) -> tuple[str, str] | None:
    """(canonical, category) when `name` is a tool the lexicon knows."""
    return tools().get(fold(" ".join(name.split())))
