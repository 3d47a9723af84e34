"""Two statements of one frame with another value: "my manager is Priya" → "my new manager is
Diego", "the offsite is on March 3" → "the offsite moved to March 10", "we use MySQL for
Ledgerly" → "Ledgerly is on Postgres now". Offline and word-class based: a statement's
*frame* is its content words once values, change words and filler are taken out; its
*values* are the names, tools, dates and times it states. `replaces` decides whether a newer
claim replaces an older one; `core.supersession` acts on it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Final

from tiermem.core import roles, subjects
from tiermem.core.frame_words import (
    _APPOSED,
    _BASED_IN,
    _COMMON_STARTS,
    _GOT_JOB,
    _HANDLE,
    _KEBAB,
    _MOVE_TO,
    _MOVED_BARE,
    _NOT_NAMES,
    _POSSESSIVE,
    _POSSESSIVES,
    _SLOT_SURFACE,
    _WORD,
    _WORK_ON,
    _WRONG,
    CHANGE,
    CORRECTION,
    EVENT_STEMS,
    FILLER,
    FIRST_PERSON,
    FUTURE,
    HERE_IN,
    HYPOTHETICAL,
    LEAVES,
    NEGATION,
    RELATIVES,
    SLOT_STEMS,
    SLOT_WORDS,
    SPEAKER,
    TOOL_KINDS,
    fold_accents,
)
from tiermem.core.frame_words import fold as fold
from tiermem.core.stated_dates import DATE, valid_from
from tiermem.core.temporal import MONTHS, WEEKDAYS
from tiermem.core.terms import STOPWORDS, stem


@dataclass(frozen=True)
class Claim:
    """What one statement says, as frames compare it."""

    subject: str
    """"user" for the first person, else the statement's first name (folded)."""
    frame: frozenset[str]
    values: frozenset[str]
    kinds: frozenset[str]
    """What its tools are for (database, queue, drink…)."""
    corrected: frozenset[str]
    """Values it says were wrong ("Leeds, not Lees": lees)."""
    change: bool
    negated: bool
    hypothetical: bool
    correction: bool
    future: bool
    """A planned change: it holds from `valid_from` on (never without one)."""
    valid_from: float | None
    """When it became true, when the text names a date."""
    left: frozenset[str] = frozenset()
    """Values it says were left behind ("switched from coffee to tea": coffee)."""


_CLAUSE = re.compile(
    r"(?<=[.!?;])\s+|\n+|\s+[—–-]\s+|\s*\(\s*|\)\s*|,\s+(?=(?:who|which|whose)\b)|"
    r",?\s+but\s+(?=(?:the plan|we|i|i'm|it|they|he|she)\b)",
    re.IGNORECASE,
)
"""Sentences, dashes, brackets, relative clauses ("my sister, who lives in Leeds") and a "but"
before a new subject ("it runs on AWS but the plan is to move"): each says something of its
own, about its own subject."""


@lru_cache(maxsize=8192)
def claims_of(text: str, said_at: float) -> tuple[Claim, ...]:
    """The claims of each sentence of a text (a long note says several things); cached, as a
    stored memory is compared again with every later one that shares its words."""
    if speaker := SPEAKER.match(text):  # "Dana Kim said: moving to austin": Dana's, not mine
        who = fold(speaker["who"].split()[0])
        said = claims_of(text[speaker.end() :], said_at)
        return tuple(replace(c, subject=who) if c.subject == "user" else c for c in said)
    parts = [p for p in _CLAUSE.split(text) if p and p.strip()]
    found: list[Claim] = []
    for part in parts[:12]:
        claim = claim_of(part, said_at)
        if claim is not None and found and _REFERS_BACK.match(part):
            claim = _continued(found[-1], claim)
        if claim is not None and claim.subject in _PRONOUNS:
            claim = replace(claim, subject=_relative_before(found) or claim.subject)
        if claim is not None:
            found.append(claim)
    for m in HERE_IN.finditer(text) if "here" in text.casefold() else ():  # "here in Leeds"
        if place := claim_of(f"I live in {(m['place'] or m['there']).title()}", said_at):
            found.append(place)
    return tuple(found)


