"""Reading the words around a verb: who the subject is (a name, "I", "we", "she", an
appositive "Maya Chen, our designer,") and what the object is (a name, a tool, a role, a
preference, an event), the way people write them, in any case."""

from __future__ import annotations

import re

from tiermem.core.graph import lexicon as lx
from tiermem.core.graph import names
from tiermem.core.graph.patterns import event_head, role_phrase
from tiermem.core.terms import STOPWORDS

OWNER = "User"
"""The entity "I" stands for in the user's own words."""
_TOKEN = re.compile(r"[^\W_][\w.&'’+/-]*|[,;:()]")
_SKIP_BACK = frozenset(
    _w.replace("’", "'")
    for _w in (
        *lx.AUX,
        *[
            "not",
            "no",
            "longer",
            "don't",
            "dont",
            "doesn't",
            "doesnt",
            "didn't",
            "didnt",
            "won't",
            "wont",
            "never",
            "going",
            "to",
            "planning",
            "plan",
            "plans",
            "thinking",
            "about",
            "of",
            "might",
            "may",
            "could",
            "would",
            "will",
            "'ll",
            "should",
            "gonna",
            "want",
            "wants",
            "wanna",
            "hope",
            "hoping",
            "considering",
            "intend",
            "intends",
            "likely",
            "probably",
            "maybe",
            "perhaps",
            "soon",
            "then",
            "later",
            "eventually",
            "used",
            "who",
            "which",
            "that",
            "both",
            "all",
            "also",
            "finally",
            "officially",
            "currently",
            "actually",
            "really",
            "only",
            "apparently",
            "seriously",
            "definitely",
            "certainly",
            "recently",
            "yesterday",
            "today",
            "last",
            "week",
            "month",
            "year",
            "ago",
            "since",
            "ever",
            "kind",
            "sort",
            "just",
            "love",
            "like",
            "enjoy",
            "hate",
            "started",
            "start",
            "began",
            "begun",
            "keep",
            "kept",
            "continue",
            "continued",
        ],
    )
)
"""Words between a subject and its verb ("Maya, who has now also moved to …")."""
_STOP_AFTER = (
    STOPWORDS
    | lx.TIME_NAMES
    | frozenset(
        [
            *("days", "weeks", "months", "years", "hours", "minutes"),
            "now",
            "since",
            "because",
            "anymore",
            "already",
            "too",
            "again",
            "instead",
            "soon",
            "yet",
            "ago",
            "last",
            "next",
            "this",
            "later",
            "earlier",
            "recently",
            "currently",
            "either",
            "full-time",
            "part-time",
            "remotely",
            "permanently",
            "together",
            "though",
            "although",
            "whereas",
            "while",
            "plus",
            "etc",
        ]
    )
)
"""Words that end an object written in lower case ("leeds now", "globex since")."""
_SELF = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "myself", "im", "ive"})
_WE = frozenset({"we", "we're", "we've", "we'd", "we'll", "us", "ourselves"})
_HE_SHE = frozenset({"he", "she", "he's", "she's", "he'd", "she'd", "he'll", "she'll"})
_IT = frozenset({"it", "it's", "its"})
_WITH_ME = re.compile(
    r"(?:\b(?:me|i)\s+and\s+\w+(?:\s+\w+)?|\band\s+(?:i|me)|\b(?:my|our)\s+"
    r"\w+\s+and\s+i)\s*(?:\w+\s*){0,3}$",
    re.I,
)
_OUR_THINGS = frozenset(
    [
        "team",
        "company",
        "startup",
        "org",
        "organisation",
        "organization",
        "project",
        "stack",
        "app",
        "product",
        "service",
        "backend",
        "frontend",
        "infra",
        "department",
        "group",
        "family",
        "household",
    ]
)


def tokens(text: str) -> list[str]:
    return [t.replace("’", "'") for t in _TOKEN.findall(text)]


def capitalised(word: str) -> bool:
    return word[:1].isupper()


class Reader:
    """Who is spoken of: the last person and thing a sentence named, for "she" and "it"."""

    def __init__(self, lower: bool, ref: float) -> None:
        self.lower = lower
        self.ref = ref
        """The text's own date, that "last weekend" is read against."""
        """The whole text is lower case: names are not capitalised."""
        self.last_person = ""
        self.last_thing = ""

    def subject(self, left: str) -> str | None:
        """The subject the words before a verb name: a name, OWNER, "" (someone unnamed:
        "my wife", "they") or None (none: the sentence's subject goes on)."""
        if _WITH_ME.search(left):
            return OWNER  # "me and my wife", "Maya and I"
        words = tokens(left)
        for attempt in range(3):
            while words and (words[-1].casefold() in _SKIP_BACK or words[-1] == ","):
                words.pop()
            if not words:
                return None if attempt == 0 else ""
            found = self._name_at_end(words)
            if found is not None:
                return found
            chunk_start = _chunk_start(words)
            if chunk_start <= 0:
                return ""
            words = words[:chunk_start]  # "Maya Chen, our designer," → "Maya Chen"
        return ""

    def _name_at_end(self, words: list[str]) -> str | None:
        last = words[-1].casefold()
        if last in _SELF:
            return OWNER
        if last in _WE:
            return OWNER
        if last in _HE_SHE:
            return self.last_person or ""
        if last in _IT:
            return self.last_thing or ""
        if len(words) >= 2 and words[-2].casefold() in ("my", "our") and last in _OUR_THINGS:
            return OWNER
        if capitalised(words[-1]):
            run = [words[-1]]
            i = len(words) - 2
            while (
                i >= 0
                and len(run) < 5
                and (capitalised(words[i]) or words[i].casefold() in ("of", "de", "van", "von"))
            ):
                run.insert(0, words[i])
                i -= 1
            return names.clean_name(" ".join(run)) or None
        if self.lower and last not in _STOP_AFTER and not names.never_a_name(last):
            pair = words[-2:] if len(words) >= 2 and _nameish(words[-2]) else words[-1:]
            return names.display(names.clean_name(" ".join(pair)), "person") or None
        return None


