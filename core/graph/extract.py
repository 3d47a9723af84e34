"""Entities and relations from text, offline: where people live and work, whom they report to,
their roles, what people and projects use (a tool of a category: "uses a database" is one
slot), lead and prefer, when an event happens; URLs and known tools; the dates that bound a
relation ("since 2025", "last weekend", read against the text's own date); and whether a
statement is negated ("I left Acme"), tentative ("I might move to Oslo") or a correction
("actually it's Leeds, not Lees")."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from tiermem.core.graph import build, dates, names
from tiermem.core.graph import lexicon as lx
from tiermem.core.graph.patterns import Frame, clause_words, frames_for
from tiermem.core.graph.phrases import OWNER, Reader
from tiermem.core.graph.sentences import Clause, Flags, clause_flags, split

__all__ = ["KINDS", "OWNER", "Extraction", "Relation", "extract"]
KINDS: tuple[str, ...] = (
    *("person", "project", "organisation", "place", "tool", "event", "role", "date", "url"),
    "other",
)
NEGATED, TENTATIVE, CORRECTION, PAST = "negated", "tentative", "correction", "past"
_URL = r"https?://[^\s<>()\"']+"


@dataclass(frozen=True)
class Relation:
    """Subject → predicate → object, valid between two dates when the text bounds it.

    `flags`: negated (ends the fact, no successor), tentative (a plan or a hypothesis: closes
    nothing), correction (replaces a wrong statement at once), past ("used to"). `replaces`:
    the object this one takes the place of ("from A to B", "not A"). An empty predicate or
    object (a negation or correction that does not say) is filled in from the graph."""

    subject: str
    predicate: str
    object: str
    valid_from: float | None = None
    valid_to: float | None = None
    flags: frozenset[str] = frozenset()
    replaces: str = ""


@dataclass
class Extraction:
    """The entities and relations one text states."""

    entities: dict[str, str] = field(default_factory=dict)
    """name → kind."""
    relations: list[Relation] = field(default_factory=list)
    text_keys: set[str] = field(default_factory=set)
    """Name keys of the text, for mentions of entities the graph already knows."""
    aliases: dict[str, set[str]] = field(default_factory=dict)
    """A tool's canonical name → the names the text used for it ("Postgres")."""
    owner_names: list[str] = field(default_factory=list)
    """What the user said their name is ("I'm Sam")."""

    def add(self, name: str, kind: str) -> None:
        if self.entities.get(name, "other") == "other":
            self.entities[name] = kind


_OWNER_LINE = re.compile(r"\s*Owner:\s+([A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?)\s*[,.;]")
"""A notes file's owner section as imported ("Owner: Ravi Shankar, works at Kestrel"): the
user's own name, as "I'm Ravi Shankar" would give it."""


def extract(text: str, speaker: str = "", ref: float | None = None) -> Extraction:
    """The entities and relations `text` states, dated against `ref` (the text's own date,
    default now). `speaker` "user" (or "") lets "I" be the owner."""
    out = Extraction()
    when = time.time() if ref is None else ref
    for url in re.findall(_URL, text):
        out.add(url.rstrip(".,;:!?"), "url")
    reader = Reader(not any(c.isupper() for c in text), when)
    first_person = speaker in ("user", "")
    for sentence in split(text):
        for name in names.proper_names(sentence.text):
            out.add(name, "organisation" if names.organisation_like(name) else "other")
        speaking = first_person and sentence.speaker in ("", "user", "me", "human")
        state = _Sentence(out, reader, when, speaking)
        for clause in sentence.clauses:
            state.clause(clause)
    if first_person and (named := _OWNER_LINE.match(text)):
        out.owner_names.append(names.clean_name(named[1]) or named[1])
    for name in out.owner_names:
        out.entities.pop(name, None)
    for surface, canonical, _ in names.tool_mentions(text):
        out.entities.pop(surface, None) if surface != canonical else None
        out.entities[canonical] = "tool"
        out.aliases.setdefault(canonical, set()).add(surface)
    return out


def _plausible(item: build.Built, reader: Reader) -> bool:
    """A relation about a person has a person as its subject ("Prices start at …" is not
    about someone's employer), and a named value does not start with a number."""
    person = item.subject_kind == "person" or item.predicate.startswith(("prefers", "role"))
    known = item.subject in (OWNER, reader.last_person, "")
    if person and not known and not names.personish(item.subject):
        return False
    named = item.object_kind in ("place", "organisation", "person")
    return not (named and item.object[:1].isdigit())