_REFERS_BACK = re.compile(r"\s*(?:it|it's|it’s|its|it is|that's|that is)\b", re.IGNORECASE)
"""A sentence about what the one before named ("I'm moving the party. It's Oct 31 now")."""


_PRONOUNS = frozenset({"~he", "~she", "~his", "~her", "~he's", "~she's"})


def _relative_before(found: list[Claim]) -> str | None:
    """The relative a text named last ("My husband Chidi … He is an architect"): whom its
    "he" or "she" is."""
    for claim in reversed(found):
        if claim.subject[1:] in RELATIVES:
            return claim.subject
    return None


def _continued(before: Claim, claim: Claim) -> Claim:
    """A claim that says "it" about the attribute the claim before it named takes it over."""
    named = {w for w in before.frame if w.startswith("~") or w in SLOT_STEMS}
    if not claim.values or not named or named & claim.frame:
        return claim
    taken = replace(claim, subject=before.subject, frame=claim.frame | named)
    return _dated_event(taken) or taken


@lru_cache(maxsize=1)
def _cue() -> re.Pattern[str]:
    """Any word `says_change` could build on, in one pattern (most texts have none)."""
    words = sorted(
        {*CHANGE, *SLOT_WORDS, *TOOL_KINDS, "moving", "relocating"}, key=len, reverse=True
    )
    return re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE)


def may_say_change(text: str) -> bool:
    """A cheap first look: whether a text has a word any statement of change needs."""
    return bool(
        _cue().search(text)
        or NEGATION.search(text)
        or CORRECTION.search(text)
        or FUTURE.search(text)
    )


def says_change(claim: Claim) -> bool:
    """Whether a statement itself says something changed or holds one value at a time (where
    someone lives or works, their manager, role or name; a tool for a job): a store compares
    these at once, the rest at the next consolidation."""
    owned = any(w.startswith("~") for w in claim.frame) or bool(claim.kinds)
    said = claim.change or claim.negated or claim.correction or claim.future
    return bool(claim.values) and (owned or said or bool(claim.corrected))


def can_replace(claim: Claim) -> bool:
    """Whether a claim has what `replaces` needs from either side of a change: a one-value
    attribute, a tool kind, a change word, a negation or a correction (most sentences have
    none, and are never compared)."""
    anchored = any(w.startswith("~") for w in claim.frame) or bool(SLOT_STEMS & claim.frame)
    return bool(
        claim.values
        and (anchored or claim.kinds or claim.change or claim.negated or claim.corrected)
    )


def claim_of(text: str, said_at: float) -> Claim | None:
    """The claim of a statement, or None when it has no frame (a greeting, a bare name)."""
    words = _WORD.findall(text)
    if not words:
        return None
    folded = [_POSSESSIVE.sub("", w.casefold().strip(".'’")) for w in words]
    if _WORK_ON.search(text):  # working on a project is not working at an employer
        folded = ["project" if w.startswith("work") else w for w in folded]
    values = _values(text, words)
    value_words = {v for value in values for v in value.split()}
    slots = {
        SLOT_WORDS[w] for i, w in enumerate(folded) if w in SLOT_WORDS and _names_slot(folded, i)
    }
    moved = (
        _MOVE_TO.search(text)
        or _BASED_IN.search(text)
        or _MOVED_BARE.search(text)
        or _moved_to_lower(text)
        or _in_lower(text)
    )
    if moved and not DATE.search(text):
        slots.add("~residence")
    if "~manager" in slots:
        values |= _apposed(text)
    if slots and not values:
        values = _lower_values(text)
    value_words = {v for value in values for v in value.split()}
    role = roles.stated_role(text)
    if role is None and "~role" in slots and all(_DAYLIKE.fullmatch(v) for v in values):
        slots.discard("~role")  # "no tuesday nights with the new role" states no role
    if held := _held(text, role, slots):
        values = held
        value_words = {w for v in values for w in v.split()} | {w for w in folded if w.isupper()}
    frame = frozenset(slots) | frozenset(
        stem(w)
        for i, w in enumerate(folded)
        if w not in SLOT_WORDS and not _referred_to(folded, i)
        if w not in STOPWORDS
        and w not in CHANGE
        and w not in FILLER
        and w not in FIRST_PERSON
        and w not in value_words
        and not w[0].isdigit()
        and w not in MONTHS
        and w not in WEEKDAYS
        and len(w) > 1
    )
    if not frame and not values:
        return None
    return _claim(
        text,
        said_at,
        subject="user" if role and role.mine else subjects.subject_of(text, words, folded),
        frame=frame,
        values=frozenset(values),
        kinds=frozenset(TOOL_KINDS[v] for v in values if v in TOOL_KINDS),
        corrected=_corrected(text, values),
        change=any(w in CHANGE for w in folded),
        negated=bool(NEGATION.search(text)),
        hypothetical=bool(HYPOTHETICAL.search(text)),
        future=bool(FUTURE.search(text)) and not _past(folded),
        correction=bool(CORRECTION.search(text)),
        valid_from=None,
    )