def _nameish(word: str) -> bool:
    return word.casefold() not in _STOP_AFTER and not names.never_a_name(word) and word != ","


def _chunk_start(words: list[str]) -> int:
    """Where the comma-separated chunk at the end of `words` starts (an appositive)."""
    for i in range(len(words) - 1, -1, -1):
        if words[i] == ",":
            return i
    return -1


def read_name(right: str, strong: bool, lower: bool) -> str:
    """The name an object starts with: a capitalised run ("Bank of Portugal"), or in lower
    case up to three words before a word that ends it ("leeds now")."""
    words = tokens(right)
    if words and words[0].casefold() == "the" and len(words) > 1:
        words = words[1:]
    if not words or words[0] in ",;:()":
        return ""
    if capitalised(words[0]):
        run: list[str] = []
        for w in words:
            if w.casefold() in _SELF:
                break
            if capitalised(w) or (run and w.casefold() in ("of", "de", "&", "van", "von", "am")):
                run.append(w)
                if w.endswith(".") and w.casefold().rstrip(".") not in ("st", "inc", "co"):
                    break
            else:
                break
        while run and run[-1].casefold() in ("of", "de", "&", "van", "von", "am"):
            run.pop()
        return names.clean_name(" ".join(run[:5]))
    if not (strong or lower):
        return ""
    first = words[0].casefold()
    if first in lx.NOT_OBJECTS or first in _STOP_AFTER or first in ("a", "an"):
        return ""
    run = []
    for w in words[:3]:
        if w in ",;:()" or w.casefold() in _STOP_AFTER or w[0].isdigit():
            break
        run.append(w.rstrip("."))
    return names.clean_name(" ".join(run))


def read_tool(right: str, lower: bool, strong: bool) -> tuple[str, str, str]:
    """(name, surface, category) of the tool an object starts with; a name the lexicon does not
    know is a tool with no category."""
    words = tokens(right)
    if words and words[0].casefold() in ("the", "a", "an") and len(words) > 1:
        words = words[1:]
    for n in (3, 2, 1):
        surface = " ".join(words[:n])
        known = names.tool(surface.rstrip(".,"))
        if known and len(words) >= n:
            return known[0], surface.rstrip(".,"), known[1]
    name = read_name(" ".join(words), strong, lower)
    return name, name, ""


def read_role(right: str) -> str:
    """A role ("senior backend engineer", "head of platform"), lower case."""
    text = right.strip()
    text = re.sub(r"^(?:an?|the)\s+", "", text, flags=re.IGNORECASE)
    m = role_phrase().match(text)
    if not m:
        return ""
    role = " ".join(m.group("role").split())
    first = role.split()[0].casefold()
    if first in STOPWORDS and first not in ("it",):
        return ""
    return role if any(c.isupper() for c in role.split(" of ")[-1][1:]) else role.casefold()


def read_preference(right: str, strong: bool, lower: bool) -> tuple[str, str]:
    """(value, slot) of what a preference names: a known one ("green tea" → drink), a tool
    (its category), else up to three words and no slot."""
    words = [w for w in tokens(right) if w not in "()"]
    while words and words[0].casefold() in ("a", "an", "the", "my", "some", "to", "having"):
        words = words[1:]
    for n in (3, 2, 1):
        value = " ".join(words[:n]).rstrip(".,").casefold()
        slot = names.preferences().get(names.fold(value))
        if slot and len(words) >= n:
            return value, slot
        known = names.tool(value)
        if known and len(words) >= n:
            return known[0], known[1]
    if not strong and not lower:
        return "", ""
    run = []
    for w in words[:3]:
        if w in ",;:" or w.casefold() in _STOP_AFTER or w.casefold() in ("over", "than"):
            break
        run.append(w.rstrip("."))
    value = " ".join(run)
    if not value or names.never_a_name(value.split()[0]) or value.casefold() in lx.NOT_OBJECTS:
        return "", ""
    return (value if any(map(capitalised, run)) else value.casefold()), ""


def read_event(left: str) -> str:
    """The event the words before a verb name ("the team offsite", "our Q3 review",
    "PyCon"): ending in an event word, or a capitalised name."""
    words = tokens(left)
    while words and words[-1].casefold() in ("is", "was", "has", "been", "now", "also", "still"):
        words.pop()
    run: list[str] = []
    for w in reversed(words):
        if w in ",;:()" or w.casefold() in ("the", "our", "my", "a", "an", "this", "that", "and"):
            break
        if w.casefold() in STOPWORDS or len(run) >= 4:
            break
        run.insert(0, w)
    if not run:
        return ""
    phrase = " ".join(run)
    if event_head().search(phrase):
        return names.clean_name(phrase) or phrase.casefold()
    if all(capitalised(w) for w in run):
        return names.clean_name(phrase)
    return ""
