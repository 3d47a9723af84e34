"""The graph reads ordinary sentences: each slot in many phrasings and voices (terse, chatty,
lower case, non-native), negations, corrections, plans, the user's own name, first names and
accents, and no junk entities. Through the CLI: `store`, `graph build`, `graph relations`,
`graph entities`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.clikit import cli_json

Triple = tuple[str, str, str]


def relations_after(
    capsys: pytest.CaptureFixture[str], home: Path, *texts: str
) -> list[dict[str, Any]]:
    """Store each text as a memory, index them, and return every relation."""
    for text in texts:
        cli_json(capsys, home, "store", "--text", text, "--category", "notes")
    cli_json(capsys, home, "graph", "build")
    return list(cli_json(capsys, home, "graph", "relations")["relations"])


def current(relations: list[dict[str, Any]]) -> set[Triple]:
    return {(r["subject"], r["predicate"], r["object"]) for r in relations if r["current"]}


PHRASINGS: list[tuple[str, Triple]] = [
    # where they live
    ("I live in Leeds.", ("User", "lives_in", "Leeds")),
    ("Lives in Leeds now.", ("User", "lives_in", "Leeds")),
    ("Oh and by the way, I'm based in Leeds these days!", ("User", "lives_in", "Leeds")),
    ("i live in leeds now", ("User", "lives_in", "Leeds")),
    ("I am living in Leeds since 2 years", ("User", "lives_in", "Leeds")),
    ("I relocated to Leeds.", ("User", "lives_in", "Leeds")),
    ("Me and my wife moved to Leeds, finally!", ("User", "lives_in", "Leeds")),
    ("Maya Chen, our designer, now lives in Porto.", ("Maya Chen", "lives_in", "Porto")),
    # where they work
    ("I work at Globex.", ("User", "works_at", "Globex")),
    ("i work for globex", ("User", "works_at", "Globex")),
    ("So I joined Globex last month and it's great.", ("User", "works_at", "Globex")),
    ("Now I am work for Globex.", ("User", "works_at", "Globex")),
    ("Great news - I got a job at Globex!", ("User", "works_at", "Globex")),
    ("Maya used to work at Acme and now works at Globex.", ("Maya", "works_at", "Globex")),
    # whom they report to
    ("My manager is Priya.", ("User", "reports_to", "Priya")),
    ("I report to Priya.", ("User", "reports_to", "Priya")),
    ("my new boss is priya", ("User", "reports_to", "Priya")),
    ("Priya is my manager now.", ("User", "reports_to", "Priya")),
    ("New boss is Priya.", ("User", "reports_to", "Priya")),
    ("Priya is our team lead.", ("User", "team_lead", "Priya")),
    # role
    ("I'm a staff engineer.", ("User", "role", "staff engineer")),
    ("i work as a data scientist", ("User", "role", "data scientist")),
    ("My title is senior designer.", ("User", "role", "senior designer")),
    ("Got promoted to engineering manager!", ("User", "role", "engineering manager")),
    ("Maya is our designer.", ("Maya", "role", "designer")),
    # what a person or project uses, by category
    ("Orchard uses Kafka for its queue.", ("Orchard", "uses_queue", "Kafka")),
    ("We moved Ledgerly to Postgres.", ("Ledgerly", "uses_database", "PostgreSQL")),
    ("Ledgerly now uses Postgres.", ("Ledgerly", "uses_database", "PostgreSQL")),
    ("ledgerly runs on postgres", ("Ledgerly", "uses_database", "PostgreSQL")),
    ("Our CI is GitHub Actions.", ("User", "uses_ci", "GitHub Actions")),
    ("we use redis as a cache", ("User", "uses_cache", "Redis")),
    ("We switched from Jenkins to CircleCI.", ("User", "uses_ci", "CircleCI")),
    # what they lead
    ("Maya leads Ledgerly.", ("Maya", "leads", "Ledgerly")),
    ("Maya is in charge of Ledgerly.", ("Maya", "leads", "Ledgerly")),
    # preferences
    ("I prefer tea.", ("User", "prefers_drink", "tea")),
    ("I'd rather have tea, honestly.", ("User", "prefers_drink", "tea")),
    ("i drink tea now", ("User", "prefers_drink", "tea")),
    ("My favourite drink is tea.", ("User", "prefers_drink", "tea")),
    ("I switched from coffee to tea.", ("User", "prefers_drink", "tea")),
]


@pytest.mark.parametrize(("text", "expected"), PHRASINGS, ids=[t for t, _ in PHRASINGS])
def test_a_phrasing_states_its_relation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: Triple
) -> None:
    assert expected in current(relations_after(capsys, tmp_path / "home", text))


EVENTS = [
    "The offsite is on March 3, 2031.",
    "the offsite is scheduled for 3 March 2031",
    "Our offsite will be on March 3rd 2031.",
    "Reminder: offsite is 2031-03-03.",
]


@pytest.mark.parametrize("text", EVENTS)
def test_an_event_has_its_date(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    assert ("Offsite", "happens_on", "2031-03-03") in current(
        relations_after(capsys, tmp_path / "home", text)
    )


def test_an_event_moved_keeps_its_old_date_as_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = relations_after(
        capsys,
        tmp_path / "home",
        "The offsite is on March 3, 2031.",
        "The offsite moved to March 10, 2031.",
    )
    dates = {r["object"]: r["current"] for r in found if r["predicate"] == "happens_on"}
    assert dates == {"2031-03-03": False, "2031-03-10": True}


def test_a_new_tool_of_a_category_replaces_the_old_but_another_category_adds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = relations_after(
        capsys,
        tmp_path / "home",
        "Ledgerly uses MySQL.",
        "Ledgerly uses Redis as a cache.",
        "We moved Ledgerly to Postgres.",
    )
    assert current(found) == {
        ("Ledgerly", "uses_database", "PostgreSQL"),
        ("Ledgerly", "uses_cache", "Redis"),
    }
    assert ("Ledgerly", "uses_database", "MySQL") in {
        (r["subject"], r["predicate"], r["object"]) for r in found
    }


@pytest.mark.parametrize(
    "said",
    [
        "I no longer work at Globex.",
        "I quit Globex.",
        "I left Globex last week.",
        "i dont work at globex anymore",
        "Resigned from Globex today.",
    ],
)
def test_a_negation_ends_the_fact_with_no_successor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], said: str
) -> None:
    found = relations_after(capsys, tmp_path / "home", "I work at Globex.", said)
    assert not any(r["predicate"] == "works_at" and r["current"] for r in found)
    ended = [r for r in found if r["predicate"] == "works_at" and "negated" not in r["flags"]]
    assert len(ended) == 1 and ended[0]["valid_to"] is not None


@pytest.mark.parametrize(
    ("first", "fix"),
    [
        ("I live in Lees.", "Actually it's Leeds, not Lees."),
        ("I live in Lees.", "Sorry, I meant Leeds."),
        ("I live in Lees.", "correction: I live in Leeds, not Lees"),
    ],
)
def test_a_correction_replaces_the_wrong_statement_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str, fix: str
) -> None:
    found = relations_after(capsys, tmp_path / "home", first, fix)
    lives = {r["object"]: r for r in found if r["predicate"] == "lives_in"}
    assert lives["Leeds"]["current"] and not lives["Lees"]["current"]
    assert lives["Lees"]["span"] == "corrected"
    assert lives["Leeds"]["valid_from"] == lives["Lees"]["valid_from"]  # held all along


@pytest.mark.parametrize(
    "plan",
    [
        "I'm moving to Berlin in March 2031.",
        "If I moved to Berlin I'd need a warmer coat.",
        "I might move to Berlin next year.",
        "thinking about relocating to berlin",
    ],
)
def test_a_plan_is_not_current_and_closes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], plan: str
) -> None:
    found = relations_after(capsys, tmp_path / "home", "I live in Leeds.", plan)
    assert current(found) >= {("User", "lives_in", "Leeds")}
    berlin = [r for r in found if r["object"] == "Berlin"]
    assert berlin and all("tentative" in r["flags"] and not r["current"] for r in berlin)


def test_two_updates_in_one_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = relations_after(
        capsys,
        tmp_path / "home",
        "I live in Manchester and work at Acme.",
        "Big week: I moved from Manchester to Leeds and started at Globex.",
    )
    assert current(found) == {("User", "lives_in", "Leeds"), ("User", "works_at", "Globex")}


def test_the_user_is_named_and_found_by_that_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    relations_after(capsys, home, "Hi, I'm Sam.", "I live in Leeds.")
    shown = cli_json(capsys, home, "graph", "show", "sam")
    assert shown["name"] == "User" and "Sam" in shown["aliases"]
    names = [e["name"] for e in cli_json(capsys, home, "graph", "entities")["entities"]]
    assert "Sam" not in names


def test_a_first_name_means_the_one_person_of_that_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    found = relations_after(
        capsys, home, "Maya Chen is our designer.", "Maya moved to Porto last weekend."
    )
    assert ("Maya Chen", "lives_in", "Porto") in current(found)
    people = [
        e["name"]
        for e in cli_json(capsys, home, "graph", "entities", "--kind", "person")["entities"]
    ]
    assert people.count("Maya Chen") == 1 and "Maya" not in people


def test_a_full_name_joins_the_person_known_by_first_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    found = relations_after(capsys, home, "Maya works at Globex.", "Maya Chen moved to Porto.")
    assert current(found) == {
        ("Maya Chen", "works_at", "Globex"),
        ("Maya Chen", "lives_in", "Porto"),
    }


def test_two_people_of_one_first_name_stay_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = relations_after(
        capsys,
        tmp_path / "home",
        "Maya Chen works at Globex.",
        "Maya Lopez works at Initech.",
        "Maya moved to Porto.",
    )
    assert not any(
        r["subject"] in ("Maya Chen", "Maya Lopez") for r in found if r["object"] == "Porto"
    )


def test_accents_and_case_fold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    found = relations_after(capsys, home, "Inês works at Globex.", "ines moved to lisbon")
    assert current(found) == {("Inês", "works_at", "Globex"), ("Inês", "lives_in", "Lisbon")}
    assert cli_json(capsys, home, "graph", "show", "INES")["name"] == "Inês"
    assert cli_json(capsys, home, "graph", "search", "where does Ines live")["answer"][
        0
    ].startswith("Inês lives in Lisbon")


def test_no_junk_entities(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    relations_after(
        capsys,
        home,
        "Noted. First I'll check the logs with Maya Chen on Mondays.",
        "Got it! Thanks, see you after Christmas. Sounds good.",
        "Okay, the review is every Friday; Easter and New Year's Eve are off.",
        "Sure. Then we talk to Priya Patel before Thanksgiving.",
    )
    names = {
        e["name"] for e in cli_json(capsys, home, "graph", "entities", "--limit", "200")["entities"]
    }
    assert names == {"Maya Chen", "Priya Patel"}
