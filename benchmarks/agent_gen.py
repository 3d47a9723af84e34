"""A seeded generator of a realistic long-lived agent: facts over many categories and years.

Wording varies through templates, synonyms, people, tools and numbers, so that the full-text
index sees a natural vocabulary (a few thousand distinct words) rather than repeated strings.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from tiermem.core.warm import NewFact

DAY = 86400.0
TOPICS = {
    "owner": ["family", "health", "preferences", "travel", "finance", "hobbies"],
    "projects": ["evoclaw", "website", "mobile-app", "research", "hackathon", "infra"],
    "technical": ["python", "rust", "databases", "deploy", "networking", "security"],
    "work": ["meetings", "hiring", "budget", "roadmap", "customers"],
    "lessons": ["ops", "coding", "communication", "planning"],
    "people": ["friends", "colleagues", "vendors", "mentors"],
    "events": ["conferences", "trips", "deadlines", "releases"],
    "ideas": ["product", "writing", "automation", "experiments"],
    "home": ["chores", "garden", "repairs"],
}
CATEGORIES = [f"{top}/{sub}" for top, subs in TOPICS.items() for sub in subs]
PEOPLE = [
    "Sarah",
    "Luna",
    "Marco",
    "Priya",
    "Chen",
    "Olga",
    "Tomás",
    "Aisha",
    "Kenji",
    "Noah",
    "Fatima",
    "Lars",
    "Maya",
    "Ravi",
    "Zoe",
    "Igor",
    "Amara",
    "Hugo",
    "Mei",
    "Omar",
]
TOOLS = [
    "pytest",
    "docker",
    "postgres",
    "redis",
    "nginx",
    "terraform",
    "kubernetes",
    "uv",
    "cargo",
    "sqlite",
    "grafana",
    "sentry",
    "github actions",
    "fly.io",
    "cloudflare",
    "textual",
    "fastapi",
    "react",
    "vite",
    "ansible",
]
VERBS = [
    "decided",
    "agreed",
    "noticed",
    "learned",
    "confirmed",
    "discovered",
    "proposed",
    "rejected",
    "postponed",
    "scheduled",
    "fixed",
    "measured",
    "reviewed",
    "planned",
]
THINGS = [
    "deadline",
    "budget",
    "migration",
    "outage",
    "release",
    "invoice",
    "contract",
    "interview",
    "workshop",
    "benchmark",
    "refactor",
    "backup",
    "roadmap",
    "demo",
    "prototype",
    "launch",
    "audit",
    "dashboard",
    "newsletter",
    "sprint",
    "retrospective",
    "milestone",
    "checklist",
    "proposal",
    "estimate",
    "allergy",
    "appointment",
    "vacation",
    "birthday",
    "recipe",
    "marathon",
    "mortgage",
    "subscription",
    "warranty",
]
ADJECTIVES = [
    "quarterly",
    "urgent",
    "minor",
    "critical",
    "weekly",
    "annual",
    "tentative",
    "final",
    "shared",
    "private",
    "slow",
    "flaky",
    "new",
    "legacy",
    "cheaper",
    "faster",
]
TEMPLATES = [
    "{person} {verb} the {adj} {thing} for {sub} on {month} {n}",
    "We {verb} to use {tool} for the {sub} {thing} because it was {adj}",
    "{person} prefers {tool} over {tool2} for {sub} work",
    "The {adj} {thing} moved to {month} {n}; {person} owns it",
    "Lesson: always check the {thing} before the {adj} {thing2} ({sub})",
    "{person} mentioned a {adj} {thing} related to {top} {sub}",
    "Run `{tool} {cmd}` to fix the {adj} {thing} in {sub}",
    "{person} and {person2} {verb} the {thing} at {n} percent of the {adj} {thing2}",
    "Remember that {person}'s {thing} is in {month}",
    "The {sub} {thing} costs {n} dollars per month with {tool}",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
COMMANDS = ["--check", "restart", "migrate", "status", "logs -f", "upgrade", "test -q", "build"]


def generate(n: int, seed: int, start: float, years: float = 5.0) -> Iterator[NewFact]:
    """`n` facts spread evenly over `years` from `start`, oldest first."""
    rng = random.Random(seed)
    span = years * 365.25 * DAY
    for i in range(n):
        category = rng.choice(CATEGORIES)
        top, sub = category.split("/")
        values = {
            "person": rng.choice(PEOPLE),
            "person2": rng.choice(PEOPLE),
            "verb": rng.choice(VERBS),
            "adj": rng.choice(ADJECTIVES),
            "thing": rng.choice(THINGS),
            "thing2": rng.choice(THINGS),
            "tool": rng.choice(TOOLS),
            "tool2": rng.choice(TOOLS),
            "cmd": rng.choice(COMMANDS),
            "month": rng.choice(MONTHS),
            "n": rng.randint(1, 99),
            "top": top,
            "sub": sub.replace("-", " "),
        }
        text = rng.choice(TEMPLATES).format(**values) + f" (note {i})"
        importance = round(min(1.0, max(0.05, rng.gauss(0.5, 0.2))), 2)
        command = (f"{values['tool']} {values['cmd']}",) if "Run `" in text else ()
        yield NewFact(
            text=text,
            category=category,
            importance=importance,
            commands=command,
            created_at=start + span * i / n,
            source="benchmark",
        )


def queries(count: int, seed: int) -> list[str]:
    """Agent-style questions over the same vocabulary."""
    rng = random.Random(seed)
    shapes = [
        "what did {person} say about the {thing}",
        "{tool} {thing}",
        "when is the {adj} {thing}",
        "{person} {thing} {month}",
        "how do we {verb} the {thing} with {tool}",
    ]
    out = []
    for _ in range(count):
        out.append(
            rng.choice(shapes).format(
                person=rng.choice(PEOPLE),
                thing=rng.choice(THINGS),
                tool=rng.choice(TOOLS),
                adj=rng.choice(ADJECTIVES),
                month=rng.choice(MONTHS),
                verb=rng.choice(VERBS),
            )
        )
    return out
