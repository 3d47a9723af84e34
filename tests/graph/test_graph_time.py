"""What the graph knows is true when: dates read against each memory's own date, slots closed
whatever order memories arrive in, the closures indexing reports, questions answered with the
current fact first, `--at`, the timeline, corrections by hand, the context block's lines, and
bad input. CLI through `run`, MCP over stdio."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from mcp import ClientSession

from tests.agent.test_mcp import call, error, with_server
from tests.clikit import cli_json
from tests.conftest import Clock
from tiermem.core import graph
from tiermem.core.engine import Memory
from tiermem.core.errors import NotFound
from tiermem.core.graph.history import current_facts
from tiermem.core.warm import NewFact
from tiermem.tui.cli import run


def day(text: str) -> float:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp()


def fails(capsys: pytest.CaptureFixture[str], home: Path, *args: str) -> tuple[int, str]:
    code = run(["--home", str(home), *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and len(err.strip().splitlines()) == 1, err
    return code, err


def remember(mem: Memory, clock: Clock, when: str, text: str) -> graph.IndexReport:
    """Store a memory written on `when` and index it as the store path does."""
    clock.now = day(when)
    stored = mem.store(text, "notes")
    return graph.index_one(mem, stored.id)


def put(mem: Memory, clock: Clock, when: str, text: str) -> str:
    """A memory row written on `when` that nothing has indexed yet (as a pull or an import
    writes them): the indexing calls under test see it first."""
    clock.now = day(when)
    with mem.db.transaction():
        (outcome,) = mem.memories.put([(NewFact(text, "notes"), "notes")], clock.now)
    return outcome.id


def spans(mem: Memory, predicate: str) -> dict[str, tuple[str | None, str | None]]:
    store = graph.store_for(mem)
    edges = [e for e in store.edges() if e.predicate == predicate and not e.flags]
    names = store.names({e.object for e in edges})

    def iso(ts: float | None) -> str | None:
        return None if ts is None else dt.datetime.fromtimestamp(ts, dt.UTC).date().isoformat()

    return {names[e.object]: (iso(e.valid_from), iso(e.valid_to)) for e in edges}


def test_dates_are_read_against_the_memory_s_own_date(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        remember(mem, clock, "2026-10-19", "I moved to Leeds last weekend.")
        remember(mem, clock, "2026-10-19", "I work at Globex since 2025.")
        remember(mem, clock, "2026-10-19", "Maya started at Initech on October 12.")
        remember(mem, clock, "2026-10-19", "Tom works at Hooli.")
        assert spans(mem, "lives_in") == {"Leeds": ("2026-10-17", None)}
        assert spans(mem, "works_at") == {
            "Globex": ("2025-01-01", None),
            "Initech": ("2026-10-12", None),
            "Hooli": ("2026-10-19", None),
        }


def test_a_newer_fact_indexed_first_still_ends_the_older_one(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        newer = graph.index_one(mem, put(mem, clock, "2026-10-19", "I live in Leeds."))
        older = graph.index_one(mem, put(mem, clock, "2026-01-05", "I live in Manchester."))
        assert newer.closures == []
        assert spans(mem, "lives_in") == {
            "Leeds": ("2026-10-19", None),
            "Manchester": ("2026-01-05", "2026-10-19"),
        }
        (closure,) = older.closures
        assert (closure.old_object, closure.new_object, closure.at) == (
            "Manchester",
            "Leeds",
            day("2026-10-19"),
        )


def test_an_older_fact_synced_in_later_is_placed_by_the_batch_indexer(
    tmp_path: Path, clock: Clock
) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        put(mem, clock, "2026-10-19", "I moved to Leeds.")
        put(mem, clock, "2026-01-05", "I live in Manchester.")
        report = graph.index_memories(mem)
        assert spans(mem, "lives_in") == {
            "Leeds": ("2026-10-19", None),
            "Manchester": ("2026-01-05", "2026-10-19"),
        }
        assert [(c.old_object, c.new_object) for c in report.closures] == [("Manchester", "Leeds")]


def test_closures_name_the_memories_and_a_negation_has_no_successor(
    tmp_path: Path, clock: Clock
) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        first = put(mem, clock, "2026-01-05", "I live in Manchester.")
        graph.index_one(mem, first)
        second = put(mem, clock, "2026-10-19", "I relocated to Leeds last weekend.")
        moved = graph.index_one(mem, second)
        third = put(mem, clock, "2026-11-20", "I don't live in Leeds anymore.")
        left = graph.index_one(mem, third)
        fourth = put(mem, clock, "2026-11-21", "I lived in York, then moved to Bath.")
        one_text = graph.index_one(mem, fourth)
        assert moved.closures == [
            graph.Closure(
                first, second, day("2026-10-17"), "User", "lives_in", "Manchester", "Leeds"
            )
        ]
        assert left.closures == [
            graph.Closure(second, None, day("2026-11-20"), "User", "lives_in", "Leeds", None)
        ]
        assert one_text.closures == []  # within one memory: nothing to supersede
        again = graph.index_one(mem, second)
        assert (again.relations, again.closures) == (0, [])
        assert graph.index_memories(mem).texts == 0  # the store path's calls moved the mark


def test_a_plan_holds_only_from_its_date_and_ends_nothing(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        remember(mem, clock, "2026-01-05", "I live in Leeds.")
        remember(mem, clock, "2026-01-10", "I'm moving to Berlin in March.")
        assert spans(mem, "lives_in") == {"Leeds": ("2026-01-05", None)}
        before = current_facts(mem, mem.agent_id, "where do I live", day("2026-02-01"), 5)
        after = current_facts(mem, mem.agent_id, "where do I live", day("2026-04-01"), 5)
    assert before == ["User lives in Leeds since 2026-01-05"]
    assert after == ["User lives in Berlin since 2026-03-01 (planned) (before: Leeds)"]


@pytest.fixture
def history(tmp_path: Path, clock: Clock) -> Path:
    """A home whose user moved twice, changed jobs and managers, and a project's stack."""
    home = tmp_path / "home"
    with Memory(home, clock=clock) as mem:
        for when, text in [
            ("2025-03-01", "My name is Sam Rivera. I live in Manchester and work at Acme."),
            ("2025-03-02", "My manager is Priya."),
            ("2025-06-01", "Orchard uses RabbitMQ for its queue and Postgres as its database."),
            ("2026-02-10", "Orchard switched from RabbitMQ to Kafka."),
            ("2026-05-04", "I moved to Leeds last weekend and started at Globex."),
            ("2026-05-05", "new boss is Tom Okafor"),
        ]:
            remember(mem, clock, when, text)
    return home


