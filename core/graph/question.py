"""A question to the graph ("where does Sam live", "who is my manager", "what does Orchard use
for its queue"): whom it asks about (a name, a first name, an alias, or "I"/"my" for the user)
and which predicates answer it (the wh-word and the verb)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from tiermem.core.graph import slots
from tiermem.core.graph.lexicon import CATEGORY_WORDS, PREFERENCE_CATALOGUE
from tiermem.core.graph.names import fold, keys, name_key
from tiermem.core.graph.phrases import OWNER
from tiermem.core.graph.store import GraphStore
from tiermem.core.terms import STOPWORDS

MAX_NGRAM = 4
_TOKEN = re.compile(r"https?://\S+|[\w.&'’+-]+")
_WH = re.compile(r"\b(?:who|whom|whose|where|what|which|when|how)\b|\?", re.I)
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself|we|our|us|i'm|i’m|im)\b", re.I)
_HINTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bwork(?:s|ing|ed)?\s+on\b|\bprojects?\b", ("works_on",)),
    (r"\bteam\s*lead(?:er)?\b|\blead(?:s|ing)?\s+(?:my|our|the)\s+team\b", ("team_lead",)),
    (
        r"\b(?:manager|boss|reports?|reporting|supervisor|manages\s+(?:me|him|her))\b",
        ("reports_to",),
    ),
    (
        r"\b(?:live|lives|living|lived|based|resides?|home|city|town|located|moved|move)\b",
        ("lives_in",),
    ),
    (r"\b(?:work|works|working|worked|employer|employed|company|job|hired)\b", ("works_at",)),
    (r"\b(?:role|title|position)\b|\bwhat\s+(?:does|do)\s+.+\s+do\b", ("role",)),
    (
        r"\b(?:lead|leads|leading|own|owns|owner|runs|in\s+charge|responsible|maintains|"
        r"maintainer|heads)\b",
        ("leads",),
    ),
    (r"\b(?:use|uses|using|used|built\s+(?:on|with)|stack|tech|tools?)\b", ("uses",)),
    (r"\b(?:prefer|prefers|preference|like|likes|favou?rite|drink|drinks)\b", ("prefers",)),
    (r"^\s*when\b|\bwhat\s+(?:date|day)\b|\bscheduled\b|\bhappen", ("happens_on",)),
)
_NOT_NAMES = frozenset(
    [
        "who",
        "whom",
        "whose",
        "where",
        "what",
        "which",
        "when",
        "how",
        "does",
        "do",
        "did",
        "is",
        "are",
        "was",
        "were",
        "the",
        "live",
        "lives",
        "work",
        "works",
        "use",
        "uses",
        "used",
        "using",
        "prefer",
        "prefers",
        "like",
        "now",
        "currently",
        "today",
        "lead",
        "leads",
        "manager",
        "boss",
        "team",
        "role",
        "title",
        "job",
        "company",
        "city",
        "queue",
        "database",
        "cache",
    ]
)


@dataclass(frozen=True)
class Question:
    """What a question asks."""

    predicates: tuple[str, ...]
    """Predicates (or families: "uses" is every uses_<category>) that answer it."""
    first_person: bool
    wh: bool
    """It is worded as a question (a wh-word or a question mark)."""


@cache
def _hints() -> tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]:
    return tuple((re.compile(p, re.I), preds) for p, preds in _HINTS)


@cache
def _categories() -> dict[str, str]:
    words = {w: c for c, ws in CATEGORY_WORDS.items() for w in ws}
    return words | {c: c for c in CATEGORY_WORDS}


@cache
def _preference_kinds() -> dict[str, str]:
    kinds = {fold(v): k for k, vs in PREFERENCE_CATALOGUE.items() for v in vs}
    return kinds | {k.replace("_", " "): k for k in PREFERENCE_CATALOGUE}


def parse(text: str) -> Question:
    """The predicates a question's words point to ("where … live" → lives_in)."""
    found: list[str] = []
    for regex, predicates in _hints():
        if regex.search(text):
            found += [p for p in predicates if p not in found]
    folded = " " + " ".join(re.findall(r"[\w/-]+", fold(text))) + " "
    category = next((c for w, c in _categories().items() if f" {w} " in folded), "")
    if category and ("uses" in found or not found or "happens_on" not in found):
        found = [p for p in found if p != "uses"] + [slots.uses(category)]
    kind = next((k for w, k in _preference_kinds().items() if f" {w} " in folded), "")
    if kind and "prefers" in found:
        found = [p if p != "prefers" else slots.prefers(kind) for p in found]
    if "works_on" in found and "works_at" in found and re.search(r"\bon\b", text, re.I):
        found.remove("works_at")
    if "team_lead" in found and "leads" in found:
        found.remove("leads")
    first = _FIRST_PERSON.search(text) is not None
    return Question(tuple(found), first, _WH.search(text) is not None)


def wanted(predicate: str, predicates: tuple[str, ...]) -> bool:
    """`predicate` answers a question asking about `predicates` ("uses" covers uses_queue)."""
    if not predicates:
        return True
    base = slots.family(predicate)[0]
    return predicate in predicates or base in predicates


def mentioned(graph: GraphStore, text: str) -> list[str]:
    """The entities a text names (longest names first, a first name only one person has),
    then the user when it says "I" or "my"."""
    return [entity for entity, _ in mentioned_at(graph, text)]


def mentioned_at(graph: GraphStore, text: str) -> list[tuple[str, int]]:
    """`mentioned`, each with where in the text it is named (the names looked up at once)."""
    tokens = [(m.group(0), m.start()) for m in _TOKEN.finditer(text)]
    phrases = _phrases(tokens)
    known = graph.lookup_many({k for _, _, phrase in phrases for k in keys(phrase)})
    found: dict[str, int] = {}
    taken: set[int] = set()
    lower, tries = text.islower(), 0
    for i, n, phrase in phrases:
        if taken & set(range(i, i + n)):
            continue
        entity = next((known[k] for k in keys(phrase) if k in known), None)
        if entity is None and n == 1 and (phrase[:1].isupper() or lower) and tries < 5:
            tries += 1
            entity = graph.first_name(phrase)
        if entity and entity not in found:
            found[entity] = tokens[i][1]
            taken |= set(range(i, i + n))
    me = _FIRST_PERSON.search(text)
    owner = graph.lookup(OWNER) if me else None
    if me and owner and owner not in found:
        found[owner] = me.start()
    return sorted(found.items(), key=lambda item: (item[0] == owner, item[1]))


def _phrases(tokens: list[tuple[str, int]]) -> list[tuple[int, int, str]]:
    """(start, words, phrase) of every run of up to four tokens that may be a name, longest
    first."""
    out = []
    for n in range(MAX_NGRAM, 0, -1):
        for i in range(len(tokens) - n + 1):
            words = [t for t, _ in tokens[i : i + n]]
            if n == 1 and (fold(words[0]) in STOPWORDS or fold(words[0]) in _NOT_NAMES):
                continue
            phrase = re.sub(r"['’]s$", "", " ".join(words)).rstrip(".?!,")
            if name_key(phrase):
                out.append((i, n, phrase))
    return out


def inverse(text: str, at: int, predicates: tuple[str, ...]) -> bool:
    """The entity named at `at` is the object asked about: it follows the verb ("who works
    at Globex", "who leads Ledgerly"), unlike "where does Sam live"."""
    if not predicates or "happens_on" in predicates:
        return False
    if not text.lstrip().casefold().startswith(("who", "what", "which")):
        return False
    verbs = [m.start() for regex, _ in _hints() for m in regex.finditer(text)]
    return bool(verbs) and min(verbs) < at
