"""The CLI: every command with --json, one-line errors with exit codes, seed import/export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clikit import cli, cli_json
from tests.terminal import open_terminal, read_until

SEED = Path(__file__).parent / "fixtures" / "seed"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_store_retrieve_round_trip(capsys, home: Path) -> None:
    stored = cli_json(
        capsys,
        home,
        "store",
        "--text",
        "Hackathon deadline is Feb 15",
        "--category",
        "projects/evoclaw/bsc",
        "--importance",
        "0.9",
        "--url",
        "https://example.org/hack",
        "--command",
        "make deploy",
        "--path",
        "/srv/app",
    )
    assert stored["created"] and stored["tree_node"] == "projects/evoclaw/bsc"
    again = cli_json(
        capsys,
        home,
        "store",
        "--text",
        "hackathon deadline is feb 15",
        "--category",
        "projects",
        "--importance",
        "0.5",
    )
    assert again["deduplicated"] and again["id"] == stored["id"]
    found = cli_json(capsys, home, "retrieve", "hackathon", "--limit", "3", "--budget", "100")
    top = found["results"][0]
    assert top["id"] == stored["id"]
    assert top["metadata"] == {
        "urls": ["https://example.org/hack"],
        "commands": ["make deploy"],
        "paths": ["/srv/app"],
    }
    assert top["explanation"]["path"] == "projects/evoclaw/bsc"
    assert top["explanation"]["matched_terms"] == ["hackathon"]
    code, out, _ = cli(capsys, home, "retrieve", "hackathon", "--category", "projects")
    assert code == 0 and "path projects/evoclaw/bsc" in out
    got = cli_json(capsys, home, "get", stored["id"])
    assert got["access_count"] >= 1 and got["score"] > 0


def test_every_command_speaks_json(capsys, home: Path) -> None:
    cli_json(capsys, home, "store", "--text", "fact", "--category", "c")
    for args in (
        ["retrieve", "fact"],
        ["cold", "fact"],
        ["hot"],
        ["hot", "--add-event", "e"],
        ["tree"],
        ["tree", "--add", "x/y", "desc"],
        ["tree", "--remove", "x"],
        ["tree", "--prune"],
        ["consolidate", "--mode", "full"],
        ["metrics", "--days", "3"],
        ["export", "--format", "json", "--output", str(home.parent / "out.json")],
    ):
        payload = cli_json(capsys, home, *args)
        assert isinstance(payload, dict), args


def test_hot_commands(capsys, home: Path) -> None:
    cli_json(capsys, home, "hot", "--update", "identity", '{"agent_name": "Claw"}')
    cli_json(capsys, home, "hot", "--update", "owner_profile", '{"timezone": "Australia/Sydney"}')
    cli_json(
        capsys,
        home,
        "hot",
        "--add-lesson",
        "Test on testnet first",
        "--importance",
        "0.9",
        "--category",
        "blockchain",
    )
    cli_json(capsys, home, "hot", "--add-event", "Hackathon deadline Feb 15")
    task = cli_json(capsys, home, "hot", "--add-task", "Deploy to BSC testnet")
    cli_json(
        capsys,
        home,
        "hot",
        "--add-project",
        "EvoClaw",
        "--description",
        "Agent framework",
        "--status",
        "Active",
    )
    task_id = task["hot"]["active_context"]["tasks"][0]["id"]
    final = cli_json(capsys, home, "hot", "--complete-task", task_id)
    hot = final["hot"]
    assert hot["identity"] == {"agent_name": "Claw"}
    assert hot["critical_lessons"][0]["text"] == "Test on testnet first"
    assert hot["active_context"]["projects"][0]["status"] == "Active"
    assert hot["active_context"]["tasks"] == []
    assert final["bytes"] <= final["limit_bytes"] == 5120 and final["tokens"] > 0
    assert "Test on testnet first" in Path(final["memory_md"]).read_text()


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["store", "--text", "x", "--category", "c", "--importance", "7"], 3, "between 0 and 1"),
        (["store", "--text", "", "--category", "c"], 3, "text is empty"),
        (["store", "--text", "x", "--category", "c", "--importance", "high"], 2, "importance"),
        (["store", "--category", "c"], 2, "--text"),
        (["consolidate", "--mode", "weekly"], 3, "unknown consolidation mode"),
        (["retrieve", ""], 3, "query is empty"),
        (["retrieve", "x", "--tier", "lukewarm"], 2, "lukewarm"),
        (["retrieve", "x", "--limit", "0"], 2, "limit"),
        (["hot", "--update", "identity", "{not json"], 3, "not valid JSON"),
        (["hot", "--update", "identity", "[1]"], 3, "JSON object"),
        (["hot", "--update", "mood", "{}"], 3, "unknown hot key"),
        (["tree", "--remove", "nope"], 4, "no memory home at"),  # an edit never creates one
        (["tree", "--add", "a/b/c/d/e", "too deep"], 5, "depth"),
        (["get", "0000"], 4, "no memory"),
        (["--agent-id", "../../etc", "hot"], 3, "invalid agent id"),
        (["import"], 3, "nothing to import"),
        (["nosuch"], 2, "No such command"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(capsys, home: Path, args, code, needle) -> None:
    rc, out, err = cli(capsys, home, *args)
    assert rc == code, err
    assert err.startswith("tiermem: error: ") and err.count("\n") == 1 and needle in err
    assert "Traceback" not in out + err
    if home.exists():
        rc, out, _ = cli(capsys, home, "--json", "metrics")
        assert json.loads(out)["today"]["warm_count"] == 0


def test_json_errors_are_json(capsys, home: Path) -> None:
    rc, out, _ = cli(
        capsys, home, "--json", "store", "--text", "x", "--category", "c", "--importance", "7"
    )
    assert rc == 3 and json.loads(out) == {
        "error": "importance must be between 0 and 1 (got 7.0)",
        "type": "InvalidInput",
        "exit_code": 3,
    }


def test_corrupt_config_is_a_one_line_error(capsys, home: Path) -> None:
    cli_json(capsys, home, "store", "--text", "a fact", "--category", "c")
    (home / "config.toml").write_text("[hot]\nmax_bytes = 'huge'\n")
    rc, _, err = cli(capsys, home, "hot")
    assert rc == 6 and "config.toml: hot.max_bytes" in err and err.count("\n") == 1


def test_unreadable_home(capsys, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    rc, _, err = cli(capsys, blocker / "home", "store", "--text", "x", "--category", "c")
    assert rc == 7 and "memory home" in err


def test_corrupt_database_is_a_one_line_error(capsys, home: Path) -> None:
    home.mkdir()
    (home / "tiermem.db").write_bytes(b"garbage" * 1000)
    rc, _, err = cli(capsys, home, "hot")
    assert rc == 7 and err.count("\n") == 1


def test_seed_import_is_idempotent(capsys, home: Path) -> None:
    first = cli_json(capsys, home, "import", str(SEED))
    assert first["facts_added"] == 3 and first["hot_imported"]
    assert "projects/evoclaw/bsc" in first["nodes_added"]
    assert first["warnings"][0] == "warm-memory.json fact 3 skipped: missing 'text'"
    assert [w.split(" ignored")[0] for w in first["warnings"][1:]] == [
        "config.json: distillation.aggression",  # import names each key it cannot apply
        "config.json: distillation.max_distilled_bytes",
    ]
    second = cli_json(capsys, home, "import", str(SEED))
    assert second["facts_added"] == 0 and second["facts_merged"] == 3
    hot = cli_json(capsys, home, "hot")["hot"]
    assert hot["identity"]["agent_name"] == "Agent"
    assert len(hot["critical_lessons"]) == 1
    # the seed's event and task are from 2024: hot memory keeps recent ones, these went to warm
    assert not hot["active_context"]["events"] and not hot["active_context"]["tasks"]
    aged = cli_json(capsys, home, "retrieve", "Hackathon deadline Feb 15")["results"]
    assert [r["text"] for r in aged].count("Hackathon deadline Feb 15") == 1  # once, not twice
    assert (home / "config.toml").read_text().count("max_lessons = 20") == 1
    tree = cli_json(capsys, home, "tree")
    assert {n["path"] for n in tree["nodes"]} >= {"owner", "projects/evoclaw/bsc", "lessons"}
    found = cli_json(capsys, home, "retrieve", "go-ethereum")
    assert found["results"][0]["created_at"] == 1707350400


def test_import_of_bad_json_changes_nothing(capsys, home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "warm.json"
    bad.write_text("{ not json")
    rc, _, err = cli(
        capsys, home, "import", "--warm", str(bad), "--hot", str(SEED / "hot-memory-state.json")
    )
    assert rc == 3 and "invalid JSON" in err
    assert not home.exists()  # the failed first write leaves no home behind


def test_export_markdown_and_json(capsys, home: Path, tmp_path: Path) -> None:
    cli_json(capsys, home, "import", str(SEED))
    code, out, _ = cli(capsys, home, "export")
    assert code == 0 and "# MEMORY.md" in out and "## Warm memories" in out
    assert "go-ethereum" in out and "`projects/evoclaw/bsc`" in out
    target = tmp_path / "all.json"
    cli_json(capsys, home, "export", "--format", "json", "--output", str(target))
    data = json.loads(target.read_text())
    assert data["hot"]["identity"]["agent_name"] == "Agent"
    aged = {"Hackathon deadline Feb 15", "Deploy to BSC testnet"}  # 2024's event and task
    assert len(data["memories"]) == 3 + len(aged)
    assert aged <= {m["text"] for m in data["memories"]}


def test_console_script_never_prints_a_traceback(tmp_path: Path) -> None:
    env = dict(os.environ, TIERMEM_HOME=str(tmp_path / "h"))
    env.pop("TIERMEM_DEBUG", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiermem.tui",
            "store",
            "--text",
            "x",
            "--category",
            "c",
            "--importance",
            "7",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 3 and proc.stderr.strip().count("\n") == 0
    assert "Traceback" not in proc.stderr


def test_logs_shows_what_consolidation_wrote_and_where(capsys, home: Path) -> None:
    assert cli(capsys, home, "logs")[0] == 4  # nothing has logged yet: not found
    cli_json(capsys, home, "store", "--text", "the log test fact", "--category", "ci")
    assert cli(capsys, home, "consolidate")[0] == 0
    shown = cli_json(capsys, home, "logs", "--lines", "5")
    assert shown["path"] == str(home.resolve() / "logs" / "tiermem.log")
    assert any("consolidat" in line for line in shown["lines"])
    assert cli_json(capsys, home, "logs", "--path") == {"path": shown["path"]}


def test_a_read_on_a_missing_home_starts_no_log(capsys, home: Path) -> None:
    cli(capsys, home, "sync", "status")
    assert not (home / "logs").exists()


def test_an_error_raised_while_ctrl_c_is_handled_is_reported_as_the_interruption(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean-up that fails because ctrl-C cut it short is exit 130, not an internal error."""
    from tiermem.core.paths import Home

    home = tmp_path / "home"
    assert cli(capsys, home, "store", "--text", "a fact", "--category", "c")[0] == 0

    def interrupted_clean_up(self: Home, agent_id: str) -> Path:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("clean-up failed") from None

    monkeypatch.setattr(Home, "memory_md", interrupted_clean_up)
    code, _, err = cli(capsys, home, "hot")
    assert code == 130 and err.strip() == "tiermem: error: interrupted"


