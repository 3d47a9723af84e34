"""Distillation keeps what the person says and nothing the assistant merely acknowledges, in any
voice: terse, chatty, lower case with typos, non-native. Through the CLI (`distill`,
`conversation-end`, `store`, `hot`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import cli_json
from tiermem.core.distill import signals


def distilled(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> dict[str, Any]:
    transcript = tmp_path / "t.txt"
    transcript.write_text(text)
    return dict(cli_json(capsys, tmp_path / "home", "distill", str(transcript)))


def texts(out: dict[str, Any]) -> list[str]:
    return [f["text"] for f in out["facts"]]


SHORT_UPDATES = [
    "I moved to Porto last weekend",
    "My new manager is Diego Alvarez",
    "Ledgerly now uses Postgres",
    "I accepted the Northwind offer",
    "started at Stripe on monday :)",
    "i quit my job at acme yesterday",
    "Just relocated to Berlin!",
    "im vegan now",
    "I got promoted to staff engineer",
    "Orbit switched to Kafka last month.",
    "we moved the standup to 9:30",
    "My sister Ada had a baby girl",
    "Priya is my manager now",
    "I left Google in March.",
    "Since january I work for the city council",
    "I have 2 cats now",
]


@pytest.mark.parametrize("update", SHORT_UPDATES)
def test_a_short_life_update_is_kept(capsys, tmp_path: Path, update: str) -> None:
    out = distilled(capsys, tmp_path, f"User: {update}\nAssistant: Noted!\n")
    assert texts(out) == [update]


@pytest.mark.parametrize(
    "line",
    [
        "ok",
        "thanks!",
        "Thanks Diego!",
        "ok cool",
        "hi there, how are you?",
        "Sounds good to me, Maria.",
        "See you on Monday, Diego",
        "We decided this last week.",
        "That's what we agreed on.",
        "Let's do that tomorrow.",
        "Never mind.",
        "Lesson learned.",
        "that's the lesson we learned last week",
        "i'll do it later",
        "yes that's right",
        "That's really helpful, thanks for the tips!",
        "I'll definitely consider these suggestions.",
        "thx, makes a lot of sense",
        "This is super informative, I appreciate the detailed answer.",
    ],
)
def test_content_free_lines_give_nothing(capsys, tmp_path: Path, line: str) -> None:
    out = distilled(capsys, tmp_path, f"User: {line}\n")
    assert out["facts"] == [] and out["lessons"] == [] and out["tasks"] == []
    assert out["decisions"] == []


ACKNOWLEDGEMENTS = [
    "I'll update your location.",
    "Got it, I'll remind you on December 10.",
    "I'll keep that in mind.",
    "Noted!",
    "Sure, I'll remind you to call your mum on Friday.",
    "I've updated your profile with the new address in Porto.",
    "So you moved to Porto last weekend, congratulations!",
    "Understood — your new manager is Diego Alvarez.",
    "Your manager is now Diego Alvarez.",
    "Reminder set for December 10.",
    "Location updated.",
    "Okay! I will make sure to remember that Ledgerly uses Postgres now.",
    "Great news about the Northwind offer, congrats!",
    "Absolutely, I have saved it.",
    "Let me know if you need anything else.",
    "I need to double-check the Postgres version before I answer.",
    "Next time, I'll ask before changing your settings.",
    "You mentioned you prefer short answers.",
    "Congrats on the move to Porto!",
    "Will do, reminder added to your list for Friday.",
]


@pytest.mark.parametrize("ack", ACKNOWLEDGEMENTS)
def test_an_assistant_acknowledgement_is_never_a_fact_task_or_lesson(
    capsys, tmp_path: Path, ack: str
) -> None:
    out = distilled(capsys, tmp_path, f"User: hi\nAssistant: {ack}\n")
    assert out["facts"] == [] and out["tasks"] == [] and out["lessons"] == []
    assert out["decisions"] == [] and out["profile"] == []


def test_an_assistant_line_with_new_technical_information_is_kept(capsys, tmp_path: Path) -> None:
    out = distilled(
        capsys,
        tmp_path,
        "User: how do I restore one table?\n"
        "Assistant: Sure! `pg_restore -t invoices ledgerly.dump` restores a single table.\n"
        "Assistant: The platform team decided to pin Node 20 for the frontend build.\n",
    )
    assert texts(out) == [
        "`pg_restore -t invoices ledgerly.dump` restores a single table.",
        "The platform team decided to pin Node 20 for the frontend build.",
    ]


@pytest.mark.parametrize(
    "confirmation",
    [
        "Understood: the v2 launch is now on Tuesday, October 20.",
        "Noted, your flight to Lisbon leaves on March 3.",
        "Got it - the offsite is in Asheville on Nov 5.",
    ],
)
def test_an_assistant_confirmation_that_restates_the_person_is_not_kept(
    capsys, tmp_path: Path, confirmation: str
) -> None:
    out = distilled(
        capsys, tmp_path, f"User: sorry, tuesday oct 20 not the 21st\nAssistant: {confirmation}\n"
    )
    assert all(t != confirmation.split(maxsplit=1)[1] for t in texts(out))
    assert not any("October 20" in t or "Lisbon" in t or "Asheville" in t for t in texts(out))


@pytest.mark.parametrize(
    ("line", "task"),
    [
        ("I need to renew my passport by Dec 3", "I need to renew my passport by Dec 3"),
        ("remind me to call mum on Friday", "remind me to call mum on Friday"),
        ("pls remind me to pay the rent tmrw", "pls remind me to pay the rent tmrw"),
        ("have to send the invoice to Tiago before friday", None),
        ("dont forget to book the dentist by the 15th", None),
        ("The tax return deadline is April 30.", None),
        ("i must finish the slides for the offsite until thursday, it is urgent", None),
        ("TODO: rotate the Stripe webhook secret", "Rotate the Stripe webhook secret"),
    ],
)
def test_the_users_deadlines_and_todos_are_tasks(
    capsys, tmp_path: Path, line: str, task: str | None
) -> None:
    out = distilled(capsys, tmp_path, f"User: {line}\nAssistant: Sure, I'll remind you.\n")
    assert out["tasks"] == [task or line]
    assert [f["kind"] for f in out["facts"]] == ["task"]


@pytest.mark.parametrize(
    "rule",
    [
        "Lesson learned: always test on testnet before mainnet.",
        "always pin the python version in .python-version",
        "Never schedule deploys on Friday afternoon.",
        "Rule: no deploys after 4pm on Fridays.",
        "Next time, check the staging logs before deploying.",
        "note to self: don't push to main without green CI",
        "Don't ever run migrations without a fresh backup.",
        "From now on we always review the invoices twice.",
    ],
)
def test_an_explicit_rule_is_a_lesson(capsys, tmp_path: Path, rule: str) -> None:
    out = distilled(capsys, tmp_path, f"User: {rule}\n")
    assert len(out["lessons"]) == 1 and [f["kind"] for f in out["facts"]] == ["lesson"]


@pytest.mark.parametrize(
    "line",
    [
        "We decided to move Ledgerly to Postgres.",
        "we decided to move ledgerly to postgres",
        "After long discussion the team has decided for Svelte in the admin panel.",
        "Next time I'm in Lisbon let's grab coffee with Tiago.",
        "I never eat breakfast before 10am.",
        "Don't worry about the Stripe invoices, they are paid.",
    ],
)
def test_a_decision_or_a_plain_statement_is_not_a_lesson(capsys, tmp_path: Path, line: str) -> None:
    out = distilled(capsys, tmp_path, f"User: {line}\n")
    assert out["lessons"] == [] and out["facts"]
    assert all(f["kind"] != "lesson" for f in out["facts"])


def test_a_decision_with_content_is_a_decision_fact(capsys, tmp_path: Path) -> None:
    out = distilled(
        capsys,
        tmp_path,
        "User: We decided this last week.\nUser: we decided to move Ledgerly to Postgres\n",
    )
    assert out["decisions"] == ["we decided to move Ledgerly to Postgres"]
    assert [(f["kind"], f["category"]) for f in out["facts"]] == [("decision", "decisions")]


def test_a_conversation_end_keeps_no_acknowledgement_in_warm_or_hot_memory(
    capsys, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    transcript = tmp_path / "t.txt"
    transcript.write_text(
        "User: Hi!\n"
        + "".join(
            f"User: {u}\nAssistant: {a}\n"
            for u, a in zip(SHORT_UPDATES[:6], ACKNOWLEDGEMENTS[:6], strict=True)
        )
        + "User: We decided this last week.\n"
        "User: I need to renew my passport by Dec 3\n"
        "Assistant: Got it, I'll remind you on December 10.\n"
        "User: Lesson learned: never run migrations without a backup.\n"
        "Assistant: Next time, I'll ask before changing your settings.\n"
    )
    cli_json(capsys, home, "conversation-end", str(transcript))
    memories = cli_json(capsys, home, "export", "--format", "json")["memories"]
    stored = " | ".join(m["text"] for m in memories)
    for update in SHORT_UPDATES[:6]:
        assert update in stored
    hot = cli_json(capsys, home, "hot")["hot"]
    in_hot = json.dumps(hot)
    for ack in ("I'll", "Got it", "Noted", "remind you", "keep that in mind", "decided this"):
        assert ack not in stored and ack not in in_hot
    assert [t["text"] for t in hot["active_context"]["tasks"]] == [
        "I need to renew my passport by Dec 3"
    ]
    lessons = [x["text"] for x in hot["critical_lessons"] if x["category"] == "lessons"]
    assert lessons == ["Lesson learned: never run migrations without a backup."]


@pytest.mark.parametrize(
    "request_",
    [
        "I'm looking for some healthy snack ideas that are easy to prepare.",
        "can you suggest a good restaurant nearby",
        "I need some advice on renovating a kitchen.",
        "I was wondering if you could recommend some tutorials on the topic.",
        "Hi, I'm searching for a few good podcast recommendations.",
    ],
)
def test_a_request_to_the_assistant_is_not_knowledge(capsys, tmp_path: Path, request_: str) -> None:
    out = distilled(capsys, tmp_path, f"User: {request_}\n")
    assert out["facts"] == [] and out["tasks"] == []


def test_a_request_that_says_something_of_the_person_keeps_it(capsys, tmp_path: Path) -> None:
    line = (
        "I'm looking for tips on weathering effects for my current project, a Ford Mustang model."
    )
    assert texts(distilled(capsys, tmp_path, f"User: {line}\n")) == [line]


@pytest.mark.parametrize(
    "question",
    [
        "can you remind me to renew my passport by dec 3?",
        "Could you please remind me to call mum on Friday?",
        "pls set a reminder to pay the rent on the 1st?",
    ],
)
def test_a_reminder_asked_as_a_question_is_a_task(capsys, tmp_path: Path, question: str) -> None:
    out = distilled(capsys, tmp_path, f"User: {question}\nAssistant: Sure, will do!\n")
    assert out["tasks"] == [question] and out["facts"][0]["kind"] == "task"


@pytest.mark.parametrize(
    "line",
    [
        "Notion is a highly customizable workspace for your book journal.",
        "Many readers find that Goodreads and a paper journal complement each other.",
        "Evernote and Notion are both powerful tools for this.",
    ],
)
def test_an_assistant_statement_without_a_cue_is_chatter(capsys, tmp_path: Path, line: str) -> None:
    assert distilled(capsys, tmp_path, f"User: hi\nAssistant: {line}\n")["facts"] == []


def test_an_assistant_summing_up_its_own_answer_is_not_knowledge() -> None:
    for said in (
        "In summary, the first week is for meeting the key people and protecting your time.",
        "To sum up: keep the plan short and review it on Fridays.",
    ):
        assert signals.is_acknowledgement(said), said
    assert not signals.is_acknowledgement("The first week is for meeting the key people.")
