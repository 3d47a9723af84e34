"""Facts that change said as a move away from the old value, and answers put first: each test
imports a dated chat history through the CLI and asks what a user would ask."""

from __future__ import annotations

from pathlib import Path

from tests.clikit import Cli
from tests.features.test_facts_change import first_with, imported, openclaw_notes, texts


def test_a_date_moved_from_one_day_to_another_replaces_the_old_date(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-08", ["The deadline is 14 October."]),
            ("2026-10-09", ["The council extended the deadline from 14 October to 4 November."]),
            ("2026-11-05", ["The application went in on 3 November, a day before the deadline."]),
        ],
    )
    now = texts(cli, "when is the deadline?", "--limit", "3")
    assert first_with(now, "extended") < first_with(now, "deadline is")
    then = texts(cli, "when is the deadline?", "--as-of", "2026-09-20", "--limit", "3")
    assert then and "14 October" in then[0]  # an event's date is its value, not its start
    changes = cli.json("changes", "--since", "2026-10-01")["changes"]
    assert any("14 October" in c["old"]["text"] and c["new"] for c in changes)


def test_a_switch_away_from_a_tool_replaces_it(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-08", ["My research group analyses its survey data in SPSS."]),
            ("2026-08-01", ["I drink filter coffee every afternoon at 4pm."]),
            ("2026-10-02", ["The department works in R, and I have decided to abandon SPSS."]),
            ("2026-10-24", ["The doctor said cut caffeine, so I switched from coffee to tea."]),
        ],
    )
    stats = texts(cli, "which statistical software do I use?", "--limit", "3")
    assert stats and "abandon SPSS" in stats[0]
    drink = texts(cli, "what do I drink in the afternoon?", "--limit", "3")
    assert first_with(drink, "to tea") < first_with(drink, "filter coffee every")


def test_someone_else_leaving_a_city_leaves_the_users_home_alone(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-01", ["I live in Leeds, near Hyde Park."]),
            ("2026-09-01", ["My sister moved from Leeds to York last week."]),
        ],
    )
    found = cli.json("retrieve", "where do I live?", "--limit", "3")["results"]
    leeds = next(r for r in found if "Hyde Park" in r["text"])
    assert not leeds["superseded_by"]


def test_notes_that_quote_their_owner_answer_the_owner(cli: Cli, tmp_path: Path) -> None:
    openclaw_notes(
        cli,
        tmp_path,
        {
            "2026-07-03": ["Filter coffee at 4pm is non-negotiable, he says; no calls then."],
            "2026-10-24": [
                "Doctor told him to cut caffeine; he has switched from filter coffee to green "
                "tea, and the 4pm break stays."
            ],
        },
    )
    found = texts(cli, "what do I drink at 4pm?", "--limit", "3")
    assert first_with(found, "green tea") < first_with(found, "non-negotiable")


def test_context_puts_the_answer_before_hot_memory(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-01", ["Every Thursday I play five-a-side football with colleagues."]),
            ("2026-11-02", ["The doctor says my knee is damaged and I must stop football."]),
        ],
    )
    assert cli("hot", "--add-event", "Thursday five-a-side football, highlight of my week")[0] == 0
    out = cli.json("context", "--query", "am i still playing football")
    assert not out["trivial"]  # a question without its mark
    block = out["context"]
    assert block.index("stop football") < block.index("# MEMORY.md")
    assert block.index("stop football") < block.index("highlight of my week")


def test_context_brings_the_memory_that_replaced_a_relevant_one(cli: Cli) -> None:
    old = cli.json(
        "store", "--text", "The icon library mockups live in Sketch.", "--category", "notes"
    )
    new = cli.json("store", "--text", "Moved everything to Penpot.", "--category", "notes")
    assert cli("supersede", old["id"], new["id"])[0] == 0
    block = cli.json("context", "--query", "let's tidy the icon library mockups")["context"]
    assert "Penpot" in block and block.index("Penpot") < block.index("live in Sketch")


def test_what_chat_tells_before_its_question_is_kept_and_answers(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-02", ["brooke (my boss) wants 5 caption options, playful but not cringe"]),
            ("2026-09-26", ["first week done!! new boss marcus is lowkey intense. any tips?"]),
            ("2026-10-12", ["officially a long beach girlie, moved in w maya. podcast recs?"]),
        ],
    )
    boss = texts(cli, "whos my boss", "--limit", "3")
    assert first_with(boss, "marcus") < first_with(boss, "brooke")
    home = texts(cli, "where do i live rn", "--limit", "3")
    assert home and "long beach" in home[0]


def test_a_moved_event_said_as_it_takes_the_new_date(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-18", ["my 25th bday party is oct 17!!! rooftop at skyline downtown"]),
            ("2026-10-03", ["skyline double booked us so i'm moving the party. it's oct 31 now"]),
        ],
    )
    now = texts(cli, "when's my bday party", "--limit", "3")
    assert now and "oct 31" in now[0]
    then = texts(cli, "when's my bday party", "--as-of", "2026-09-01", "--limit", "3")
    assert then and "oct 17" in then[0]


def test_a_tool_named_in_lower_case_with_its_use_replaces_the_old_one(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-09", ["we schedule everything in Later so make it easy to copy paste"]),
            ("2026-09-26", ["we use buffer not later for scheduling now, gotta relearn it"]),
        ],
    )
    memories = cli.json("export", "--format", "json")["memories"]
    later = next(m for m in memories if "everything in Later" in m["text"])
    assert later["superseded_by"]


