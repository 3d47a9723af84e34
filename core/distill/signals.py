"""Word classes that tell what a sentence is, not which phrasing it uses: the person speaking of
themselves, a change, a date or number, a named entity, content beyond filler; and whether an
assistant's sentence is only an acknowledgement, a promise or an echo."""

from __future__ import annotations

import re

from tiermem.core.distill.cues import (
    ACK_LEAD,
    ACK_STATE,
    ASSISTANT_SELF,
    CHANGE_WORDS,
    DATE,
    DATE_WORDS,
    FAREWELL,
    FILLER,
    FIRST_PERSON,
    FIRST_PERSON_SINGULAR,
    GREETING_WORDS,
    NOT_NAMES,
    REQUEST,
    RESTATE,
    TALK_WORDS,
    TOOLS,
    VAGUE,
    WORD,
)
from tiermem.core.terms import STOPWORDS

_NAME_AFTER = frozenset({"is", "was", "has", "had", "now", "just", "and", "will", "said"})
"""Words after a sentence's first word that show it is a name ("Ledgerly now uses …")."""
_CAPITAL = re.compile(r"[A-Z]")


def tokens(text: str) -> list[str]:
    """The words of a text as written (curly apostrophes made straight)."""
    return WORD.findall(text.replace("’", "'"))


def meaningful_words(text: str) -> list[str]:
    """The words of a text without stopwords, in lower case."""
    return [w for w in (t.casefold() for t in tokens(text)) if w not in STOPWORDS]


def content_words(text: str) -> set[str]:
    """The words that say what a sentence is about: no stopwords, cue filler, vague words,
    greetings or date words."""
    return {
        w
        for w in meaningful_words(text)
        if w not in FILLER and w not in VAGUE and w not in DATE_WORDS and w not in GREETING_WORDS
    }


def first_person(text: str, singular: bool = False) -> bool:
    """The person (or, unless `singular`, their team) is the subject: I, my, we, our and their
    contractions."""
    words = FIRST_PERSON_SINGULAR if singular else FIRST_PERSON
    return any(w.casefold() in words for w in tokens(text))


def has_change(text: str) -> bool:
    """A change verb or marker: moved, joined, quit, switched, now, new, no longer…"""
    return any(w.casefold() in CHANGE_WORDS for w in tokens(text))


def has_date(text: str) -> bool:
    """A date, a day, a time or any number."""
    return bool(DATE.search(text)) or any(c.isdigit() for c in text)


def names(text: str) -> list[str]:
    """Named entities: capitalised words that are not just the sentence's first word (unless a
    name follows it or it reads as one), internal capitals and acronyms, and known tools."""
    words = tokens(text)
    out: list[str] = []
    for i, word in enumerate(words):
        bare = word.removesuffix("'s")
        if bare.casefold() in TOOLS:
            out.append(bare)
            continue
        if bare in NOT_NAMES or len(bare) < 2:
            continue
        if not bare[0].isupper() or bare.casefold() in STOPWORDS:
            continue
        inner = bool(_CAPITAL.search(bare[1:])) or any(c.isdigit() for c in bare)
        if i > 0 or inner or word.endswith("'s") or _named_start(words):
            out.append(bare)
    return list(dict.fromkeys(out))


def _named_start(words: list[str]) -> bool:
    """Whether a sentence's first word is a name: another capitalised word or a verb of
    state follows it ("Diego Alvarez is…", "Ledgerly now uses…", "Northwind signed…")."""
    if len(words) < 2:
        return False
    after = words[1]
    return (
        (after[:1].isupper() and after not in NOT_NAMES)
        or after.casefold() in _NAME_AFTER
        or (after.endswith(("ed", "s")) and len(after) > 3)
    )


def is_statement(text: str) -> bool:
    """A short statement worth keeping: someone (the person, or a named entity) and a change, a
    date or number, or a name, with at least one word of content. "I moved to Porto", "Ledgerly
    now uses Postgres", "I accepted the Northwind offer"; not "Thanks Diego!"."""
    if len(meaningful_words(text)) < 2 or not content_words(text):
        return False
    found = names(text)
    me = first_person(text)
    if not (me or found):
        return False
    return has_change(text) or has_date(text) or (me and bool(found)) or len(found) >= 2


def about_the_talk(text: str) -> bool:
    """Whether a sentence only thanks for or weighs the other side's answer."""
    words = content_words(text)
    return bool(words) and words <= TALK_WORDS


def strip_ack(text: str) -> str:
    """The sentence without its leading acknowledgement or greeting ("Great, we decided…" is
    "we decided…", the person's own words); '' when nothing else is left."""
    match = ACK_LEAD.match(text)
    return text[match.end() :].strip() if match else text


def is_request(text: str) -> bool:
    """A request to the assistant that says nothing of the person ("I'm looking for some snack
    ideas", "Can you suggest a restaurant"); one that does ("…tips for my current project, a
    Ford Mustang model") keeps what it says."""
    match = REQUEST.match(text)
    if not match:
        return False
    rest = text[match.end() :]
    return not (first_person(rest) or names(rest) or has_date(rest))


def is_farewell(text: str) -> bool:
    return bool(FAREWELL.match(text))


def is_acknowledgement(text: str) -> bool:
    """An assistant's sentence that only acknowledges, promises, reports its own action or
    restates the person's words: never knowledge ("Got it, I'll remind you on Dec 10")."""
    rest = strip_ack(text.strip())
    if not rest:
        return True
    return bool(
        ASSISTANT_SELF.match(rest)
        or ACK_STATE.match(rest)
        or RESTATE.search(rest)
        or FAREWELL.match(rest)
    )
