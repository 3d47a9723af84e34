"""The verb frames the extractor looks for, built from the word lists of `lexicon`: each frame
finds a verb phrase; the subject is read from the words before it and the object from the words
after it (`extract`), so one frame covers every subject and object a sentence may have."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, cached_property

from tiermem.core.graph import lexicon as lx


@dataclass(frozen=True)
class Frame:
    """One way of stating a relation: where its verb is, what the object after it is."""

    name: str
    pattern: str
    predicate: str
    """The predicate, or "" when the object decides it (a tool, a preference, a date)."""
    object_kind: str
    """What follows the verb: name, tool, role, preference, person, date, event, owner."""
    strong: bool = True
    """Lower-case objects count in mixed-case text ("I live in leeds")."""
    triggers: frozenset[str] = frozenset()
    """Words one of which a clause must have for the frame to be tried (a cheap filter)."""

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """Compiled when first tried: a one-shot `store` compiles only what its text needs."""
        return re.compile(self.pattern, re.IGNORECASE)


_WORD = re.compile(r"[\w']+")
_DIGIT = re.compile(r"\d")


def clause_words(text: str) -> frozenset[str]:
    """A clause's words for the frames' filter: folded, contractions also in pieces ("i'm" →
    "i", "'m"), and "0" when it has a digit."""
    words = set(_WORD.findall(text.casefold().replace("’", "'")))
    for word in [w for w in words if "'" in w]:
        head, _, tail = word.partition("'")
        words |= {head, "'" + tail}
    if _DIGIT.search(text):
        words.add("0")
    return frozenset(words)


def firsts(*lists: tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    """The words a frame's phrases start with."""
    return frozenset(p.split()[0].casefold() for phrases in lists for p in phrases)