class _Sentence:
    """One sentence's clauses: the subject and dates a clause without its own carry on."""

    def __init__(self, out: Extraction, reader: Reader, ref: float, first_person: bool) -> None:
        self.out, self.reader, self.ref, self.first_person = out, reader, ref, first_person
        self.subject: str | None = None
        self.window: tuple[float | None, float | None] = (None, None)

    def clause(self, clause: Clause) -> None:
        taken: list[tuple[int, int]] = []
        for frame in frames_for(clause_words(clause.text)):
            for m in frame.regex.finditer(clause.text):
                if any(m.start() < e and s < m.end() for s, e in taken):
                    continue
                if self._frame(frame, m, clause):
                    taken.append((m.start(), m.end()))

    def _frame(self, frame: Frame, m: re.Match[str], clause: Clause) -> bool:
        """Read one frame's match; True when it stated a relation (its words are used)."""
        left, right = clause.text[: m.start()], clause.text[m.end() :]
        flags = clause_flags(clause, left, m.group(0), frame.predicate)
        if frame.object_kind == "owner" and frame.name == "owner_name":
            return self._owner_name(right)
        if frame.name == "correction" and "correction" not in flags.names:
            return False
        subject = self._subject(frame, m, left)
        if subject is None:
            return False
        built = [
            item
            for item in build.build(frame, m, subject, left, right, self.reader)
            if _plausible(item, self.reader)
        ]
        if not built:
            return False
        for item in built:
            self._add(item, flags, clause)
        return True

    def _subject(self, frame: Frame, m: re.Match[str], left: str) -> str | None:
        """The clause's subject; None when it names someone unnamed ("my wife") or is not the
        user's to state."""
        if frame.object_kind == "owner" or frame.predicate == "happens_on":
            return OWNER
        if frame.name == "correction":
            return ""
        if frame.name in ("report_possessive", "role_possessive", "favourite", "category_is"):
            return build.possessor(m, left, self.reader) or None
        said = self.reader.subject(left)
        if said is None:
            said = self.subject if self.subject else (OWNER if self.first_person else "")
        if said == OWNER and not self.first_person:
            return None
        if not said:
            return None
        self.subject = said
        return said

    def _owner_name(self, right: str) -> bool:
        m = re.match(
            r"\s*([A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?)\s*(?:[,.!;]|$|and\b|from\b|here\b)", right
        )
        if not m or not self.first_person:
            return False
        name = names.clean_name(m.group(1))
        if not name or names.fold(name.split()[0]) in lx.DEMONYMS:
            return False
        self.out.owner_names.append(name)
        return True

    def _add(self, item: build.Built, flags: Flags, clause: Clause) -> None:
        """Date a built relation by its clause and record it with its entities (an event's
        relation holds from when it was said: its date is its object)."""
        lean: dates.Lean = "future" if TENTATIVE in flags.names else "past"
        start, end, future = self._dates(clause, item.date_span, lean)
        marks = set(flags.names) | set(item.flags)
        if future and item.predicate != "happens_on" and NEGATED not in marks:
            marks.add(TENTATIVE)
        if item.predicate == "happens_on":
            start, end = None, None
        if PAST in marks and end is None:
            end = self.ref
        subject, obj = item.subject, item.object
        for name, kind in ((subject, item.subject_kind), (obj, item.object_kind)):
            if name:
                self.out.add(name, kind)
        if item.alias:
            self.out.aliases.setdefault(obj, set()).add(item.alias)
        if item.subject_kind == "person" and subject != OWNER:
            self.reader.last_person = subject
        elif subject != OWNER:
            self.reader.last_thing = subject
        replaces = item.replaces or flags.wrong
        if replaces:
            self.out.add(names.display(replaces, item.object_kind), item.object_kind)
            replaces = names.display(replaces, item.object_kind)
        self.out.relations.append(
            Relation(subject, item.predicate, obj, start, end, frozenset(marks), replaces)
        )

    def _dates(
        self, clause: Clause, skip: tuple[int, int] | None, lean: dates.Lean
    ) -> tuple[float | None, float | None, bool]:
        """(from, until, looks ahead) of a clause; a clause with no date of its own and no
        "now" keeps the previous clause's."""
        start = end = None
        future = False
        for found in dates.find(clause.text, self.ref, lean):
            if skip and found.start < skip[1] and skip[0] < found.end:
                continue
            if found.role == "until":
                end = found.ts
            else:
                start = found.ts
            future = future or found.future
        if start is None and end is None and not clause.now:
            return (*self.window, False)
        self.window = (start, end)
        return start, end, future