def _claim(text: str, said_at: float, **fields: Any) -> Claim:
    """The claim with when it became true and what it left behind. A date that is an event's
    value ("the deadline is 14 October") says when it happens, not when the fact began; a date
    left behind ("moved it from 14 October") is neither."""
    low = text.casefold()
    leaving = list(LEAVES.finditer(text)) if any(w in low for w in _LEAVING_WORDS) else []
    fields["left"] = _left(leaving, fields["values"]) if leaving else frozenset()
    if _is_dated_event(fields["frame"], fields["values"], fields["corrected"]):
        return Claim(**{**fields, "future": False, "valid_from": None})
    spoken = text
    for m in reversed(leaving):  # without what it left ("from 14 October"): not its start
        spoken = spoken[: m.start("left")] + spoken[m.end() :]
    ahead = fields["future"] or bool(FUTURE.search(text))
    return Claim(**{**fields, "valid_from": valid_from(spoken, said_at, ahead=ahead)})


_LEAVING_WORDS = (
    "from",
    "abandon",
    "ditch",
    "drop",
    "replac",
    "instead",
    "rather",
    "using",
    "not",
    " off ",
)
"""A word every `LEAVES` match holds: most statements have none, and skip the pattern."""
_WRONG_DAY = re.compile(r"\bnot (?:the )?(\d{1,2})(?:st|nd|rd|th)\b", re.IGNORECASE)
"""A day said wrong, in the month of the right one ("tuesday oct 20 not the 21st")."""


def _corrected(text: str, values: set[str]) -> frozenset[str]:
    """The values a statement says were wrong ("Leeds, not Lees"; "oct 20 not the 21st")."""
    if "not" not in text.casefold():
        return frozenset()
    wrong = {fold_accents(w.casefold()) for w in _WRONG.findall(text)}
    months = {v[:2] for v in values if _DATE_VALUE.fullmatch(v)}
    return frozenset(
        wrong | {f"{m}-{int(d):02d}" for d in _WRONG_DAY.findall(text) for m in months}
    )


def _dated_event(claim: Claim) -> Claim | None:
    """An event's date is its value: it holds from when it was said, planned or not."""
    if _is_dated_event(claim.frame, claim.values, claim.corrected):
        return replace(claim, future=False, valid_from=None)
    return None


def _is_dated_event(
    frame: frozenset[str], values: frozenset[str], corrected: frozenset[str]
) -> bool:
    """A date that is an event's ("the launch is oct 20") or a corrected date's value."""
    if not (frame & EVENT_STEMS or corrected):
        return False
    dated = any(_DATE_VALUE.fullmatch(v) for v in values)
    return dated and (bool(frame & EVENT_STEMS) or any(_DATE_VALUE.fullmatch(v) for v in corrected))


_DATE_VALUE = re.compile(r"\d\d-\d\d")
_REFERENCES = frozenset({"before", "after", "until", "past", "missed", "beat"})


def _referred_to(folded: list[str], at: int) -> bool:
    """An event named as a point of reference ("submitted a day before the deadline"): the
    statement says nothing of its date."""
    return at >= 2 and folded[at - 1] == "the" and folded[at - 2] in _REFERENCES


def _left(leaving: list[re.Match[str]], values: frozenset[str]) -> frozenset[str]:
    """Of a statement's values, those its `LEAVES` matches say were left behind."""
    spans = [m["left"] for m in leaving]
    dated = {v for span in spans for v in _values(span, _WORD.findall(span))}
    words = [f" {' '.join(_WORD.findall(fold(span)))} " for span in spans]
    worded = {v for v in values if any(f" {v} " in span for span in words)}
    return frozenset(dated | worded) & values