def every(*lists: tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    """Every word of a frame's phrases."""
    return frozenset(w.casefold() for phrases in lists for p in phrases for w in p.split())


def alt(phrases: tuple[str, ...] | list[str] | frozenset[str]) -> str:
    """A regex alternation of phrases, longest first, any spacing, either apostrophe."""
    out = []
    for phrase in sorted(set(phrases), key=len, reverse=True):
        body = re.escape(phrase).replace(r"\ ", r"\s+").replace("'", "['’]")
        out.append(body)
    return "(?:" + "|".join(out) + ")"


def _categories() -> str:
    return alt([w for words in lx.CATEGORY_WORDS.values() for w in words])


_DET = r"(?:the|our|my|a|an|its|their|his|her|this|that)"
_POSS = r"(?:my|our|its|their|his|her|[\w.'’-]+['’]s)"


FrameSpec = tuple[str, str, str, str, bool]


def _frames() -> list[FrameSpec]:
    """(name, regex, predicate, object kind, strong) in the order they are tried."""
    return _people_frames() + _change_frames() + _thing_frames()


def _people_frames() -> list[FrameSpec]:
    """The user's name, events, managers and roles."""
    manager, team_lead = alt(lx.MANAGER_NOUNS), alt(lx.TEAM_LEAD_NOUNS)
    copula = r"(?:is|['’]s|are|was|will\s+be|has\s+become|became|=|:)"
    return [
        (
            "owner_name",
            r"\b(?:my\s+name\s+is|my\s+name['’]s|i\s+am\s+called|i['’]m\s+called|call\s+me|"
            r"people\s+call\s+me|(?:^|(?<=[,.!]\s))(?:hi|hello|hey)?[,!\s]*i['’]?m|"
            r"(?:^|(?<=[,.!]\s))(?:hi|hello|hey)?[,!\s]*i\s+am|this\s+is)\s+",
            "name",
            "owner",
            True,
        ),
        (
            "event_moved_active",
            rf"\b{alt(lx.EVENT_MOVE_VERBS)}\s+(?P<e>(?:the|our|my|this|that|next\s+week['’]s)\s+"
            rf"[\w'’ -]{{2,40}}?)\s+(?:back\s+)?(?:to|until|till|for)\s+",
            "happens_on",
            "date",
            True,
        ),
        ("event_cancel", rf"\b{alt(lx.EVENT_CANCEL)}\b", "happens_on", "none", True),
        (
            "event_at",
            rf"\s(?:{alt(lx.EVENT_VERBS_MOVED)}|{alt(lx.EVENT_VERBS_AT)})\s+",
            "happens_on",
            "date",
            True,
        ),
        (
            "report_possessive",
            rf"(?:\b(?P<poss>{_POSS})\s+|\b)(?:new\s+|current\s+|direct\s+|actual\s+)?"
            rf"(?P<noun>{manager}|{team_lead})\s+{copula}\s+(?:now\s+)?",
            "reports_to",
            "person",
            True,
        ),
        (
            "report_reverse",
            rf"\b(?:is|['’]s|has\s+become|became|will\s+be|is\s+now)\s+(?:now\s+|also\s+)?"
            rf"(?P<poss>my|our|the)\s+(?:new\s+|current\s+|direct\s+)?(?P<noun>{manager}|"
            rf"{team_lead})\b(?!\s+(?:of|at|for|on|in)\b)",
            "reports_to",
            "owner",
            True,
        ),
        (
            "report_verb",
            rf"\b{alt(lx.REPORT_VERBS)}\s+",
            "reports_to",
            "person",
            True,
        ),
        (
            "manages_me",
            r"\b(?:manages|managed|is\s+managing|supervises|is\s+my\s+boss\s+now)\s+me\b",
            "reports_to",
            "owner",
            True,
        ),
        (
            "role_possessive",
            rf"\b(?P<poss>my|[\w.'’-]+['’]s)\s+(?:new\s+|current\s+|official\s+)?"
            rf"{alt(lx.ROLE_NOUNS)}\s+{copula}\s+(?:now\s+)?(?:an?\s+|the\s+)?",
            "role",
            "role",
            True,
        ),
        ("role_verb", rf"\b{alt(lx.ROLE_VERBS)}\s+(?:an?\s+|the\s+)?", "role", "role", True),
        (
            "role_copula",
            r"\b(?:am|['’]m|is|['’]s|are|was|were)\s+(?:now\s+|currently\s+|still\s+|also\s+|"
            r"officially\s+)?(?P<det>an?|the|our|their|his|her)\s+",
            "role",
            "role",
            True,
        ),
    ]


def _change_frames() -> list[FrameSpec]:
    """Changes of tool or taste, a stack's categories, favourites, endings."""
    return [
        (
            "switch",
            rf"\b(?P<v>{alt(lx.SWITCH_VERBS)})\s+(?:over\s+|back\s+)?(?:(?P<what>jobs|companies|"
            rf"employers|cities|{_categories()})\s+)?from\s+",
            "",
            "switch",
            True,
        ),
        (
            "migrate",
            rf"\b{alt(lx.MIGRATE_VERBS)}\s+(?P<x>(?!from\b|to\b|over\b|back\b|in\b|into\b)"
            rf"[\w.'’-]+(?:\s+(?!from\b|to\b|over\b)[A-Z][\w.'’-]*)?)\s+(?:over\s+)?"
            rf"(?:from\s+(?P<a>[\w.' -]+?)\s+)?(?:to|onto|over\s+to)\s+",
            "uses",
            "tool",
            True,
        ),
        (
            "category_is",
            rf"(?:\b(?P<poss>{_POSS})\s+|\bthe\s+)(?:main\s+|primary\s+|new\s+|current\s+)?"
            rf"(?P<cat>{_categories()})(?:\s+(?:for|of)\s+(?P<of>[\w.-]+))?\s+"
            rf"(?:is|are|['’]s|is\s+now|will\s+be|runs\s+on)\s+(?:now\s+)?",
            "uses",
            "tool",
            True,
        ),
        (
            "favourite",
            r"\b(?P<poss>my|[\w.'’-]+['’]s)\s+(?:new\s+|current\s+|all-time\s+)?"
            r"(?:favou?rite|preferred|go-to)\s+(?P<noun>[\w-]+(?:\s+[\w-]+)?)\s+"
            r"(?:is|are|['’]s|is\s+now)\s+(?:now\s+)?",
            "prefers",
            "preference",
            True,
        ),
        (
            "leave",
            rf"\b(?P<v>{alt(lx.LEAVE_VERBS)})\s+(?:my\s+job\s+(?:at|with)\s+|my\s+role\s+at\s+)?",
            "",
            "leave",
            True,
        ),
    ]


def _thing_frames() -> list[FrameSpec]:
    """Places, employers, projects, tools, preferences."""
    return [
        (
            "live",
            rf"\b{alt(lx.LIVE_VERBS)}\s+(?:back\s+|over\s+|here\s+|there\s+|now\s+|out\s+of\s+)?"
            rf"(?P<prep>{alt(lx.LIVE_PREPS)})\s+",
            "lives_in",
            "name",
            True,
        ),
        (
            "work",
            rf"\b(?:{alt(lx.WORK_VERBS)}\s+(?:full-time\s+|part-time\s+|remotely\s+|now\s+|"
            rf"there\s+)?{alt(lx.WORK_PREPS)}|(?:employed|hired)\s+by)\s+",
            "works_at",
            "name",
            True,
        ),
        ("join", rf"\b{alt(lx.JOIN_VERBS)}\s+(?:the\s+)?", "works_at", "name", False),
        (
            "works_on",
            r"\b(?:works|worked|working|work|started\s+working|will\s+work)\s+on\s+(?:the\s+)?",
            "works_on",
            "name",
            False,
        ),
        (
            "use",
            rf"\b{alt(lx.USE_VERBS)}\s+",
            "uses",
            "tool",
            False,
        ),
        (
            "lead",
            rf"\b{alt(lx.LEAD_VERBS)}\s+(?:the\s+)?(?!me\b|on\b|to\b|at\b|in\b|into\b|out\b)",
            "leads",
            "name",
            False,
        ),
        (
            "correction",
            r"\b(?:i\s+meant|i\s+mean|it['’]s|it\s+is|make\s+that|should\s+(?:be|have\s+been)|"
            r"correction:?)\s+",
            "",
            "correction",
            False,
        ),
        (
            "prefer",
            rf"\b(?P<v>{alt(lx.PREFER_VERBS)})\s+",
            "prefers",
            "preference",
            False,
        ),
    ]


@cache
def frames() -> tuple[Frame, ...]:
    """Every frame, compiled on first extraction (reading the graph never needs them)."""
    triggers = _triggers()
    return tuple(
        Frame(name, regex, predicate, kind, strong, triggers[name])
        for name, regex, predicate, kind, strong in _frames()
    )


def frames_for(words: frozenset[str]) -> list[Frame]:
    """The frames a clause with these words may state, in order."""
    index = _by_word()
    chosen: set[int] = set()
    for word in words:
        chosen.update(index.get(word, ()))
    every_frame = frames()
    return [every_frame[i] for i in sorted(chosen)]


@cache
def _by_word() -> dict[str, tuple[int, ...]]:
    """Trigger word → the frames (by position) it lets be tried."""
    index: dict[str, list[int]] = {}
    for i, frame in enumerate(frames()):
        for word in frame.triggers:
            index.setdefault(word, []).append(i)
    return {w: tuple(found) for w, found in index.items()}


def _triggers() -> dict[str, frozenset[str]]:
    """The words that let each frame be tried."""
    nouns = every(lx.MANAGER_NOUNS, lx.TEAM_LEAD_NOUNS) - {"team", "line", "direct"}
    dates = lx.DATE_WORDS
    return {
        "owner_name": frozenset({"name", "called", "call", "'m", "am", "this"}),
        "event_moved_active": firsts(lx.EVENT_MOVE_VERBS) & every(lx.EVENT_MOVE_VERBS),
        "event_cancel": frozenset({"cancelled", "canceled", "called", "off"}),
        "event_at": dates,
        "report_possessive": nouns,
        "report_reverse": nouns,
        "report_verb": firsts(lx.REPORT_VERBS),
        "manages_me": frozenset({"manages", "managed", "managing", "supervises", "boss"}),
        "role_possessive": every(lx.ROLE_NOUNS),
        "role_verb": firsts(lx.ROLE_VERBS),
        "role_copula": frozenset(lx.ROLE_HEADS) | {h + "s" for h in lx.ROLE_HEADS},
        "switch": frozenset({"from"}),
        "migrate": firsts(lx.MIGRATE_VERBS),
        "category_is": every(*lx.CATEGORY_WORDS.values()),
        "favourite": frozenset({"favourite", "favorite", "preferred", "go-to"}),
        "leave": firsts(lx.LEAVE_VERBS),
        "live": firsts(lx.LIVE_VERBS),
        "work": firsts(lx.WORK_VERBS) | {"employed", "hired"},
        "join": firsts(lx.JOIN_VERBS),
        "works_on": frozenset({"on"}),
        "use": firsts(lx.USE_VERBS),
        "correction": frozenset({"meant", "mean", "'s", "it", "make", "should", "correction"}),
        "lead": firsts(lx.LEAD_VERBS),
        "prefer": firsts(lx.PREFER_VERBS) | {"rather", "into"},
    }


@cache
def cue(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """Any of the phrases as whole words (a contraction's tail, "'ll", right after its word)."""
    words = [p for p in phrases if not p.startswith("'")]
    tails = [p for p in phrases if p.startswith("'")]
    body = rf"(?<![\w'’]){alt(words)}(?![\w'’])"
    if tails:
        body += rf"|(?<=\w){alt(tails)}(?![\w'’])"
    return re.compile(body, re.IGNORECASE)


@cache
def category_words() -> dict[str, str]:
    """A word naming a category ("queue", "db") → the category."""
    return {w: cat for cat, words in lx.CATEGORY_WORDS.items() for w in words}


@cache
def category_phrase() -> re.Pattern[str]:
    """'for its queue', 'as a cache', 'for the database': the category a tool is used for."""
    return re.compile(
        rf"^\s*(?:for|as)\s+(?:{_DET}\s+)?(?:main\s+|primary\s+)?(?P<cat>{_categories()})\b",
        re.IGNORECASE,
    )


@cache
def role_phrase() -> re.Pattern[str]:
    """A role: up to three words before a role noun, and 'of X' after 'head' or 'VP'."""
    return re.compile(
        rf"^(?P<role>(?:[\w/&+-]+\s+){{0,3}}?{alt(lx.ROLE_HEADS)}s?(?:\s+of\s+[\w&-]+"
        rf"(?:\s+[A-Z][\w&-]*)?)?)\b",
        re.IGNORECASE,
    )


@cache
def event_head() -> re.Pattern[str]:
    """An event's name ends in an event word ("the team offsite", "the Q3 review")."""
    return re.compile(rf"\b{alt(lx.EVENT_NOUNS)}s?$", re.IGNORECASE)
