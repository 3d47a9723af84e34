"""Facts that change, through the CLI: a dated chat history imported, then the questions a user
asks. Each test tries to break one promise: the current fact first, a correction, a negation,
a future move, two updates in one conversation, an undo, an as-of date before any fact."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import Cli

DAY = 86400.0


def at(day: str) -> float:
    return dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC).timestamp()


def chatgpt_export(path: Path, conversations: list[tuple[str, list[str]]]) -> Path:
    """A ChatGPT `conversations.json`: each conversation on its day, user lines each answered
    by an assistant acknowledgement."""
    out = []
    for n, (day, lines) in enumerate(conversations):
        start = at(day) + 9 * 3600
        mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "children": ["m0"]}}
        messages = []
        for i, line in enumerate(lines):
            messages += [("user", line), ("assistant", "Got it, I'll keep that in mind.")]
            del i
        for i, (role, text) in enumerate(messages):
            mapping[f"m{i}"] = {
                "id": f"m{i}",
                "parent": "root" if i == 0 else f"m{i - 1}",
                "children": [f"m{i + 1}"] if i + 1 < len(messages) else [],
                "message": {
                    "id": f"m{i}",
                    "author": {"role": role},
                    "create_time": start + 60 * i,
                    "content": {"content_type": "text", "parts": [text]},
                },
            }
        out.append(
            {
                "title": f"chat {n}",
                "create_time": start,
                "update_time": start + 600,
                "conversation_id": f"00000000-0000-8000-9000-{n:012d}",
                "current_node": f"m{len(messages) - 1}",
                "mapping": mapping,
            }
        )
    path.mkdir(parents=True, exist_ok=True)
    (path / "conversations.json").write_text(json.dumps(out))
    return path


def imported(cli: Cli, tmp_path: Path, conversations: list[tuple[str, list[str]]]) -> None:
    folder = chatgpt_export(tmp_path / "export", conversations)
    code, _out, err = cli("import", "--from", "chatgpt", str(folder))
    assert code == 0, err


def openclaw_notes(cli: Cli, tmp_path: Path, days: dict[str, list[str]]) -> None:
    """An OpenClaw workspace about its owner, Sam Rivera (daily notes in the third person),
    imported."""
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "MEMORY.md").write_text("# MEMORY.md\n\n## Owner\n- Sam Rivera, works at Acme.\n")
    for day, notes in days.items():
        lines = "".join(f"- {note}\n" for note in notes)
        (workspace / "memory" / f"{day}.md").write_text(f"# {day}\n\n{lines}")
    code, _out, err = cli("import", "--from", "openclaw", str(workspace))
    assert code == 0, err


def texts(cli: Cli, *args: str) -> list[str]:
    return [r["text"] for r in cli.json("retrieve", *args)["results"]]


def first_with(results: list[str], *words: str) -> int:
    """The rank of the first result naming one of `words` (a large number when none does)."""
    return next(
        (i for i, t in enumerate(results) if any(w.casefold() in t.casefold() for w in words)),
        99,
    )


def test_a_move_puts_the_new_city_first_and_explains_the_old_one(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-09-02", ["I live in Lisbon and I love the trams here."]),
            ("2026-10-19", ["Big news: I moved to Porto last weekend!"]),
        ],
    )
    found = cli.json("retrieve", "where do I live now?")["results"]
    ranked = [r["text"] for r in found]
    assert first_with(ranked, "Porto") < first_with(ranked, "Lisbon")
    old = next(r for r in found if "Lisbon" in r["text"])
    assert old["superseded_by"] and "superseded on 2026-10-1" in old["explanation"]["supersession"]
    block = cli.json("context", "--query", "where do I live now?")["context"]
    assert "Porto" in block and (
        "Lisbon" not in block or block.index("Porto") < block.index("Lisbon")
    )


def test_a_correction_replaces_at_once(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-09-10", ["My sister just moved to Lees for her new job."]),
            ("2026-09-10", ["sorry typo — actually it's Leeds, not Lees"]),
        ],
    )
    ranked = texts(cli, "where does my sister live")
    assert first_with(ranked, "Leeds") < first_with(ranked, "Lees ")


def test_a_negation_closes_the_fact_with_no_successor(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-08-01", ["I work at Acme Corp as a data engineer."]),
            ("2026-10-01", ["Quick update: I don't work at Acme anymore, I quit last week."]),
        ],
    )
    changes = cli.json("changes", "--since", "2026-09-01")["changes"]
    closed = [c for c in changes if "Acme Corp" in c["old"]["text"]]
    assert closed and closed[0]["new"] is None
    found = cli.json("retrieve", "where do I work", "--as-of", "2026-09-01")["results"]
    assert found and "Acme" in found[0]["text"] and found[0]["explanation"]["supersession"] is None


def test_a_future_move_does_not_replace_the_current_city(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-06-01", ["I live in Manchester, near the Northern Quarter."]),
            ("2026-07-15", ["I'm moving to Berlin in March, so excited"]),
            ("2026-07-20", ["If I ever moved to Oslo I would need a much warmer coat."]),
        ],
    )
    found = cli.json("retrieve", "where do I live")["results"]
    manchester = next(r for r in found if "Manchester" in r["text"])
    assert not manchester["superseded_by"] or manchester["superseded_at"] > at("2027-01-01")
    assert manchester["explanation"]["supersession"] is None
    assert all(
        "Oslo" not in c["new"]["text"]
        for c in cli.json("changes", "--since", "2026-01-01")["changes"]
        if c["new"]
    )


def test_two_updates_in_one_conversation(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-08-03", ["My manager is Priya Shah.", "Ledgerly uses MySQL for its database."]),
            (
                "2026-10-13",
                ["New boss is Diego Alvarez btw.", "We finally moved Ledgerly to Postgres."],
            ),
        ],
    )
    assert first_with(texts(cli, "who is my manager"), "Diego") < first_with(
        texts(cli, "who is my manager"), "Priya"
    )
    ranked = texts(cli, "what database does Ledgerly use")
    assert first_with(ranked, "Postgres") < first_with(ranked, "MySQL")
    changed = cli.json("changes", "--since", "2026-10-01")["changes"]
    olds = " ".join(c["old"]["text"] for c in changed)
    assert "Priya" in olds and "MySQL" in olds


def test_a_wrong_supersession_can_be_undone_and_redone(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-08-01", ["My manager is Priya Shah."]),
            ("2026-09-01", ["My new manager is Diego Alvarez."]),
        ],
    )
    priya = next(r for r in cli.json("retrieve", "manager")["results"] if "Priya" in r["text"])
    diego = next(r for r in cli.json("retrieve", "manager")["results"] if "Diego" in r["text"])
    assert priya["superseded_by"] == diego["id"]
    cli.json("unsupersede", priya["id"])
    again = next(r for r in cli.json("retrieve", "manager")["results"] if r["id"] == priya["id"])
    assert again["superseded_by"] == "" and again["explanation"]["supersession"] is None
    history = cli.json("history", diego["id"])["history"]
    assert [h["id"] for h in history] == [diego["id"]]
    cli.json("supersede", priya["id"], diego["id"])
    history = cli.json("history", diego["id"])["history"]
    assert [h["id"] for h in history] == [priya["id"], diego["id"]]
    code, _out, err = cli("supersede", diego["id"], priya["id"])
    assert code == 3 and "already superseded" in err and "Traceback" not in err
    code, _out, err = cli("unsupersede", diego["id"])
    assert code == 3 and "not superseded" in err


def test_as_of_answers_what_was_true_then(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-01", ["I live in Lisbon."]),
            ("2026-10-17", ["I moved to Porto last weekend."]),
        ],
    )
    assert first_with(texts(cli, "where do I live", "--as-of", "2026-09-15"), "Lisbon") == 0
    assert first_with(texts(cli, "where do I live", "--as-of", "2026-09-15"), "Porto") == 99
    assert texts(cli, "where do I live", "--as-of", "2026-06-01") == []  # before any fact
    code, _out, err = cli("retrieve", "where do I live", "--as-of", "last tuesday")
    assert code == 3 and "ISO date" in err


def test_a_changed_request_leaves_hot_memory(cli: Cli) -> None:
    said = "Please post the standup summary in #general every morning."
    cli.json("store", "--text", said)
    cli.json("hot", "--add-task", "post the standup summary in #general every morning")
    assert "every morning" in json.dumps(cli.json("hot")["hot"])
    cli.json("store", "--text", "Stop posting the standup summary in #general, DM it instead.")
    hot = cli.json("hot")
    assert "every morning" not in json.dumps(hot["hot"])
    assert "every morning" not in Path(hot["memory_md"]).read_text()
    ranked = texts(cli, "where should the standup summary go")
    assert first_with(ranked, "DM") < first_with(ranked, "every morning")


def test_the_later_word_wins_when_the_newer_fact_names_an_earlier_date(cli: Cli) -> None:
    cli.json("store", "--text", "I live in Lisbon.")
    cli.json("store", "--text", "I moved to Porto last weekend.")  # said later, dated earlier
    ranked = texts(cli, "where do I live")
    assert first_with(ranked, "Porto") < first_with(ranked, "Lisbon")
    assert [c["new"]["text"] for c in cli.json("changes", "--since", "2000-01-01")["changes"]] == [
        "I moved to Porto last weekend."
    ]


def test_a_question_finds_the_newest_answer_that_shares_no_word_with_it(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-06-01", ["I work at Lumen Travel and my boss is Carla Mendes."]),
            ("2026-09-20", ["We completed the move to York on Saturday, the house is lovely."]),
            ("2026-10-02", ["Some news: I report to Diego Alvarez now."]),
            ("2026-11-25", ["We shall spend Christmas in Edinburgh with my sister."]),
        ],
    )
    found = cli.json("retrieve", "In which city do I currently live?", "--limit", "3")["results"]
    assert "York" in found[0]["text"]  # no word in common, and a newer plan names Edinburgh
    assert "newest statement" in found[0]["explanation"]["via"]
    block = cli.json("context", "--query", "In which city do I currently live?")
    assert found[0]["id"] in block["memories"]  # injected, though it shares no word with it
    assert "Diego" in texts(cli, "who's my manager these days?")[0]
    ranked = texts(cli, "who's my manager?", "--as-of", "2026-08-01")
    assert first_with(ranked, "Carla") == 0 and first_with(ranked, "Diego") == 99


def test_lower_case_chat_states_facts_a_question_finds(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-01", ["i live in echo park w my roommate kayla, rent is wild"]),
            ("2026-09-01", ["officially moved to long beach this weekend"]),
            ("2026-10-01", ["also kayla moved to sf last month and i miss her"]),
        ],
    )
    assert "long beach" in texts(cli, "where do i live rn")[0]
    assert "sf" in texts(cli, "where does kayla live")[0]


def test_a_present_question_gets_the_latest_said_about_its_topic(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-02", ["Every Thursday I play football five-a-side with colleagues."]),
            ("2026-08-14", ["My knee hurts after football, the left one, what can I do?"]),
            ("2026-10-01", ["The doctor says the ligament is damaged, I must stop football."]),
        ],
    )
    found = cli.json("retrieve", "do I still play football?", "--limit", "3")["results"]
    assert "stop football" in found[0]["text"]
    assert "the latest said about it (2026-10-01)" in found[0]["explanation"]["via"]
    block = cli.json("context", "--query", "do I still play football?")["context"]
    assert block.index("stop football") < block.index("Every Thursday")
    then = texts(cli, "do I still play football?", "--as-of", "2026-07-20")
    assert "Every Thursday" in then[0]  # what was said by then
    past = texts(cli, "when did I first play football with colleagues?")
    assert "Every Thursday" in past[0]  # a question about the past is not answered by the latest


def test_a_sentence_saying_it_continues_the_attribute_named_before(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-18", ["the party is oct 17!!! rooftop at skyline downtown, heat lamps"]),
            ("2026-10-03", ["skyline double booked us so i'm moving the party. it's oct 31 now"]),
        ],
    )
    assert "oct 31" in texts(cli, "when's the party?")[0]


def test_an_opening_word_is_not_whom_a_statement_is_about(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            (
                "2026-08-06",
                ["I need a letter informing my head of department, Prof Alan Reid, of my move."],
            ),
            ("2026-10-02", ["First, my head of department at York is Professor Meera Shah."]),
        ],
    )
    ranked = texts(cli, "Who is my head of department?")
    assert first_with(ranked, "Meera Shah") < first_with(ranked, "Alan Reid")


def test_old_events_and_tasks_leave_hot_memory_for_warm(cli: Cli, tmp_path: Path) -> None:
    today = dt.datetime.now(dt.UTC).date()
    long_ago, lately = (str(today - dt.timedelta(days=d)) for d in (90, 2))
    imported(
        cli,
        tmp_path,
        [
            (long_ago, ["I must renew the parking permit for Marlow Street by Friday."]),
            (lately, ["I must book the Brighton hotel for the conference by Friday."]),
        ],
    )
    hot = json.dumps(cli.json("hot")["hot"])
    assert "Brighton" in hot and "Marlow" not in hot
    assert any("Marlow Street by" in t for t in texts(cli, "parking permit"))  # warm, not lost


def test_a_relative_s_answer_is_found_by_the_name_memory_gives_them(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-24", ["My husband Chidi and I celebrate our anniversary next month."]),
            ("2026-07-25", ["Chidi works at Lindqvist Architects in Edinburgh."]),
            ("2026-11-02", ["Family news: Chidi has left Lindqvist and joined Arup in Leeds."]),
        ],
    )
    found = cli.json("retrieve", "Where does my husband work?", "--limit", "3")["results"]
    assert "Arup" in found[0]["text"] and "newest statement" in found[0]["explanation"]["via"]
    then = texts(cli, "Where did my husband work?", "--as-of", "2026-09-01")
    assert first_with(then, "Lindqvist Architects in") < first_with(then, "Arup")


def test_a_note_replaced_for_one_fact_still_answers_its_others_as_of_then(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-06", ["payroll-api runs on mysql 8. deploys after 6pm, I'm in London"]),
            ("2026-08-11", ["heads up: we ditched mysql, payroll-api is on postgres 16 now"]),
            ("2026-08-25", ["im in manchester now btw, moved last week"]),
            ("2026-11-16", ["moving back to accra in january, can you add ghana species"]),
        ],
    )
    assert "manchester" in texts(cli, "where do i live", "--limit", "3")[0]  # accra is a plan
    assert "London" in texts(cli, "where was i living", "--as-of", "2026-08-15")[0]
    assert "postgres" in texts(cli, "what database does payroll-api use?")[0]


def test_notes_about_their_owner_in_the_third_person_answer_the_owner(
    cli: Cli, tmp_path: Path
) -> None:
    openclaw_notes(
        cli,
        tmp_path,
        {
            "2026-07-03": ["Sam's manager is Priya Nair; weekly 1:1 on Mondays."],
            "2026-09-10": [
                "Sam moved to Leeds on Thursday.",
                "Sam was made team lead today: four engineers report to him now.",
            ],
        },
    )
    found = cli.json("retrieve", "where do I live?", "--limit", "3")["results"]
    assert "Leeds" in found[0]["text"] and "newest statement" in found[0]["explanation"]["via"]
    assert "Priya" in texts(cli, "who is my manager?", "--limit", "3")[0]  # not the team lead


def test_a_new_role_said_any_way_replaces_the_old_title(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-02", ["i'm the social media coordinator at glowbar, we launch a serum"]),
            ("2026-09-21", ["Context: I am product designer on the payments team."]),
            ("2026-10-13", ["AISHA MADE ME DESIGN MANAGER, two designers reporting to me"]),
        ],
    )
    found = cli.json("retrieve", "whats my job title", "--limit", "3")["results"]
    assert "DESIGN MANAGER" in found[0]["text"]
    assert "newest statement" in found[0]["explanation"]["via"]
    then = texts(cli, "what was my job title", "--as-of", "2026-08-01")
    assert "coordinator" in then[0]


@pytest.mark.parametrize(
    "said", ["Moved: 🎉🎉", "Home: —", "Sam told me that 🎉 moved", "Lives: ..."]
)
def test_a_lead_in_with_nothing_after_it_is_stored_and_asked_about(cli: Cli, said: str) -> None:
    cli.json("store", "--text", said)
    cli.json("store", "--text", "I moved to Porto last weekend.")
    assert "Porto" in texts(cli, "where do I live now?")[0]


def test_context_leaves_out_a_graph_fact_older_than_the_newest_statement(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-01", ["I am a product designer at Acme, mostly on the checkout flow."]),
            ("2026-10-13", ["Aisha made me design manager, two designers report to me now"]),
        ],
    )
    block = cli.json("context", "--query", "what's my job title?")["context"]
    facts = (
        block.split("## Current facts", 1)[1].split("\n## ", 1)[0] if "## Current" in block else ""
    )
    assert "product designer" not in facts
    designer = block.find("product designer")
    assert designer == -1 or block.index("design manager") < designer


def test_a_role_held_at_a_place_answers_where_someone_worked(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-02", ["i'm the social media coordinator at glowbar, we launch a serum"]),
            ("2026-08-20", ["the company has credits with Google so we move to GCP"]),
            ("2026-09-21", ["I GOT THE TIDAL JOB!!! start date is sept 21"]),
        ],
    )
    assert "glowbar" in texts(cli, "where did i work", "--as-of", "2026-08-30")[0]
    assert "TIDAL" in texts(cli, "where do i work now?")[0]


def test_chat_spellings_of_question_words_ask(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-02", ["my boss is brooke, she wants 5 caption options"]),
            ("2026-09-30", ["new boss is marcus, he runs the label's social team"]),
        ],
    )
    found = cli.json("retrieve", "whos my boss", "--limit", "3")["results"]
    assert "marcus" in found[0]["text"] and "newest statement" in found[0]["explanation"]["via"]


def test_a_whole_conversation_stored_as_one_memory_is_never_replaced_by_another(
    cli: Cli,
) -> None:
    filler = " ".join(f"We talked about topic {n} for a while." for n in range(30))
    first = cli.json("store", "--text", f"I live in Lisbon. {filler}")["id"]
    cli.json("store", "--text", f"I live in Porto now. {filler}")
    assert not cli.json("get", first)["superseded_by"]  # too many things for one value to end
    short = cli.json("store", "--text", "I live in Braga.")["id"]
    cli.json("store", "--text", "I moved to Faro last weekend.")
    assert cli.json("get", short)["superseded_by"]