CONTROLS = "evil \x1b[2J\x1b]0;owned\x07 \x1b[31mred\x1b[0m \u202ereversed about deploys"


def test_stored_control_characters_never_reach_the_terminal(tmp_path: Path) -> None:
    """A memory may hold escape sequences (pasted from a web page, written by an agent): the
    human output of the real command shows them as escapes, so printing a memory cannot clear
    the screen, retitle the window or reorder a line; `--json` keeps the text exact."""
    env = {**os.environ, "TIERMEM_HOME": str(tmp_path / "home")}
    base = [sys.executable, "-m", "tiermem.tui"]
    stored = subprocess.run(
        [*base, "store", "--text", CONTROLS, "--category", "notes"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert stored.returncode == 0, stored.stderr
    shown = subprocess.run([*base, "retrieve", "deploys"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    for char in "\x1b\x07\u202e":
        assert char not in shown.stdout + stored.stdout, repr(shown.stdout)
    assert "evil \\x1b[2J\\x1b]0;owned\\x07 \\x1b[31mred" in shown.stdout
    exact = subprocess.run(
        [*base, "--json", "retrieve", "deploys"], env=env, capture_output=True, text=True
    )
    assert json.loads(exact.stdout)["results"][0]["text"] == CONTROLS
    refused = subprocess.run(
        [*base, "retrieve", "x", "--tier", "\x1b[2Jwarm"], env=env, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "\x1b" not in refused.stderr, repr(refused.stderr)


def _on_a_terminal(command: list[str], env: dict[str, str]) -> bytes:
    """What `command` writes to standard output when that is a terminal (a pty)."""
    proc, master = open_terminal(command, env)
    out = bytearray()
    read_until(master, out, None, 60)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    return bytes(out)


def test_an_export_to_a_terminal_shows_controls_and_to_a_pipe_is_exact(tmp_path: Path) -> None:
    env = {**os.environ, "TIERMEM_HOME": str(tmp_path / "home")}
    base = [sys.executable, "-m", "tiermem.tui"]
    subprocess.run([*base, "store", "--text", CONTROLS, "--category", "notes"], env=env, check=True)
    export = [*base, "export", "--format", "markdown"]
    piped = subprocess.run(export, env=env, capture_output=True, text=True, check=True).stdout
    assert CONTROLS in piped
    shown = _on_a_terminal(export, env)
    assert b"\x1b[2J" not in shown and b"\\x1b[2J" in shown


@pytest.mark.parametrize("group", ["sync", "graph", "agents", "resident"])
def test_a_group_without_its_command_prints_its_help(capsys, home: Path, group: str) -> None:
    code, out, err = cli(capsys, home, group)
    assert (code, err) == (0, "")
    assert out.startswith(f"Usage: tiermem {group} ") and "\nCommands:\n" in out
    assert len(out.splitlines()) > 5  # the help as click lays it out, not folded into one line
