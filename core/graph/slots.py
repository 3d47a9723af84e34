"""What each predicate means: the kinds it joins, whether it is a slot a subject fills with
one value at a time (lives_in, works_at, reports_to, role, uses_<category>,
prefers_<kind>, happens_on) or one an object has one subject for (leads), and how a fact
reads as a sentence ("User lives in Leeds")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """A predicate's meaning."""

    subject_kind: str
    object_kind: str
    exclusive: str | None
    """"subject": one object per subject at a time; "object": one subject per object."""
    phrase: str
    """How it reads: "{s} lives in {o}"."""


PREDICATES: dict[str, Slot] = {
    "lives_in": Slot("person", "place", "subject", "{s} lives in {o}"),
    "works_at": Slot("person", "organisation", "subject", "{s} works at {o}"),
    "works_on": Slot("person", "project", None, "{s} works on {o}"),
    "reports_to": Slot("person", "person", "subject", "{s} reports to {o}"),
    "team_lead": Slot("person", "person", "subject", "{s}'s team lead is {o}"),
    "role": Slot("person", "role", "subject", "{s} is {a} {o}"),
    "leads": Slot("person", "project", "object", "{s} leads {o}"),
    "uses": Slot("other", "tool", None, "{s} uses {o}"),
    "prefers": Slot("person", "other", None, "{s} prefers {o}"),
    "happens_on": Slot("event", "date", "subject", "{s} is on {o}"),
}
"""The predicates the extractor states; `uses_<category>` and `prefers_<kind>` are slots of
`uses` and `prefers`."""


def uses(category: str) -> str:
    return f"uses_{category}" if category else "uses"


def prefers(kind: str) -> str:
    return f"prefers_{kind}" if kind else "prefers"


def family(predicate: str) -> tuple[str, str]:
    """(base predicate, category): "uses_queue" → ("uses", "queue")."""
    for base in ("uses", "prefers"):
        if predicate.startswith(base + "_"):
            return base, predicate[len(base) + 1 :]
    return predicate, ""


def slot(predicate: str) -> Slot | None:
    return PREDICATES.get(family(predicate)[0])


def exclusive(predicate: str) -> str | None:
    """Which side has one value at a time, or None (several at once: works_on, plain uses)."""
    base, category = family(predicate)
    if base in ("uses", "prefers"):
        return "subject" if category else None
    known = PREDICATES.get(base)
    return known.exclusive if known else None


def sentence(subject: str, predicate: str, obj: str) -> str:
    """A fact as a short sentence: "User uses Kafka for queue", "Offsite is on 2026-03-10"."""
    base, category = family(predicate)
    known = PREDICATES.get(base)
    if known is None:
        return f"{subject} {predicate.replace('_', ' ')} {obj}"
    article = "an" if obj[:1].casefold() in "aeiou" else "a"
    text = known.phrase.format(s=subject, o=obj, a=article)
    if category:
        text += f" ({category.replace('_', ' ')})"
    return text
