"""Promoted hot lessons say where they came from, and the hygiene log is readable (CLI)."""

from __future__ import annotations

from pathlib import Path

from tests.clikit import Cli


def test_promoted_lesson_carries_provenance_and_the_log_is_a_file(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    fact = cli.json("store", "--text", "Sam drinks oat milk in coffee", "--category", "owner")["id"]
    for session in ("a", "a", "b"):  # a re-read within session a counts (reaccess_counts = 2)
        cli.json("recall", "oat milk coffee", "--session", session)
    talk = tmp_path / "t.txt"
    talk.write_text("User: remind me to water the garden plants tomorrow morning\n")
    ended = cli.json("conversation-end", str(talk), "--session", "b")
    assert [p["id"] for p in ended["hygiene"]["promoted"]] == [fact]
    hot = cli.json("hot")
    [lesson] = hot["hot"]["critical_lessons"]
    origin = hot["provenance"][lesson["id"]]
    assert origin["source_id"] == fact and origin["why"] == "3 uses in 2 sessions"
    assert origin["promoted_at"].endswith("Z")
    code, out, _ = cli("hot")
    assert code == 0 and f"← memory {fact}" in out
    log = cli.json("health", "--log")
    assert any(line.split()[1] == "promote" and fact in line for line in log["log"])
    path = home / "logs" / "hygiene.log"
    assert log["file"] == str(path) and fact in path.read_text()
    assert path.stat().st_mode & 0o777 == 0o600