def _held(text: str, role: roles.Role | None, slots: set[str]) -> set[str]:
    """The values a job or a role a statement states gives, their slots added to `slots`
    ("I GOT THE TIDAL JOB", "Aisha made me design manager"); none when it states neither."""
    held: set[str] = set()
    if (job := _GOT_JOB.search(text)) and job["org"].casefold() not in _NOT_EMPLOYERS:
        slots.add("~employer")
        slots.discard("~manager")  # "GOT THE TIDAL JOB, social media manager!": a title
        held = {fold_accents(job["org"].casefold())}
    if role is not None:  # the role is the value
        if set(role.role.split()) & {"lead", "manager", "head"}:
            slots.discard("~manager")  # "made team lead" names no one's manager
        slots.add("~role")
        held = {role.role} | ({fold_accents(role.org)} if role.org else set())
        if role.org:
            slots.add("~employer")  # "i'm the social media coordinator at glowbar"
    return held


def replaces(new: Claim, old: Claim) -> bool:
    """Whether `new` states another value of what `old` stated (or closes it)."""
    if new.hypothetical or old.hypothetical or (new.future and new.valid_from is None):
        return False
    if new.corrected & old.values:
        return True  # "actually it's Leeds, not Lees"
    shared = new.frame & old.frame
    union = new.frame | old.frame
    overlap = len(shared) / len(union) if union else 0.0
    same_thing = bool(shared - _NAMING)  # "the cat is called Miso", "a tutor called Lucia"
    owned = any(w.startswith("~") and w != "~name" for w in shared) or (
        "~name" in shared and same_thing
    )
    anchored = owned or bool(SLOT_STEMS & shared)
    kinds = bool(new.kinds & old.kinds) and _same_things(new, old)
    if new.left & old.values and (anchored or kinds or overlap >= 0.3):
        mine = owned or kinds  # a person's home or drink; a deadline is no one's
        return not mine or _same_subject(new, old)  # "moved the deadline from Oct 14 to Nov 4"
    if not _same_subject(new, old):
        return False
    if new.negated:
        named = {v for v in new.values & old.values if not _DAYLIKE.fullmatch(v)}
        return bool(named) and not old.negated  # "stop posting in #general"
    if not new.values - old.values or not old.values - new.values:
        return False
    if new.correction and (overlap >= 0.3 or kinds):
        return True
    if owned:
        return True  # one home, employer, manager or role at a time
    if kinds:
        return new.change or overlap >= 0.5
    if anchored:
        return new.change or overlap >= 0.5
    return new.change and overlap >= 0.6


_NAMING = frozenset({"~name", "user"})
"""What two statements of a name share that says nothing of whose name it is."""
_DAYLIKE = re.compile(r"\d\d-\d\d|[a-z]+day|\d.*")
"""Dates, weekdays and times: a value two statements share by chance."""


def _same_things(new: Claim, old: Claim) -> bool:
    """Two statements of tools are about the same things unless each names others apart from
    its tools ("MySQL for Ledgerly" and "Postgres for Orchard" are two projects' databases)."""
    old_things = {v for v in old.values if v not in TOOL_KINDS}
    new_things = {v for v in new.values if v not in TOOL_KINDS}
    return not old_things or not new_things or bool(old_things & new_things)


def _same_subject(new: Claim, old: Claim) -> bool:
    """One subject, or the user speaking about a thing the other statement is about ("we
    moved Ledgerly to Postgres" / "Ledgerly uses MySQL")."""
    if new.subject == old.subject:
        return True
    return (new.subject == "user" and old.subject in new.values) or (
        old.subject == "user" and new.subject in old.values
    )


def fts_query(claim: Claim) -> str:
    """An FTS5 query for statements that may state the same thing: any word naming one of its
    one-value attributes, its tools' kind, or (a correction) the value it corrects; else its
    frame words."""
    anchors = [w for w in sorted(claim.frame) if w.startswith("~") or w in SLOT_STEMS]
    wrong = [str(int(v[3:])) if _DATE_VALUE.fullmatch(v) else v for v in sorted(claim.corrected)]
    words = _surface([*anchors, *sorted(claim.kinds)]) + wrong  # "not the 21st": "oct 21"
    if claim.negated:  # "stop posting in #general" closes what named #general
        words += sorted(v.lstrip("#@") for v in claim.values if not _DAYLIKE.fullmatch(v))
    if not words:
        words = sorted(claim.frame)
    return _any_of(words)


