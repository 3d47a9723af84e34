"""A deterministic demo home: two weeks of a small agent's life under a fixed clock.

Used by the TUI tests and snapshots (and handy to look at: `python -m tests.tui.demo DIR`
builds one, then `tiermem --home DIR` shows it; the clock there is the real one, so ages differ).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tiermem.core import conflicts, curate, episodes, graph
from tiermem.core.engine import Memory
from tiermem.core.scoring import DAY
from tiermem.core.warm import memory_id

START = 1_767_225_600.0  # 2026-01-01 00:00 UTC
DAYS = 40
NOW = START + DAYS * DAY + 10 * 3600.0  # day 41, 10:00 UTC: what the app's clock says


class FixedClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


FACTS: list[tuple[str, str, float, dict[str, list[str]]]] = [
    (
        "Hackathon deadline is February 15, demo video required",
        "projects/evoclaw/bsc",
        0.9,
        {"urls": ["https://dorahacks.io/hackathon/bsc"]},
    ),
    (
        "EvoClaw deploys with `make deploy` from the release branch",
        "projects/evoclaw",
        0.8,
        {"commands": ["make deploy"], "paths": ["/srv/evoclaw"]},
    ),
    ("Sarah prefers short status updates on Fridays", "owner/preferences", 0.6, {}),
    ("Luna is allergic to peanuts", "owner/family", 0.95, {}),
    (
        "The staging database lives at db.staging.internal:5432",
        "technical/databases",
        0.7,
        {"urls": ["postgres://db.staging.internal:5432"]},
    ),
    (
        "Use uv for every Python project; pip only inside containers",
        "technical/python",
        0.7,
        {"commands": ["uv sync"]},
    ),
    ("Marco agreed to review the BSC contract audit by Thursday", "projects/evoclaw/bsc", 0.6, {}),
    ("The website redesign moved to March", "projects/website", 0.5, {}),
    ("Coffee with Priya was fun, she likes jazz", "people/friends", 0.3, {}),
    (
        "Lesson: always run the migration dry-run before production",
        "lessons/ops",
        0.85,
        {"commands": ["tiermem consolidate --mode full"]},
    ),
    (
        "Grafana dashboard for evoclaw latency",
        "projects/evoclaw",
        0.5,
        {"urls": ["https://grafana.example.org/d/evoclaw"]},
    ),
    (
        "Backups run nightly at 02:00 UTC to the NAS",
        "technical/deploy",
        0.6,
        {"paths": ["/mnt/nas/backups"]},
    ),
    ("The quarterly budget review is on January 20", "work/budget", 0.6, {}),
    (
        "Chen recommended the book Designing Data-Intensive Applications",
        "people/colleagues",
        0.4,
        {},
    ),
    ("Rust rewrite of the parser is paused until Q2", "technical/rust", 0.5, {}),
    ("Sarah's birthday is in May", "owner/family", 0.7, {}),
    (
        "Textual makes terminal UIs pleasant; try it for the memory browser",
        "ideas/product",
        0.5,
        {"urls": ["https://textual.textualize.io"]},
    ),
    ("The flaky CI test was a timezone bug", "lessons/coding", 0.6, {}),
    (
        "Cloudflare tunnel config is in the infra repo",
        "projects/infra",
        0.5,
        {"paths": ["infra/cloudflared/config.yml"]},
    ),
    ("Lunch on Tuesday was pasta", "casual", 0.1, {}),
    ("Gym on Mondays and Thursdays", "owner/health", 0.4, {}),
    ("Omar from the vendor team sends invoices monthly", "people/vendors", 0.4, {}),
    ("Demo for the hackathon needs a 3 minute video", "projects/evoclaw/bsc", 0.7, {}),
    ("Prefer Postgres over MySQL for new services", "technical/databases", 0.6, {}),
]
QUERIES = [
    "hackathon deadline",
    "deploy evoclaw",
    "sarah",
    "database staging",
    "budget",
    "backups",
    "allergy luna",
    "rust parser",
]


TALKS = {
    4: [
        "Marco works on EvoClaw and agreed to review the BSC contract audit.",
        "The hackathon demo video needs three minutes; Sarah prefers short updates.",
    ],
    16: [
        "I moved to Paris in January 2026 and work from the Station F campus.",
        "The staging database runs Postgres; EvoClaw deploys with make deploy.",
    ],
    30: [
        "Priya works at Acme Labs since 2026-01 and likes jazz concerts.",
        "The website redesign moved to March, said Sam.",
    ],
}
"""Day → a conversation of that day, kept as an episode (three: below the dreaming threshold)."""


def talk(mem: Memory, day: int) -> None:
    draft = episodes.Draft(
        source=f"demo:{day}",
        texts=TALKS[day],
        participants=["user", "assistant"],
        fact_ids=[memory_id("default", text) for text, *_ in FACTS[day * 2 : day * 2 + 2]],
        started_at=mem.now(),
        ended_at=mem.now() + 900,
    )
    with mem.db.transaction():
        episode = episodes.write(mem, draft)
        graph.index_episode(mem, episode.id, "\n".join(draft.texts))


def build(home: Path) -> FixedClock:
    """Fill `home` (a fresh folder) and return the clock at NOW."""
    clock = FixedClock(START + 9 * 3600.0)
    with Memory(home, "default", clock=clock) as mem:
        mem.update_hot("identity", {"agent_name": "Claw", "owner_name": "Sam", "role": "assistant"})
        mem.update_hot(
            "owner_profile",
            {
                "timezone": "Europe/Paris",
                "work_hours": "9-18",
                "topics_loved": ["systems", "cycling"],
            },
        )
        mem.add_project("EvoClaw", "agent framework, BSC hackathon entry", "active")
        mem.add_project("Website", "personal site redesign", "paused")
        mem.add_lesson("Never force-push to main", 0.9, "ops")
        mem.add_lesson("Write the test before the fix", 0.75, "coding")
        mem.add_task("Record the hackathon demo video")
        mem.add_task("Renew the domain")
        per_day = 2
        for day in range(DAYS + 1):
            clock.now = START + day * DAY + 9 * 3600.0
            for text, category, importance, meta in FACTS[day * per_day : (day + 1) * per_day]:
                mem.store(
                    text,
                    category,
                    importance,
                    source="demo",
                    urls=meta.get("urls", ()),
                    commands=meta.get("commands", ()),
                    paths=meta.get("paths", ()),
                )
            for q in QUERIES[day % len(QUERIES) : day % len(QUERIES) + 1 + day % 3]:
                mem.retrieve(q)
            if day == 25:  # recent at NOW: hot memory keeps the events of the last 30 days
                mem.add_event("Kickoff call with the BSC team")
            if day == 9:
                mem.complete_task(mem.hot().active_context.tasks[-1].id)
            if day == 12:
                curate.set_pinned(mem, memory_id("default", FACTS[3][0]), True)
            if day in TALKS:
                talk(mem, day)
            clock.now += 8 * 3600.0
            mem.consolidate("daily" if day % 7 else "quick")
            mem.snapshot_metrics()
        clock.now = NOW
        mem.retrieve("hackathon demo")
        mem.snapshot_metrics()
        with mem.db.transaction():  # a merge with another device kept one value, lost one
            conflicts.record_conflict(
                mem.db,
                "default",
                "identity",
                "role",
                "assistant",
                "research assistant",
                "0001767225600000-0000-aa",
                "0001767225500000-0000-bb",
                "bb" * 16,
                NOW - 3600.0,
                reason="both devices changed it",
            )
    with Memory(home, "research", clock=clock) as other:
        other.store("Paper on tiered memory cites MemGPT", "papers", 0.6)
        other.store("Benchmark LongMemEval has 500 questions", "benchmarks", 0.7)
    return clock


if __name__ == "__main__":
    build(Path(sys.argv[1]))