QUESTIONS = [
    ("where does Sam live", "User lives in Leeds"),
    ("Where do I live now?", "User lives in Leeds"),
    ("who is my manager", "User reports to Tom Okafor"),
    ("where do I work now", "User works at Globex"),
    ("what does Orchard use for its queue", "Orchard uses Kafka (queue)"),
    ("which database does orchard use", "Orchard uses PostgreSQL (database)"),
    ("who does Sam report to?", "User reports to Tom Okafor"),
    ("who works at Globex", "User works at Globex"),
]


@pytest.mark.parametrize(("question", "first"), QUESTIONS)
def test_a_question_is_answered_current_first(
    history: Path, capsys: pytest.CaptureFixture[str], question: str, first: str
) -> None:
    found = cli_json(capsys, history, "graph", "search", question)
    assert found["answer"][0].startswith(first)


def test_the_answer_then_says_what_held_before(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = cli_json(capsys, history, "graph", "search", "where does Sam live")
    assert found["answer"] == [
        "User lives in Leeds (since 2026-05-02)",
        "before: User lives in Manchester (2025-03-01 – 2026-05-02)",
    ]
    assert run(["--home", str(history), "graph", "search", "where does Sam live"]) == 0
    assert capsys.readouterr().out.startswith("User lives in Leeds (since 2026-05-02)\n")


def test_at_a_date_shows_what_was_true_then(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    then = cli_json(capsys, history, "graph", "search", "where do I live", "--at", "2025-12-01")
    assert then["answer"] == ["User lives in Manchester (2025-03-01 – 2026-05-02)"]
    queue = cli_json(capsys, history, "graph", "search", "what does Orchard use", "--at", "2025-12")
    assert {r["object"] for r in queue["current"]} == {"RabbitMQ", "PostgreSQL"}
    shown = cli_json(capsys, history, "graph", "show", "User", "--at", "2025-12-01")
    assert {(r["predicate"], r["object"]) for r in shown["relations"]} == {
        ("lives_in", "Manchester"),
        ("works_at", "Acme"),
        ("reports_to", "Priya"),
    }
    early = cli_json(capsys, history, "graph", "search", "where do I live", "--at", "2024-01-01")
    assert early["answer"] == [] and early["relations"] == []
    by_name = cli_json(capsys, history, "graph", "search", "orch", "--at", "2024-01-01")
    assert by_name["entities"] == [] and by_name["relations"] == []
    assert (
        cli_json(capsys, history, "graph", "show", "Orchard", "--at", "2024-01-01")["relations"]
        == []
    )


def test_the_timeline_is_in_time_order(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = cli_json(capsys, history, "graph", "timeline", "sam")
    order = [(r["predicate"], r["object"]) for r in found["relations"]]
    assert order == [
        ("lives_in", "Manchester"),
        ("works_at", "Acme"),
        ("reports_to", "Priya"),
        ("lives_in", "Leeds"),
        ("works_at", "Globex"),
        ("reports_to", "Tom Okafor"),
    ]
    starts = [r["valid_from"] for r in found["relations"]]
    assert starts == sorted(starts)


def test_add_and_invalidate_by_hand(history: Path, capsys: pytest.CaptureFixture[str]) -> None:
    added = cli_json(
        capsys, history, "graph", "add", "I", "lives in", "York", "--since", "2026-09-01"
    )
    assert added["added"] and len(added["closed"]) == 1
    now = cli_json(capsys, history, "graph", "search", "where do I live")
    assert now["answer"][:2] == [
        "User lives in York (since 2026-09-01)",
        "before: User lives in Leeds (2026-05-02 – 2026-09-01)",
    ]
    ended = cli_json(
        capsys, history, "graph", "invalidate", "User", "lives_in", "--at", "2026-10-01"
    )
    assert ended["closed"] == [added["relation"]]
    assert cli_json(capsys, history, "graph", "search", "where do I live")["current"] == []
    job = cli_json(capsys, history, "graph", "search", "where do I work")["current"][0]
    assert cli_json(capsys, history, "graph", "invalidate", job["id"])["closed"] == [job["id"]]
    assert cli_json(capsys, history, "graph", "search", "where do I work")["current"] == []


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("graph", "add", "User", "lives in!", "York"), 3, "not a predicate"),
        (("graph", "add", "User", "lives_in", "York", "--since", "someday"), 3, "not a date"),
        (("graph", "add", "User", "lives_in", "User"), 3, "two different"),
        (("graph", "invalidate", "re-000000000000"), 4, "no relation"),
        (("graph", "invalidate", "Nobody", "lives_in"), 4, "no entity"),
        (("graph", "invalidate", "User", "owns_boat"), 4, "nothing holds"),
        (("graph", "invalidate", "a", "b", "c", "d"), 3, "give a relation id"),
        (("graph", "search", "where do I live", "--at", "soon-ish"), 3, "not a date"),
        (("graph", "timeline", "Nobody"), 4, "no entity"),
        (("graph", "show", "User", "--at", ""), 3, "empty"),
    ],
)
def test_bad_input_is_one_clear_line(
    history: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], code: int, says: str
) -> None:
    got, err = fails(capsys, history, *args)
    assert got == code and says in err