def test_a_plan_said_with_a_present_fact_leaves_the_present_one_true(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            (
                "2026-09-21",
                ["Now Meridian runs on AWS but the plan is to migrate to GCP by end of October."],
            ),
            ("2026-10-20", ["Meridian is running on GCP now, we closed the old AWS account."]),
        ],
    )
    then = texts(
        cli, "on which cloud was Meridian running", "--as-of", "2026-10-01", "--limit", "3"
    )
    assert then and "runs on AWS" in then[0]
    now = texts(cli, "which cloud does Meridian run on now", "--limit", "3")
    assert now and "running on GCP" in now[0]


def test_an_intended_move_holds_only_from_its_date(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-01", ["I live in Edinburgh, in Morningside."]),
            ("2026-08-06", ["We intend to relocate to York in late September."]),
        ],
    )
    then = texts(cli, "where did I live", "--as-of", "2026-09-10", "--limit", "3")
    assert then and "Edinburgh" in then[0]
    now = texts(cli, "where do I live now", "--limit", "3")
    assert now and "York" in now[0]


def test_a_pet_renamed_in_lower_case_chat_answers_by_its_new_name(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-20", ["WE'RE FOSTERING A PUPPY 🐶 her name is noodle, shes 4 months"]),
            ("2026-08-03", ["we adopted her!!! and we renamed her, shes waffles now, not noodle"]),
        ],
    )
    found = texts(cli, "whats my dogs name", "--limit", "3")
    assert first_with(found, "waffles") < first_with(found, "FOSTERING")


def test_a_role_starting_next_week_is_the_title_once_that_week_came(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-06", ["context: im a product designer on the onboarding flow rn"]),
            (
                "2026-10-13",
                [
                    "AISHA MADE ME DESIGN MANAGER 😭 two designers reporting to me starting next week"
                ],
            ),
            ("2026-10-28", ["i dont have tuesday nights anymore with the new role"]),
        ],
    )
    found = texts(cli, "whats my job title", "--limit", "3")
    assert found and "DESIGN MANAGER" in found[0]


def test_a_question_naming_one_trip_is_not_answered_by_another(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [("2026-05-01", ["I used a water filter on my John Muir Trail trip with my brother."])],
    )
    found = cli.json(
        "retrieve", "I'm planning my trip to Speyer, what's the tourist office number?"
    )
    vias = [r["explanation"]["via"] or "" for r in found["results"] if "Muir" in r["text"]]
    assert vias and not any(v.startswith("answers") for v in vias)


def test_a_day_corrected_in_the_next_message_replaces_the_wrong_day(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-08-03", ["v2 launch is sept 30. go through TODO.md, tell me what's left"]),
            (
                "2026-09-14",
                [
                    "v2 launch slipped to oct 21. update the release checklist",
                    "sorry, tuesday oct 20 not the 21st",
                ],
            ),
        ],
    )
    found = texts(cli, "when is the v2 launch", "--limit", "3")
    assert found and "oct 20" in found[0]
    block = cli.json("context", "--query", "when is the v2 launch")["context"]
    assert block.index("oct 20") < block.index("slipped to oct 21")


def test_where_the_speaker_is_said_in_passing_answers_where_they_lived(
    cli: Cli, tmp_path: Path
) -> None:
    imported(
        cli,
        tmp_path,
        [
            ("2026-07-06", ["add an index. deploys after 6pm london time, that's where i am"]),
            ("2026-08-11", ["heads up: we ditched mysql, and ci moved to github actions"]),
            ("2026-08-25", ["im in manchester now btw, moved last week"]),
        ],
    )
    then = texts(cli, "where was i living", "--as-of", "2026-08-15", "--limit", "3")
    assert then and "london time" in then[0]  # not "ci moved to github"
    now = texts(cli, "where do i live now", "--limit", "3")
    assert now and "manchester" in now[0]


def test_a_relative_introduced_one_sentence_before_is_whom_he_is(cli: Cli, tmp_path: Path) -> None:
    imported(
        cli,
        tmp_path,
        [
            (
                "2026-07-24",
                [
                    "My husband Chidi and I celebrate our anniversary next month. He is an "
                    "architect with Lindqvist Architects here in Edinburgh."
                ],
            ),
            ("2026-11-02", ["Family news: Chidi has left Lindqvist and joined Arup in Leeds."]),
        ],
    )
    then = texts(cli, "Where did my husband work?", "--as-of", "2026-10-15", "--limit", "3")
    assert then and "Lindqvist Architects here" in then[0]
    lived = texts(cli, "Where did I live?", "--as-of", "2026-10-15", "--limit", "3")
    assert lived and "here in Edinburgh" in lived[0]


def test_two_things_called_by_name_are_two_names(cli: Cli) -> None:
    cat = cli.json("store", "--text", "The user's cat is called Miso and is allergic to chicken.")
    cli.json("store", "--text", "The user is learning Spanish with a tutor called Lucia.")
    memories = cli.json("export", "--format", "json")["memories"]
    assert not next(m for m in memories if m["id"] == cat["id"])["superseded_by"]
    block = cli.json("context", "--query", "What food should I avoid giving Miso the cat?")
    assert "Lucia" not in block["context"]