def fts_query_for(anchors: frozenset[str]) -> str:
    """An FTS5 query for statements of these attributes (slot tokens, one-value frame words,
    tool kinds), however each is said."""
    return _any_of(surface(anchors))


def surface(anchors: frozenset[str]) -> list[str]:
    """The words that say these attributes (folded), however each is said."""
    return _surface(sorted(anchors))


def _surface(anchors: list[str]) -> list[str]:
    """The words that say each anchor: a slot's words, a kind's tools, else the word."""
    words: list[str] = []
    for word in anchors:
        tools = [t for t, k in TOOL_KINDS.items() if k == word]
        words += _SLOT_SURFACE.get(word, [word]) + tools
    return words


def _any_of(words: list[str]) -> str:
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))


def _values(text: str, words: list[str]) -> set[str]:
    """Names, tools, dates and times a statement states (folded, accents kept)."""
    out: set[str] = {h.casefold() for h in _HANDLE.findall(text)}
    out |= {k.casefold() for k in _KEBAB.findall(text)}
    for m in DATE.finditer(text):
        month = MONTHS[(m["m1"] or m["m2"]).casefold()]
        out.add(f"{month:02d}-{int(m['d1'] or m['d2']):02d}")
    shouted = len([w for w in words if len(w) > 2 and w.isupper()]) >= 3  # capitals say nothing
    for i, word in enumerate(words):
        folded = _POSSESSIVE.sub("", word.casefold().strip(".'’"))
        if folded[-1:] == "s" and TOOL_KINDS.get(folded[:-1]) in _COUNTED_KINDS:
            folded = folded[:-1]  # "two espressos"
        if folded in TOOL_KINDS and (
            folded not in _CAPITAL_TOOLS or word[0].isupper() or _names_kind(text, folded)
        ):
            out.add(_tool(folded))
        elif folded in WEEKDAYS or re.fullmatch(r"\d{1,2}(?::\d\d)?(?:am|pm)|\d{1,2}:\d\d", folded):
            out.add(folded)
        elif shouted and word.isupper():
            continue
        elif word[0].isupper() and folded not in FIRST_PERSON and folded not in STOPWORDS:
            if folded in MONTHS or folded in FILLER or folded in CHANGE:
                continue
            if i == 0 and folded in _COMMON_STARTS:
                continue
            out.add(fold_accents(folded))
    return out


_COUNTED_KINDS: Final = frozenset({"drink"})
"""Kinds of things said in the plural too ("two espressos", "lattes")."""
_MOVE_TO_LOWER = re.compile(
    r"\b(?:mov(?:e|ed|ing)|relocat(?:e|ed|ing))\s+(?:back\s+)?(?:to|into|in)\s+([a-zà-ÿ][\w'-]*)",
    re.IGNORECASE,
)
_AFTER_SLOT = re.compile(
    r"\b(?:in|to|at|for|with|is|are|she'?s|he'?s|it'?s)\s+([a-zà-ÿ][\w'-]*)(?:\s+([a-zà-ÿ][\w'-]*))?",
    re.IGNORECASE,
)


def _moved_to_lower(text: str) -> bool:
    """A move to a place written in lower case, as chat does ("kayla moved to sf")."""
    m = _MOVE_TO_LOWER.search(text)
    if m is None or not _placeish(m[1].casefold()) or m[1].casefold() in TOOL_KINDS:
        return False
    before = text[: m.start()].split()[-1:]
    return not (before and before[0].casefold() in _THINGS_MOVED)  # "ci moved to github"


_THINGS_MOVED = frozenset(
    """ci db database repo code site app service it everything deploy deploys hosting server
    servers pipeline data prod staging infra meeting call party launch""".split()  # noqa: SIM905
)

_IN_LOWER = re.compile(
    r"\b(?:i'?m|i am|we'?re|we are)\s+(?:now\s+|still\s+)?(?:based\s+)?in\s+"
    r"([a-zà-ÿ][\w'-]*)(\s+now\b)?",
    re.IGNORECASE,
)
_MOVED = re.compile(r"\b(?:moved|relocated)\b", re.IGNORECASE)


