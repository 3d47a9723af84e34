"""Facts that change said plainly, the way people who are not writing for a parser say them: a
diet, a sentence that opens with "every" or "many", "no more", and a summary that must not
turn "not vegan anymore" into "vegan". Each imports a dated chat history through the CLI."""

from __future__ import annotations

from pathlib import Path

from tests.clikit import Cli
from tests.features.test_facts_change import first_with, imported, texts


def changed(cli: Cli, since: str) -> list[tuple[str, str]]:
    """(old text, new text or '') of every change `tiermem changes --since` lists."""
    listed = cli.json("changes", "--since", since)["changes"]
    return [(c["old"]["text"], (c["new"] or {}).get("text", "")) for c in listed]


def test_a_new_diet_replaces_the_old_one(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-30", ["Since two weeks I don't eat meat, now I am vegetarian."]),
            ("2026-10-02", ["I eat fish again, so now I am pescatarian, not vegetarian."]),
        ],
    )
    diet = texts(cli, "am I vegetarian?", "--limit", "3")
    assert first_with(diet, "pescatarian") < first_with(diet, "don't eat meat")
    assert any(
        "vegetarian" in old and "pescatarian" in new for old, new in changed(cli, "2026-09-01")
    )


def test_not_being_something_anymore_answers_am_i_that(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-03-08", ["i've been vegan for like 2 yrs, give me easy vegan lunches pls"]),
            ("2026-10-29", ["ok confession i'm not vegan anymore, cheese won. vegetarian now tho"]),
        ],
    )
    found = cli.json("retrieve", "am i vegan", "--limit", "3")["results"]
    assert found and "not vegan anymore" in found[0]["text"]
    old = cli.json("retrieve", "easy vegan lunches", "--limit", "5")["results"]
    said = next(r for r in old if r["text"].startswith("i've been vegan"))
    assert "no longer true" in said["explanation"]["supersession"]
    record = [t for t in texts(cli, "confession", "--limit", "10") if "2026-10-29" in t]
    assert record and all("not vegan" in t or "vegan" not in t for t in record)


def test_a_sentence_opening_with_every_is_about_its_speaker(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-05-04", ["Every morning I drink two espressos before the standup."]),
            ("2026-09-15", ["Doctor's orders: I switched to matcha, no more espresso."]),
        ],
    )
    drink = texts(cli, "what do I drink in the morning?", "--limit", "3")
    assert first_with(drink, "matcha") < first_with(drink, "two espressos")
    assert any("espressos" in old for old, _ in changed(cli, "2026-09-01"))


def test_the_left_one_is_no_leaving(cli: Cli, tmp_path: Path) -> None:
    """ "Left" as a side is not "left" as a departure: the job stays current."""
    imported(
        cli,
        tmp_path,
        [
            ("2026-02-01", ["I work at Harrow Analytics in Leeds as a data engineer."]),
            (
                "2026-03-10",
                ["Many evenings I work at Harrow late, and my wrist hurts, the left one."],
            ),
        ],
    )
    found = cli.json("retrieve", "where do I work?", "--limit", "3")["results"]
    job = next(r for r in found if "data engineer" in r["text"])
    assert not job["superseded_by"] and not job["explanation"].get("supersession")
    assert changed(cli, "2026-01-01") == []


def test_a_host_left_as_off_is_replaced_and_the_summary_says_off(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-06", ["the api is hosted on heroku, deploys after 6pm"]),
            ("2026-10-05", ["we're off heroku. the api runs on fly.io since friday, fix the docs"]),
        ],
    )
    host = texts(cli, "where is the api hosted?", "--limit", "3")
    assert first_with(host, "fly.io") < first_with(host, "hosted on heroku")
    assert any("hosted on heroku" in old for old, _ in changed(cli, "2026-09-01"))
    record = [t for t in texts(cli, "heroku", "--limit", "10") if "Conversation 2026-10-05" in t]
    assert record and all("off heroku" in t for t in record)
