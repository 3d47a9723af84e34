"""Texts as sentences and clauses ("I moved to Leeds and now work at Globex" is two
statements), and how a clause states its relation: negated, tentative, a correction, or of
the past."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from tiermem.core.graph import lexicon as lx
from tiermem.core.graph.patterns import alt, cue

_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_ABBREVIATION = re.compile(r"\b(?:St|Dr|Mr|Mrs|Ms|Jr|Sr|vs|Mt|e\.g|i\.e|approx|ca)\.$", re.I)
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?P<who>user|assistant|human|ai|system|bot|agent|model|me|you|tool)"
    r"(?:\*\*)?:\s+",
    re.I,
)
_CLAUSE_VERBS = (
    "work works worked working live lives lived living moved move moving started start joined "
    "join left quit use uses used using lead leads led report reports reported prefer prefers "
    "switched switch became become got relocated am is was have has just also recently still "
    "drink drinks manage manages run runs own owns"
)
_NOW = re.compile(r"\b(?:now|currently|these\s+days|nowadays|at\s+the\s+moment|today)\b", re.I)
_NEGATION_BEFORE = re.compile(
    r"(?:\bnot|\bno\s+longer|n['’]t|\bnever|\bnolonger|\bno\s+more)(?:\s+\w+){0,2}\s*$", re.I
)

_IF = re.compile(r"\b(?:if|unless|in case|ever)\b", re.I)
"""A what-if: a relation it states never holds."""
_BE = re.compile(r"(?:\b(?:am|is|are|be|been)|['’](?:m|s|re))\s*(?:\w+ly\s+)?$", re.I)
_MODAL: tuple[str, ...] = (
    *("might", "may", "could", "maybe", "possibly", "probably", "perhaps", "if", "would"),
    *("thinking", "considering", "'d", "unless", "in case"),
)
_NOT_BUT = re.compile(r"\bnot\s+\w+\s+but\b", re.I)
_WRONG = re.compile(
    r",\s*not\s+(?:in\s+|at\s+|to\s+|on\s+|for\s+)?(?P<w>[\w'’.-]+(?:\s+[A-Z0-9][\w'’.-]*)?)"
    r"|\bnot\s+(?:in\s+|at\s+|to\s+|on\s+|for\s+)?(?P<w2>[\w'’.-]+(?:\s+[A-Z0-9][\w'’.-]*)?)"
    r"\s*,?\s*but\b",
    re.I,
)


@dataclass(frozen=True)
class Clause:
    """One statement of a sentence."""

    text: str
    sentence: str
    now: bool
    """It says "now" or "currently": its date is the text's, not an earlier clause's."""


@dataclass
class Sentence:
    text: str
    speaker: str
    """The label a transcript line starts with ("user", "assistant"), or ""."""
    clauses: list[Clause] = field(default_factory=list)


@dataclass(frozen=True)
class Flags:
    """How a clause states its relation."""

    names: frozenset[str]
    modal: bool
    """A doubt that makes even a scheduled event tentative ("might be on Friday")."""
    wrong: str
    """The value a correction says was wrong ("not Lees")."""


@cache
def _clause_split() -> re.Pattern[str]:
    verbs = alt(tuple(_CLAUSE_VERBS.split()))
    starts = r"(?:i|we|he|she|they|it|now|then|also|later|recently|since|"
    starts += rf"last|next|this|today|yesterday|{verbs})\b"
    named = rf"[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)?\s+(?i:{verbs}|now|has|had|will|just|still)\b"
    return re.compile(
        rf"(?i:,?\s+(?:and|but|so|while|whereas|although|though|yet|plus|then)\s+)"
        rf"(?=(?i:(?:then\s+|also\s+|now\s+|later\s+)?{starts})|{named})"
        rf"|(?i:,\s+(?=(?:i|we|he|she|they|my|and|but|then|so)\b))|\s+-+\s+|\s+—\s+"
    )


def split(text: str) -> list[Sentence]:
    """The sentences of a text, each cut into clauses."""
    out = []
    for raw in _sentences(text):
        speaker = ""
        label = _LABEL.match(raw)
        if label:
            speaker, raw = label.group("who").casefold(), raw[label.end() :]
        sentence = Sentence(raw, speaker)
        for part in _clause_split().split(raw):
            part = part.strip(" ,")
            if part:
                sentence.clauses.append(Clause(part, raw, bool(_NOW.search(part))))
        out.append(sentence)
    return out


def _sentences(text: str) -> list[str]:
    """Sentences, not cut after an abbreviation ("Dr. Chen", "St. Mary's")."""
    out: list[str] = []
    for piece in _SENTENCE.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] += " " + piece
        else:
            out.append(piece)
    return out


def clause_flags(clause: Clause, left: str, verb: str, predicate: str) -> Flags:
    """Negated, tentative, correction or past, from the words around a verb."""
    found: set[str] = set()
    before = f"{left} {verb}"
    if _NEGATION_BEFORE.search(left) or cue(lx.NEGATION_CUES).search(clause.text):
        found.add("negated")
    tentative = cue(lx.TENTATIVE_CUES).search(before) is not None
    progressive = any(w in verb.casefold().split() for w in lx.FUTURE_PROGRESSIVE)
    bare = not left.strip()  # "moving back to accra in january": chat drops the "I'm"
    if tentative or (progressive and (_BE.search(left) or bare) and not clause.now):
        found.add("tentative")
    if cue(lx.PAST_CUES).search(left) and not clause.now:
        found.add("past")
    modal = cue(_MODAL).search(before) is not None
    wrong = ""
    hard = cue(lx.CORRECTION_CUES).search(clause.sentence) or _NOT_BUT.search(clause.sentence)
    soft = cue(lx.SOFT_CORRECTION_CUES).search(clause.sentence)
    if hard or (soft and _WRONG.search(clause.sentence)):
        found.add("correction")
        m = _WRONG.search(clause.text) or _WRONG.search(clause.sentence)
        wrong = (m.group("w") or m.group("w2") or "") if m else ""
    elif _WRONG.search(clause.text) and "negated" not in found:
        m = _WRONG.search(clause.text)
        if m and m.group("w") and m.start() > len(left):
            found.add("correction")
            wrong = m.group("w")
    if "tentative" in found and _IF.search(clause.sentence):
        found.discard("correction")  # "if we ever go back, I'd live in Gdańsk, not Wrocław"
        found.add("hypothetical")  # never holds, whatever date it names ("in a week")
        wrong = ""
    if predicate == "happens_on" and not modal:
        found.discard("tentative")
    return Flags(frozenset(found), modal, wrong.strip(".,;:!?"))