def _in_lower(text: str) -> bool:
    """Where someone now lives, in lower-case chat ("im in manchester now btw, moved last
    week", "context: im in philly, wfh mon + fri"): the place, then "now", a move, or the end
    of the phrase ("im in meetings all day" is not; "im in bed," is no place)."""
    m = _IN_LOWER.search(text)
    if not m or not _placeish(m[1].casefold()) or m[1].casefold() in _NOT_PLACES:
        return False
    ends = re.match(r"\s*(?:[,.;!)]|$)", text[m.end(1) :]) is not None
    return bool(m[2] or _MOVED.search(text) or ends)


_NOT_PLACES = frozenset(
    """bed love trouble charge class meeting meetings line pain shock tears traffic transit
    hurry rush work office school college uni gym queue sync touch town labor labour
    hospital shape luck""".split()  # noqa: SIM905
)
"""What "I'm in …" says that is no place to live."""


def _placeish(word: str) -> bool:
    return not (
        word in STOPWORDS or word in WEEKDAYS or word in MONTHS or word in FILLER or word in CHANGE
    )


def _lower_values(text: str) -> set[str]:
    """The value of a one-value attribute written in lower case: the words after the slot
    word's preposition ("i live in echo park w my roommate" → "echo park")."""
    slot_at = next((m.end() for m in _cue().finditer(text) if m[0].casefold() in SLOT_WORDS), 0)
    m = _AFTER_SLOT.search(text, slot_at) or _MOVE_TO_LOWER.search(text)
    if not m:
        return set()
    words = [w.casefold() for w in m.groups() if w]
    kept = []
    for word in words:
        if not _placeish(word) or word in SLOT_WORDS:
            break
        kept.append(fold_accents(word))
    return {" ".join(kept)} if kept else set()


_AT_WORK = frozenset({"work", "works", "working", "worked", "job"})
"""Words that name an employer only before one ("work at Lumen"; not "after work")."""
_CAPITAL_TOOLS = frozenset(
    {"go", "signal", "teams", "cursor", "zed", "r", "heap", "buffer", "later", "sprout", "linear"}
)
"""Tools whose name is an everyday word: a tool only when written with a capital."""


def _names_slot(folded: list[str], at: int) -> bool:
    """Whether the slot word at `at` names its attribute here: work before an employer, a
    lead that is someone's ("my team lead", not "was made team lead"), a report upwards
    ("I report to Hanna", not "four engineers report to him"), a company that is someone's."""
    word, before, after = folded[at], folded[max(0, at - 2) : at], folded[at + 1 : at + 3]
    if word in _AT_WORK:
        return any(w in {"at", "for", "with"} for w in after)
    if word in {"lead", "company"}:  # "my company is Acme", not "the company has credits"
        return bool((_POSSESSIVES | _OWNERS) & set(before)) or after[:1] == ["is"]
    if word.startswith("report"):
        return not (after[:1] == ["to"] and after[1:2] and after[1] in _OBJECTS)
    return True


_NOT_EMPLOYERS = frozenset({"new", "dream", "first", "old", "part-time", "summer", "full-time"})
_OWNERS = frozenset({"his", "her", "their", "your"})
_OBJECTS = frozenset({"me", "him", "her", "us", "them", "you"})


def _names_kind(text: str, tool: str) -> bool:
    """A tool named in lower case with what it is for ("buffer not later for scheduling")."""
    return re.search(rf"\b{TOOL_KINDS[tool][:5]}", text, re.IGNORECASE) is not None


def _apposed(text: str) -> set[str]:
    m = _APPOSED.search(text)
    if m is None or m[1] in _NOT_NAMES or m[1] in STOPWORDS or m[1].endswith(("ly", "ing", "ed")):
        return set()
    return {m[1]}


def _tool(word: str) -> str:
    return {"postgresql": "postgres", "mongo": "mongodb", "golang": "go"}.get(word, word)


def _past(folded: list[str]) -> bool:
    """A statement of what already happened ("I moved to Porto and will start Monday")."""
    return any(w in {"moved", "switched", "joined", "started", "changed", "quit"} for w in folded)
