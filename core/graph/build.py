"""From a frame found in a clause to the relations it states: the object read after the verb
(or before it), its kind, the slot it fills ("uses Kafka for its queue" → uses_queue), and
what it replaces ("switched from coffee to tea")."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tiermem.core.graph import dates, names, slots
from tiermem.core.graph import lexicon as lx
from tiermem.core.graph.patterns import Frame, category_phrase, category_words, cue
from tiermem.core.graph.phrases import (
    OWNER,
    Reader,
    read_event,
    read_name,
    read_preference,
    read_role,
    read_tool,
)


@dataclass(frozen=True)
class Built:
    """One relation a frame states, before it is dated."""

    subject: str
    predicate: str
    object: str
    subject_kind: str
    object_kind: str
    flags: tuple[str, ...] = ()
    replaces: str = ""
    alias: str = ""
    """The name the text used for a tool known by another ("Postgres" for PostgreSQL)."""
    date_span: tuple[int, int] | None = None
    """Where the object's date is in the clause (an event's date is no validity bound)."""


Builder = Callable[[Frame, re.Match[str], str, str, str, Reader], list[Built]]
_WORKS = cue(lx.LEAVE_JOB_WORDS)
_LIVES = cue(lx.LEAVE_HOME_WORDS)
_USES = cue(lx.LEAVE_TOOL_WORDS)
_SWITCH_TO = re.compile(r"^\s*(?:to|for|with|into|over\s+to)\s+", re.I)
_FOR = re.compile(r"^\s*for\b", re.I)
_AND = re.compile(r"^\s*(?:,\s*and|,|and|&|plus)\s+", re.I)
_AS = re.compile(r"^\s*,?\s*as\s+(?:an?\s+|the\s+|our\s+)?", re.I)
_AS_ROLE = re.compile(r"^\s*(?:at|for|with)\s+", re.I)
_WEAK_USE = cue(lx.WEAK_USE_VERBS)
_LIKE = frozenset(lx.TASTE_VERBS)


def possessor(m: re.Match[str], left: str, reader: Reader) -> str:
    """Whose slot a possessive names: "my" → the owner, "Maya's" → Maya, "its" → the thing
    last named, "the database for Ledgerly" → Ledgerly; "" when unnamed."""
    groups = m.groupdict()
    poss = (groups.get("poss") or "").strip()
    folded = poss.casefold().replace("’", "'")
    if folded in ("my", "our"):
        return OWNER
    if folded in ("its", "their"):
        return reader.last_thing
    if folded in ("his", "her"):
        return reader.last_person
    if folded.endswith("'s"):
        return names.clean_name(poss[:-2]) if poss[:1].isupper() or reader.lower else ""
    if groups.get("of"):
        return names.clean_name(groups["of"])
    start = left.strip().casefold()
    return OWNER if start in ("", "new", "and", "so", "also") else ""


def build(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    """The relations one frame match states (none when its object is not there)."""
    return _BUILDERS[frame.name](frame, m, subject, left, right, reader)


def _kind(subject: str, default: str) -> str:
    return "person" if subject == OWNER else default


def _user_kind(subject: str, reader: Reader) -> str:
    """What uses a tool: the user, a person just named, else a project."""
    if subject == OWNER or subject == reader.last_person:
        return "person"
    return "project"


def _after(text: str, surface: str) -> str:
    """What follows `surface` in `text`."""
    at = text.casefold().find(surface.casefold()) if surface else -1
    return text[at + len(surface) :] if at >= 0 else ""


def _event(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    active = frame.name == "event_moved_active"
    event = read_event(m.group("e") if active else left)
    if not event:
        return []
    event = names.display(event, "event")
    if frame.name == "event_cancel":
        return [Built(event, "happens_on", "", "event", "date", ("negated",))]
    moved = active or " to" in m.group(0).casefold() or " for" in m.group(0).casefold()
    found = dates.find(right, reader.ref, "future" if moved else "near")
    if not found or found[0].start > 4:
        return []
    day = found[0]
    span = (m.end() + day.start, m.end() + day.end)
    return [Built(event, "happens_on", dates.iso(day.ts), "event", "date", date_span=span)]


def _person_slot(m: re.Match[str]) -> str:
    noun = " ".join((m.groupdict().get("noun") or "").casefold().split())
    return "team_lead" if noun in lx.TEAM_LEAD_NOUNS else "reports_to"


def _report(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    predicate = "reports_to" if frame.name in ("report_verb", "manages_me") else _person_slot(m)
    if frame.name in ("report_reverse", "manages_me"):
        the = frame.name == "report_reverse" and m.group("poss").casefold() == "the"
        if the and predicate != "team_lead":
            return []
        boss = reader.subject(left)
        if not boss or boss == OWNER:
            return []
        return [Built(OWNER, predicate, boss, "person", "person")]
    boss = read_name(right, True, reader.lower)
    if not boss or names.name_key(boss) == names.name_key(subject):
        return []
    return [Built(subject, predicate, names.display(boss, "person"), "person", "person")]


def _role(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    role = read_role(right)
    if not role:
        return []
    out = [Built(subject, "role", role, _kind(subject, "person"), "role")]
    at = _AS_ROLE.match(_after(right, role))
    if at:
        org = read_name(_after(right, role)[at.end() :], False, reader.lower)
        if org and not names.tool(org):
            org = names.display(org, "organisation")
            out.append(Built(subject, "works_at", org, "person", "organisation"))
    return out


def _use(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    weak_verb = frame.name == "use" and _WEAK_USE.search(m.group(0)) is not None
    name, surface, category = read_tool(right, reader.lower, frame.name == "category_is")
    if not name:
        return []
    preference = names.preferences().get(names.fold(name))
    if preference and not category:
        return [Built(subject, slots.prefers(preference), name.casefold(), "person", "other")]
    said = category_phrase().match(_after(right, surface))
    stated = names.fold(" ".join(said.group("cat").split())) if said else ""
    if frame.name == "category_is":
        stated = names.fold(" ".join(m.group("cat").split()))
    category = category_words().get(stated, "") or category
    if weak_verb and not category:
        return []  # "moved to Lisbon": a place, not a tool
    if not category and not names.tool(name) and not _generic_use(subject, name):
        return []
    if frame.name == "migrate":
        subject = _migrated(m, reader)
        if not subject:
            return []
    alias = surface if surface and surface != name else ""
    replaces = (m.groupdict().get("a") or "").strip()
    kind = _user_kind(subject, reader)
    out = [Built(subject, slots.uses(category), name, kind, "tool", (), replaces, alias)]
    rest = _after(right, surface)
    rest = rest[said.end() :] if said else rest
    return out + _more_tools(subject, kind, rest, reader)


def _more_tools(subject: str, kind: str, rest: str, reader: Reader) -> list[Built]:
    """'… Kafka for its queue and Redis as a cache': the tools listed after the first, each
    with the category the sentence gives it."""
    out: list[Built] = []
    while True:
        joint = _AND.match(rest)
        if not joint:
            return out
        rest = rest[joint.end() :]
        name, surface, category = read_tool(rest, reader.lower, False)
        if not name:
            return out
        rest = _after(rest, surface)
        said = category_phrase().match(rest)
        if said:
            category = category_words().get(names.fold(" ".join(said.group("cat").split())), "")
            rest = rest[said.end() :]
        alias = surface if surface != name else ""
        out.append(Built(subject, slots.uses(category), name, kind, "tool", alias=alias))


def _generic_use(subject: str, name: str) -> bool:
    """A thing of no known category used by the user or a one-word project ("Orchard uses
    Foo"), not "Scammers use GDPR-Inspired Meme"."""
    if len(name.split()) > 2:
        return False
    return subject == OWNER or (" " not in subject and not re.search(r"[^su]s$", subject))


def _migrated(m: re.Match[str], reader: Reader) -> str:
    """The project a migration moved ("we moved Ledgerly to Postgres" → Ledgerly)."""
    what = m.group("x").strip()
    if what.casefold() in ("it", "everything", "all"):
        return reader.last_thing
    if not (what[:1].isupper() or reader.lower):
        return ""
    return names.clean_name(what)


def _thing(text: str) -> tuple[str, str, str, str]:
    """(name, surface, tool category, preference kind) of what a text starts with."""
    name, surface, category = read_tool(text, True, False)
    if category:
        return name, surface, category, ""
    value, kind = read_preference(text, True, True)
    return value, value, "", kind


def _switch(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    old, old_surface, old_tool, old_kind = _thing(right)
    rest = _after(right, old_surface)
    to = _SWITCH_TO.match(rest)
    if not old or not to:
        return []
    new, surface, new_tool, new_kind = _thing(rest[to.end() :])
    if not new:
        return []
    what = names.fold(" ".join((m.group("what") or "").split()))
    if what in ("jobs", "companies", "employers"):
        org = names.display(new, "organisation")
        return [Built(subject, "works_at", org, "person", "organisation", replaces=old)]
    if what == "cities":
        place = names.display(new, "place")
        return [Built(subject, "lives_in", place, "person", "place", replaces=old)]
    category = category_words().get(what, "") or new_tool or old_tool
    moved = m.group("v").casefold().startswith(("mov", "reloc"))
    if moved and not (category or new_kind or old_kind):
        place = names.display(new, "place")
        return [Built(subject, "lives_in", place, "person", "place", replaces=old)]
    if category:
        alias = surface if surface != new else ""
        kind = _user_kind(subject, reader)
        return [Built(subject, slots.uses(category), new, kind, "tool", (), old, alias)]
    if subject != OWNER and subject != reader.last_person and not (new_kind or old_kind):
        return [Built(subject, "uses", new, "project", "tool", replaces=old)]
    return [Built(subject, slots.prefers(new_kind or old_kind), new, "person", "other", (), old)]


def _leave(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    verb = m.group("v")
    name, _, category = read_tool(right, reader.lower, True)
    negated = ("negated",)
    if category:
        return [
            Built(subject, slots.uses(category), name, _user_kind(subject, reader), "tool", negated)
        ]
    if "drinking" in verb.casefold() or _USES.search(verb):
        value, kind = read_preference(right, True, reader.lower)
        if kind or "drinking" in verb.casefold():
            return [
                Built(subject, slots.prefers(kind or "drink"), value, "person", "other", negated)
            ]
        return (
            [Built(subject, "uses", name, _user_kind(subject, reader), "tool", negated)]
            if name
            else []
        )
    if _LIVES.search(verb):
        return (
            [Built(subject, "lives_in", names.display(name, "place"), "person", "place", negated)]
            if name
            else []
        )
    if _WORKS.search(verb) or re.search(r"\bmy\s+job\b", right, re.I):
        org = names.display(name, "organisation") if name else ""
        return [Built(subject, "works_at", org, "person", "organisation", negated)]
    if not name:
        return []
    return [
        Built(subject, "", names.display(name, "other"), _kind(subject, "other"), "other", negated)
    ]


def _place(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    prep = " ".join(m.group("prep").casefold().split())
    place = read_name(right, True, reader.lower)
    if not place or names.tool(place):
        return []
    place = names.display(place, "place")
    if prep == "out of":
        return [Built(subject, "lives_in", place, "person", "place", ("negated",))]
    if prep == "from":
        to = _SWITCH_TO.match(_after(right, place))
        new = read_name(_after(right, place)[to.end() :], True, reader.lower) if to else ""
        if not new:
            return []
        new = names.display(new, "place")
        return [Built(subject, "lives_in", new, "person", "place", replaces=place)]
    return [Built(subject, "lives_in", place, "person", "place")]


def _named(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    """works_at, works_on, leads: a named object of the predicate's kind."""
    thing = read_name(right, frame.strong, reader.lower)
    if not thing or names.name_key(thing) == names.name_key(subject):
        return []
    kind = slots.PREDICATES[frame.predicate].object_kind
    out = [Built(subject, frame.predicate, names.display(thing, kind), "person", kind)]
    as_role = _AS.match(_after(right, thing))
    role = read_role(_after(right, thing)[as_role.end() :]) if as_role else ""
    if role and frame.predicate == "works_at":
        out.append(Built(subject, "role", role, "person", "role"))
    return out


def _prefer(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    verb = " ".join(m.groupdict().get("v", "").casefold().replace("’", "'").split())
    liking = verb in _LIKE
    if frame.name == "favourite":
        noun = names.fold(" ".join(m.group("noun").split()))
        kind = category_words().get(noun, "") or noun.rstrip("s").replace(" ", "_")
        value, _ = read_preference(right, True, reader.lower)
        return [Built(subject, slots.prefers(kind), value, "person", "other")] if value else []
    value, kind = read_preference(right, not liking, reader.lower)
    if not value or (liking and not kind):
        return []
    _, surface, category = read_tool(right, True, False)
    if category and _FOR.match(_after(right, surface)):
        return []  # "prefers Postgres for Quillmark": a project's choice, not a taste
    if not kind and "drink" in verb:
        kind = "drink"
    over = re.match(r"\s*(?:over|to|than|instead\s+of|rather\s+than)\s+", _after(right, value))
    old = read_preference(_after(right, value)[over.end() :], True, True)[0] if over else ""
    return [Built(subject, slots.prefers(kind), value, "person", "other", (), old)]


def _correction(
    frame: Frame, m: re.Match[str], subject: str, left: str, right: str, reader: Reader
) -> list[Built]:
    value = read_name(right, False, reader.lower) or read_tool(right, reader.lower, False)[0]
    return [Built("", "", value, "other", "other", ("correction",))] if value else []


_BUILDERS: dict[str, Builder] = {
    "event_moved_active": _event,
    "event_cancel": _event,
    "event_at": _event,
    "report_possessive": _report,
    "report_reverse": _report,
    "report_verb": _report,
    "manages_me": _report,
    "role_possessive": _role,
    "role_verb": _role,
    "role_copula": _role,
    "switch": _switch,
    "migrate": _use,
    "category_is": _use,
    "favourite": _prefer,
    "leave": _leave,
    "live": _place,
    "work": _named,
    "join": _named,
    "works_on": _named,
    "use": _use,
    "lead": _named,
    "prefer": _prefer,
    "correction": _correction,
}
