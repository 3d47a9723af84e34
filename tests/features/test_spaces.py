"""Shared memory spaces, the local half, through the real `tiermem` command and MCP over stdio:
an agent searches its own memory and the spaces it includes (each result labelled, its own
boosted), writes go to a space only when named and only for a writer, every memory of a space
names its writer, a member's writes can be undone and restored, and `memory = false` stops an
agent's memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession

from tests.agent.test_mcp import call, error, with_server
from tests.clikit import Cli

RUNBOOK = "The deploy runbook for the payments service lives at ops/runbook.md"
FRIDAYS = "I deploy the payments service on Fridays"


@pytest.fixture
def alice(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    return Cli(capsys, tmp_path / "home", "alice")


@pytest.fixture
def bob(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Cli:
    return Cli(capsys, tmp_path / "home", "bob")


def _space(alice: Cli, bob: Cli, role: str = "reader") -> None:
    assert alice.json("spaces", "create", "team")["role"] == "writer"
    alice.json("store", "--text", RUNBOOK, "--space", "team")
    assert bob.json("spaces", "include", "team", "--role", role)["role"] == role


def test_a_member_finds_a_space_s_memories_labelled_with_space_and_writer(
    alice: Cli, bob: Cli
) -> None:
    bob.json("store", "--text", "Nothing about that here, only tea")
    assert bob.json("retrieve", "payments runbook")["results"] == []
    _space(alice, bob)
    found = bob.json("retrieve", "payments runbook")["results"]
    assert [r["text"] for r in found] == [RUNBOOK]
    assert found[0]["explanation"]["space"] == "team"
    assert found[0]["explanation"]["written_by"] == "alice"
    code, out, _ = bob("retrieve", "payments runbook")
    assert code == 0 and "[space team, by alice]" in out
    recalled = bob.json("recall", "payments runbook")["entries"]
    assert recalled[0]["space"] == "team" and "from space team by alice" in recalled[0]["why"]
    context = bob.json("context", "-q", "where is the payments deploy runbook?")
    assert "[space team: " in context["context"] and "by alice" in context["context"]
    bob.json("spaces", "exclude", "team")
    assert bob.json("retrieve", "payments runbook")["results"] == []
    listed = [a["agent_id"] for a in bob.json("agents", "list")["agents"]]
    assert listed == ["alice", "bob"]  # the space is listed by `spaces list`, not as an agent


def test_the_agent_s_own_memory_is_boosted_over_a_slightly_better_space_match(
    alice: Cli, bob: Cli, tmp_path: Path
) -> None:
    _space(alice, bob, role="writer")
    bob.json("store", "--text", FRIDAYS, "--space", "team")
    own = "We deploy the payments service on Friday evenings"
    bob.json("store", "--text", own)
    found = bob.json("retrieve", "deploy payments service")["results"]
    assert [r["text"] for r in found[:2]] == [own, FRIDAYS]
    mine, shared = (r["explanation"] for r in found[:2])
    assert mine["space"] is None and mine["scope_boost"] == 1.2
    assert shared["space"] == "team" and shared["scope_boost"] == 1.0
    assert shared["relevance"] > mine["relevance"]  # the space's matches better, unboosted
    (tmp_path / "home" / "config.toml").write_text("[retrieval]\nown_boost = 1.0\n")
    equal = bob.json("retrieve", "deploy payments service")["results"]
    assert equal[0]["text"] == FRIDAYS and equal[0]["explanation"]["space"] == "team"


def test_writes_go_to_the_agent_s_own_memory_unless_a_space_is_named(alice: Cli, bob: Cli) -> None:
    _space(alice, bob, role="writer")
    bob.json("store", "--text", FRIDAYS)
    stored = bob.json("store", "--text", "The on-call rota is in the team wiki", "--space", "team")
    assert stored["space"] == "team" and stored["created"]
    shown = alice.json("spaces", "show", "team")
    assert {(w["text"], w["written_by"]) for w in shown["writes"]} == {
        (RUNBOOK, "alice"),
        ("The on-call rota is in the team wiki", "bob"),
    }
    assert FRIDAYS not in str(shown)
    assert alice.json("retrieve", "Fridays")["results"] == []  # bob's own stays his


def test_a_reader_cannot_write_and_errors_are_one_line_with_their_codes(
    alice: Cli, bob: Cli
) -> None:
    _space(alice, bob)
    code, out, err = bob("store", "--text", "sneaky edit", "--space", "team")
    assert (code, out) == (85, "") and err.count("\n") == 1 and "read-only" in err
    assert "sneaky" not in str(alice.json("spaces", "show", "team"))
    assert bob("spaces", "include", "team")[0] == 84  # included twice
    assert alice("spaces", "create", "team")[0] == 84
    code, _, err = bob("spaces", "include", "tem")
    assert code == 4 and "did you mean 'team'" in err.lower()
    assert bob("spaces", "create", "no spaces")[0] == 3
    assert bob("store", "--text", "x y z", "--space", "other")[0] == 4
    assert all("Traceback" not in p for p in bob.printed)


def test_a_member_s_writes_are_listed_undone_and_restored(alice: Cli, bob: Cli) -> None:
    _space(alice, bob, role="writer")
    for text in ("Bob thinks the cache is redis", "Bob says the queue is kafka"):
        bob.json("store", "--text", text, "--space", "team")
    by_bob = alice.json("spaces", "show", "team", "--by", "bob")["writes"]
    assert {w["written_by"] for w in by_bob} == {"bob"} and len(by_bob) == 2
    undone = alice.json("spaces", "undo", "team", "--by", "bob")["undone"]
    assert len(undone) == 2
    assert alice.json("retrieve", "cache queue redis kafka")["results"] == []
    assert alice.json("retrieve", "payments runbook")["results"]  # alice's write stays
    after = alice.json("spaces", "show", "team", "--by", "bob")["writes"]
    assert all(w["undone_at"] is not None and w["text"] is None for w in after)
    assert alice("spaces", "undo", "team", "--by", "bob")[0] == 4  # nothing left to undo
    alice.json("spaces", "restore", "team", "--by", "bob")
    back = alice.json("retrieve", "cache queue redis kafka")["results"]
    assert {r["explanation"]["written_by"] for r in back} == {"bob"} and len(back) == 2


def test_undo_since_a_date_leaves_older_writes(alice: Cli, bob: Cli) -> None:
    _space(alice, bob, role="writer")
    bob.json("store", "--text", "Bob notes the build uses bazel", "--space", "team")
    code, _, err = alice("spaces", "undo", "team", "--by", "bob", "--since", "2999-01-01")
    assert code == 4 and "since then" in err
    assert alice.json("retrieve", "bazel build")["results"]


def test_memory_off_refuses_stores_and_searches_and_empties_the_context(
    alice: Cli, tmp_path: Path
) -> None:
    alice.json("store", "--text", RUNBOOK)
    (tmp_path / "home" / "config.toml").write_text("[agents.alice]\nmemory = false\n")
    code, out, err = alice("store", "--text", "Should not be kept")
    assert code == 86 and out == "" and "memory is off for agent 'alice'" in err
    assert alice("retrieve", "runbook")[0] == 86
    assert alice("recall", "runbook")[0] == 86
    block = alice.json("context", "-q", "where is the payments deploy runbook?")
    assert block["context"] == "" and block["memories"] == []
    (tmp_path / "home" / "config.toml").write_text("")
    assert "Should not be kept" not in str(alice.json("retrieve", "kept")["results"])


def test_mcp_stores_into_a_space_by_name_and_search_labels_the_source(
    alice: Cli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    Cli(alice.capsys, home).json("spaces", "create", "team")  # the server's agent: default
    alice.json("spaces", "include", "team", "--role", "reader")

    async def body(s: ClientSession) -> None:
        stored = await call(s, "memory_store", content=RUNBOOK, space="team")
        assert stored["space"] == "team" and stored["stored"]
        await call(s, "memory_store", content=FRIDAYS)
        found = await call(s, "memory_search", query="deploy payments service")
        by_text = {r["content"]: r for r in found["results"]}
        assert by_text[RUNBOOK]["space"] == "team"
        assert by_text[RUNBOOK]["written_by"] == "default"
        assert by_text[FRIDAYS]["space"] is None and by_text[FRIDAYS]["scope_boost"] == 1.2
        missing = await error(s, "memory_store", content="x y z", space="nope")
        assert missing.startswith("NotFound: ") and "nope" in missing

    with_server(home, tmp_path / "stderr.log", body)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()
    assert [r["text"] for r in alice.json("retrieve", "payments runbook")["results"]] == [RUNBOOK]
