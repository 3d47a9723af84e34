"""Tags are searchable and filterable, links bring related memories along, through the CLI."""

from __future__ import annotations

from tests.clikit import Cli


def store(cli: Cli, text: str, category: str, *extra: str) -> str:
    return str(cli.json("store", "--text", text, "--category", category, *extra)["id"])


def test_a_stored_tag_is_found_by_a_query_word_a_filter_and_a_tag_cue(cli: Cli) -> None:
    tagged = store(cli, "Renew the certificate before it lapses", "ops", "--tag", "kubernetes")
    store(cli, "Renew the passport next spring", "personal")
    by_word = cli.json("retrieve", "kubernetes")["results"]
    assert [r["id"] for r in by_word] == [tagged]
    assert by_word[0]["explanation"]["matched_tags"] == ["kubernetes"]
    assert by_word[0]["explanation"]["found_by"] == "tag"
    filtered = cli.json("retrieve", "renew", "--tag", "Kubernetes")["results"]
    assert [r["id"] for r in filtered] == [tagged]
    cued = cli.json("retrieve", "renew tag:kubernetes")["results"]
    assert [r["id"] for r in cued] == [tagged]
    only_tag = cli.json("retrieve", "tag:kubernetes")["results"]
    assert [r["id"] for r in only_tag] == [tagged]
    assert cli.json("retrieve", "renew", "--tag", "nothing-has-this")["results"] == []
    code, out, _ = cli("retrieve", "renew", "--tag", "kubernetes")
    assert code == 0 and "tags kubernetes" in out


def test_recall_filters_by_tag_and_says_why(cli: Cli) -> None:
    tagged = store(cli, "Deploys go through the canary first", "ops", "--tag", "deploy")
    store(cli, "Deploys on Friday need a second reviewer", "ops")
    found = cli.json("recall", "deploys", "--tag", "deploy")
    assert [e["id"] for e in found["entries"]] == [tagged]
    assert found["entries"][0]["tags"] == ["deploy"]


def test_link_and_include_context_bring_related_memories_within_the_budget(cli: Cli) -> None:
    first = store(cli, "The staging database is db-stage-2", "infra")
    second = store(cli, "Its backups run nightly at 02:00", "infra", "--related-to", first)
    third = store(cli, "Grafana dashboards live on the ops VPN", "infra")
    linked = cli.json("link", first, third)
    assert linked["changed"] and sorted(linked["linked_to"]) == sorted([second, third])
    plain = cli.json("recall", "staging database")
    assert [e["id"] for e in plain["entries"]] == [first]
    full = cli.json("recall", "staging database", "--include-context")
    ids = [e["id"] for e in full["entries"]]
    assert ids[0] == first and sorted(ids[1:]) == sorted([second, third])
    assert {e["why"] for e in full["entries"][1:]} == {f"linked to {first}"}
    first_cost = full["entries"][0]["content"]
    tight = cli.json("recall", "staging database", "--include-context", "--budget", "12")
    assert tight["token_count"] <= 12 and tight["entries"][0]["content"] == first_cost
    assert len(tight["entries"]) < 3
    shown = cli.json("get", first)
    assert sorted(shown["related_to"]) == sorted([second, third]) and shown["tags"] == []
    assert cli.json("link", first, third, "--remove")["changed"]


def test_linking_unknown_or_same_memory_is_refused_and_stores_nothing(cli: Cli) -> None:
    known = store(cli, "The printer is on the second floor", "office")
    code, _, err = cli(
        "store",
        "--text",
        "Toner is in the cupboard",
        "--category",
        "office",
        "--related-to",
        "no-such-id",
    )
    assert code == 4 and "no-such-id" in err and "Traceback" not in err
    assert cli.json("retrieve", "toner cupboard")["results"] == []
    code, _, err = cli("link", known, known)
    assert code == 3 and "itself" in err


def test_a_query_of_tags_alone_shows_each_memorys_tier_score_and_says_it_is_a_filter(
    cli: Cli,
) -> None:
    urgent = store(
        cli, "Buy milk on the way home", "errands", "--tag", "todo", "--importance", "0.9"
    )
    later = store(cli, "Renew the passport", "errands", "--tag", "todo", "--importance", "0.3")
    results = cli.json("retrieve", "tag:todo")["results"]
    scores = {r["id"]: r["explanation"]["tier_score"] for r in results}
    assert set(scores) == {urgent, later}
    assert scores[urgent] > scores[later] > 0
    code, out, _ = cli("retrieve", "tag:todo")
    assert code == 0 and "tier score 0.00" not in out
    assert out.count("tag filter todo (no words to rank by)") == 2
    assert "relevance" not in out
