"""Query text as search terms: words, stopwords, a light stemmer, FTS5 match strings, the
prefixes of an unfinished word, and which terms a text contains (to explain a match)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

TERM = re.compile(r"[^\W_]+")


MAX_TERM_CHARS = 64


def _words(text: str) -> list[str]:
    return text.split()


NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|nowhere|neither|nor|without|cannot|dont|doesnt|"
    r"didnt|isnt|arent|wasnt|werent|wont|cant|couldnt|shouldnt|wouldnt|mustnt|hasnt|havent|"
    r"hadnt)\b|n['’]t\b"
)
"""A word that negates what it is said with (folded text): two texts that differ in one are not
the same fact, and a summary never drops one."""
STOPWORDS = frozenset(
    _words(
        """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    """
    )
    # What the tokenizer leaves of contractions and possessives ("don't", "friend's", "I've").
    + _words(
        "s t d ll m re ve o y ain aren couldn didn doesn don hadn hasn haven isn mightn mustn "
        "needn shan shouldn wasn weren wouldn"
    )
)


def query_terms(
    query: str, max_terms: int, drop: frozenset[str] | set[str] = frozenset()
) -> list[str]:
    """Distinct lower-case terms; stopwords (and `drop`) left out unless nothing else is left."""
    words = [w.casefold()[:MAX_TERM_CHARS] for w in TERM.findall(query)]
    content = [w for w in words if w not in STOPWORDS and w not in drop]
    return list(dict.fromkeys(content or words))[:max_terms]


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper used to explain matches (FTS5 itself uses Porter); cached, as
    every query stems its terms for the tree, the tags and each explanation."""
    for suffix in ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def fts_match(
    terms: Sequence[str], prefixes: Sequence[str] = (), pairs: Sequence[tuple[str, str]] = ()
) -> str:
    """An FTS5 query matching any of the quoted terms, any word starting with one of the quoted
    `prefixes`, or any of the `pairs` as a phrase (never FTS5 syntax from the user)."""
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms]
    quoted += ['"' + f"{a} {b}".replace('"', '""') + '"' for a, b in pairs]
    quoted += ['"' + p.replace('"', '""') + '"*' for p in prefixes]
    return " OR ".join(quoted)


def adjacent_pairs(query: str, terms: Sequence[str]) -> list[tuple[str, str]]:
    """Two search terms side by side in the query ("cocktail recipe", not "try … weekend"
    across a dropped word): searched as a phrase too, a memory that has them side by side
    scores that phrase's BM25 on top of the words'."""
    words = [w.casefold()[:MAX_TERM_CHARS] for w in TERM.findall(query)]
    wanted = set(terms)
    found = [(a, b) for a, b in pairwise(words) if a in wanted and b in wanted and a != b]
    return list(dict.fromkeys(found))


MIN_PREFIX = 2


def prefix_variants(word: str) -> list[str]:
    """Search-as-you-type: the unfinished last word as FTS5 prefixes. The index holds Porter
    stems, so a prefix that runs past a word's stem ("deployi" of "deploying", indexed as
    "deploy") finds nothing by itself: up to two shorter prefixes (never under four letters)
    join it, and a memory matching more of them ranks higher."""
    if len(word) < MIN_PREFIX:
        return []
    shortest = min(len(word), max(4, len(word) - 2))
    return [word[:n] for n in range(len(word), shortest - 1, -1)]


def unfinished_word(query: str, terms: Sequence[str]) -> str | None:
    """The query's last term if the query ends inside it (no space typed after it yet)."""
    words = TERM.findall(query)
    if not terms or not words or not query[-1:].strip() or not query.rstrip().endswith(words[-1]):
        return None
    last = words[-1].casefold()[:MAX_TERM_CHARS]
    return last if terms[-1] == last else None


def matched_terms(
    text: str, stems: dict[str, str], prefixes: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """Which query terms (values of `stems`, keyed by their stem) a text contains: a stem at a
    word start followed by at most four more letters ("deadline" finds "deadlines", "game"
    finds "gaming"), or by any number for the keys in `prefixes` (an unfinished word). An
    approximation of Porter stemming made only to explain; plain substring searches (no regex
    built per query)."""
    folded = text.casefold()
    size = len(folded)
    found = []
    for s, term in stems.items():
        at = folded.find(s)
        while at >= 0:
            if at == 0 or not folded[at - 1].isalnum():  # a word start: check what follows
                end = at + len(s)
                if s in prefixes:
                    found.append(term)
                    break
                tail = end
                while tail < size and tail - end <= 4 and folded[tail].isalnum():
                    tail += 1
                if tail - end <= 4:
                    found.append(term)
                    break
            at = folded.find(s, at + 1)
    return tuple(dict.fromkeys(found))