def test_current_facts_for_the_context_block(history: Path, clock: Clock) -> None:
    with Memory(history, clock=clock) as mem:
        clock.now = day("2026-06-01")
        facts = current_facts(mem, mem.agent_id, "", None, 10)
        asked = current_facts(mem.db, mem.agent_id, "where do I live?", None, 3)
        queue = current_facts(mem, mem.agent_id, "is Orchard's queue slow?", None, 1)
        then = current_facts(mem, mem.agent_id, "where do I live?", day("2025-04-01"), 3)
    assert "User lives in Leeds since 2026-05-02 (before: Manchester)" in facts
    assert "User reports to Tom Okafor since 2026-05-05 (before: Priya)" in facts
    assert asked[0] == "User lives in Leeds since 2026-05-02 (before: Manchester)"
    assert queue == ["Orchard uses Kafka (queue) since 2026-02-10 (before: RabbitMQ)"]
    assert then == ["User lives in Manchester since 2025-03-01"]


def test_the_graph_tools_over_mcp(history: Path, tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        found = await call(s, "knowledge_graph_search", query="where does Sam live")
        assert found["answer"][0] == "User lives in Leeds (since 2026-05-02)"
        then = await call(s, "knowledge_graph_search", query="where does Sam live", at="2025-12-01")
        assert then["current"][0]["object"] == "Manchester"
        line = await call(s, "knowledge_graph_timeline", entity="Orchard")
        assert [r["object"] for r in line["relations"]][2:] == ["Kafka"]
        added = await call(
            s, "knowledge_graph_add", subject="I", predicate="lives_in", object="York"
        )
        assert added["added"]
        ended = await call(s, "knowledge_graph_invalidate", edge_id=added["relation"])
        assert ended["closed"] == [added["relation"]]
        assert "InvalidInput" in await error(
            s, "knowledge_graph_add", subject="I", predicate="?", object="York"
        )
        assert "NotFound" in await error(s, "knowledge_graph_invalidate", edge_id="re-nope")
        assert "not a date" in await error(s, "knowledge_graph_search", query="x", at="whenever")

    with_server(history, tmp_path / "stderr.log", body)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_a_lower_case_question_finds_a_person_by_first_name(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        remember(mem, clock, "2026-03-01", "Maya Chen lives in Porto.")
    found = cli_json(capsys, tmp_path / "home", "graph", "search", "where does maya live")
    assert found["answer"] == ["Maya Chen lives in Porto (since 2026-03-01)"]


def test_the_store_path_indexes_within_its_own_transaction(tmp_path: Path, clock: Clock) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        graph.index_one(mem, put(mem, clock, "2026-01-05", "I work at Acme."))
        clock.now = day("2026-06-01")
        with mem.db.transaction():
            (stored,) = mem.memories.put(
                [(NewFact("I joined Globex.", "notes"), "notes")], clock.now
            )
            report = graph.index_one(mem, stored.id)
        assert [(c.old_object, c.new_object) for c in report.closures] == [("Acme", "Globex")]
        with pytest.raises(NotFound):
            graph.index_one(mem, "no-such-memory")


def test_relations_a_pull_wrote_as_they_came_are_settled(tmp_path: Path, clock: Clock) -> None:
    """A pull writes another device's relations as they are (both still open); settling them
    leaves the newest value of the slot open and ends the older where it begins."""
    with Memory(tmp_path / "home", clock=clock) as mem:
        store = graph.store_for(mem)
        with mem.db.transaction():
            user = store.resolve("User", "person", 0.0)
            ids = []
            for place, when in (("Leeds", "2026-10-19"), ("Manchester", "2026-01-05")):
                edge = graph.Edge(
                    store.edge_id(user, "lives_in", place, day(when), ""),
                    user,
                    "lives_in",
                    store.resolve(place, "place", 0.0),
                    day(when),
                    None,
                    "memory:elsewhere",
                )
                store.insert(edge)
                ids.append(edge.id)
            assert graph.settle_pulled(mem.db, mem.agent_id, ids) == 1
        assert spans(mem, "lives_in") == {
            "Leeds": ("2026-10-19", None),
            "Manchester": ("2026-01-05", "2026-10-19"),
        }


def test_only_closures_between_memories_are_reported(tmp_path: Path, clock: Clock) -> None:
    """An episode's statement ends a memory's fact in the graph, but names no memory that
    replaces it: nothing to supersede."""
    with Memory(tmp_path / "home", clock=clock) as mem:
        graph.index_one(mem, put(mem, clock, "2026-01-05", "I work at Acme."))
        clock.now = day("2026-03-01")
        report = graph.index_episode(mem, "ep-nowhere", "I quit Acme last week.")
        assert report.closures == []
        assert spans(mem, "works_at") == {"Acme": ("2026-01-05", "2026-02-16")}


def test_a_what_if_never_holds_and_a_bare_plan_waits_for_its_date(
    tmp_path: Path, clock: Clock
) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        remember(mem, clock, "2026-08-01", "I live in Manchester.")
        remember(mem, clock, "2026-08-03", "if i ever moved to nyc i'd be broke in a week")
        remember(
            mem, clock, "2026-11-15", "If we ever go back, I want to live in Gdansk, not Leeds."
        )
        remember(mem, clock, "2026-11-16", "moving back to accra in january. add ghana species")
        now = current_facts(mem, mem.agent_id, "where do I live", day("2026-11-20"), 5)
        later = current_facts(mem, mem.agent_id, "where do I live", day("2027-02-01"), 5)
    assert now == ["User lives in Manchester since 2026-08-01"]
    assert later[0].startswith("User lives in Accra since 2027-01-01 (planned)")
