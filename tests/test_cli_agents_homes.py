"""Agents and homes are explicit: reads never create them, agents can be listed, renamed and
deleted, a read-only home serves reads, bad input is one line, global options go anywhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.clikit import cli
from tiermem.tui.cli import run


def store(capsys, home: Path, text: str, *extra: str) -> dict[str, Any]:
    code, out, err = cli(capsys, home, "--json", *extra, "store", "--text", text, "--category", "c")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def test_read_on_a_mistyped_agent_fails_with_a_suggestion_and_creates_nothing(capsys, tmp_path):
    home = tmp_path / "home"
    store(capsys, home, "the staging db is on port 5433", "--agent-id", "nobody")
    code, _, err = cli(capsys, home, "--agent-id", "nobdy", "retrieve", "staging")
    assert code == 4 and "did you mean 'nobody'?" in err and err.count("\n") == 1
    code, out, _ = cli(capsys, home, "--json", "agents", "list")
    assert [a["agent_id"] for a in json.loads(out)["agents"]] == ["nobody"]


def test_the_tui_refuses_a_mistyped_agent_before_opening_and_creates_nothing(capsys, tmp_path):
    home = tmp_path / "home"
    store(capsys, home, "the staging db is on port 5433", "--agent-id", "nobody")
    code, _, err = cli(capsys, home, "--agent-id", "nobdy", "tui")
    assert code == 4 and "did you mean 'nobody'?" in err
    code, out, _ = cli(capsys, home, "--json", "agents", "list")
    assert [a["agent_id"] for a in json.loads(out)["agents"]] == ["nobody"]


def test_write_to_a_new_agent_creates_it_and_says_so(capsys, tmp_path):
    home = tmp_path / "home"
    code, _, err = cli(
        capsys, home, "--agent-id", "alice", "store", "--text", "x", "--category", "c"
    )
    assert code == 0 and "created agent 'alice'" in err
    code, _, err = cli(
        capsys, home, "--agent-id", "alice", "store", "--text", "y", "--category", "c"
    )
    assert code == 0 and "created" not in err


def test_rename_moves_every_row_and_keeps_dedup(capsys, tmp_path):
    home = tmp_path / "home"
    first = store(capsys, home, "deploys go through https://ci.example/run", "--agent-id", "old")
    code, _, _ = cli(capsys, home, "agents", "rename", "old", "new")
    assert code == 0
    again = store(capsys, home, "deploys go through https://ci.example/run", "--agent-id", "new")
    assert not again["created"] and again["id"] != first["id"]  # known fact, new agent's id
    code, out, _ = cli(capsys, home, "--json", "--agent-id", "new", "retrieve", "deploys")
    assert [r["text"] for r in json.loads(out)["results"]] == [
        "deploys go through https://ci.example/run"
    ]
    code, _, err = cli(capsys, home, "--agent-id", "old", "get", first["id"])
    assert code == 4 and "no agent 'old'" in err


def test_delete_needs_yes_and_archives_the_export_first(capsys, tmp_path):
    home = tmp_path / "home"
    store(capsys, home, "a fact to archive", "--agent-id", "gone")
    store(capsys, home, "a fact that stays")
    code, _, err = cli(capsys, home, "agents", "delete", "gone")
    assert code == 3 and "--yes" in err
    code, out, _ = cli(capsys, home, "--json", "agents", "delete", "gone", "--yes")
    assert code == 0
    archive = Path(json.loads(out)["archive"])
    assert archive.parent == home / "archive"
    assert json.loads(archive.read_text())["memories"][0]["text"] == "a fact to archive"
    code, out, _ = cli(capsys, home, "--json", "agents", "list")
    assert [a["agent_id"] for a in json.loads(out)["agents"]] == ["default"]


def test_synced_agent_cannot_be_renamed_or_deleted(capsys, tmp_path):
    home = tmp_path / "home"
    store(capsys, home, "a fact")
    import sqlite3

    con = sqlite3.connect(home / "tiermem.db")
    con.execute(
        "INSERT INTO sync_state (agent_id, status, url, device_id, epoch, secret_ref, "
        "secret_store, device_wrap, recovery_wrap, created_at) VALUES ('default', 'ready', 'u', "
        "'d', 1, 'r', 'file', x'00', x'00', 0)"
    )
    con.commit()
    con.close()
    code, _, err = cli(capsys, home, "agents", "rename", "default", "other")
    assert code == 82 and "sync set up" in err
    code, _, err = cli(capsys, home, "agents", "delete", "default", "--yes")
    assert code == 82 and not (home / "archive").exists()


def test_read_on_a_mistyped_home_creates_nothing_and_names_the_close_one(capsys, tmp_path):
    store(capsys, tmp_path / "memhome", "a fact")
    for args in (["hot"], ["retrieve", "fact"], ["export"], ["doctor"], ["agents", "list"]):
        code, _, err = cli(capsys, tmp_path / "memhoem", *args)
        assert code == 4 and "no memory home at" in err and "memhome" in err, args
    assert not (tmp_path / "memhoem").exists()


def test_read_only_home_serves_reads_and_doctor_does_not_call_it_damaged(capsys, tmp_path):
    home = tmp_path / "home"
    fact = store(capsys, home, "the read-only fact")
    (home / "tiermem.db").chmod(0o400)
    home.chmod(0o500)
    try:
        for args in (["hot"], ["export"], ["get", fact["id"]], ["retrieve", "fact"]):
            code, _, err = cli(capsys, home, *args)
            assert code == 0, (args, err)
        code, _, err = cli(capsys, home, "store", "--text", "more", "--category", "c")
        assert code == 7 and "read-only" in err
        code, out, _ = cli(capsys, home, "--json", "doctor", "--offline")
        doc = json.dumps(json.loads(out))
        assert code == 0 and "read-only" in doc and "restore" not in doc and "damaged" not in doc
    finally:
        home.chmod(0o700)
        (home / "tiermem.db").chmod(0o600)


def test_invalid_utf8_argument_is_exit_3(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiermem.tui",
            "--home",
            str(tmp_path / "h"),
            "store",
            "--text",
            b"caf\xff".decode("utf-8", "surrogateescape"),
            "--category",
            "c",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    assert done.returncode == 3 and "--text is not valid UTF-8" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "h").exists()


def test_deeply_nested_config_is_a_config_error_and_a_doctor_fail(capsys, tmp_path):
    home = tmp_path / "home"
    store(capsys, home, "a fact")
    (home / "config.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = cli(capsys, home, "hot")
    assert code == 6 and "nested too deeply" in err
    code, out, _ = cli(capsys, home, "--json", "doctor", "--offline")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert (
        checks["config"]["verdict"] == "FAIL" and "nested too deeply" in checks["config"]["detail"]
    )


def test_deeply_nested_import_file_is_exit_3(capsys, tmp_path):
    bad = tmp_path / "warm.json"
    bad.write_text("[" * 100000 + "]" * 100000)
    code, _, err = cli(capsys, tmp_path / "home", "import", "--warm", str(bad))
    assert code == 3 and "nested too deeply" in err
    store(capsys, tmp_path / "home", "a fact")
    code, _, err = cli(capsys, tmp_path / "home", "hot", "--update", "identity", "[" * 100000)
    assert code == 3 and "nested too deeply" in err


def test_global_options_work_after_the_command(capsys, tmp_path):
    home = tmp_path / "home"
    code = run(
        [
            "store",
            "--text",
            "x y",
            "--category",
            "c",
            "--agent-id",
            "a",
            "--home",
            str(home),
            "--json",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and json.loads(out)["created"]
    code = run(["sync", "status", "--json", f"--home={home}", "--agent-id=a"])
    out, _ = capsys.readouterr()
    assert code == 0 and json.loads(out)["agent_id"] == "a"
    code = run(
        ["--home", str(home), "--agent-id", "a", "store", "--category", "c", "--text", "--json"]
    )
    out, _ = capsys.readouterr()
    assert code == 0 and out.startswith("stored")  # an option's value stays a value


def test_get_shows_dates_and_metadata_lines(capsys, tmp_path):
    home = tmp_path / "home"
    fact = store(capsys, home, "docs at https://docs.example/x")
    code, out, _ = cli(capsys, home, "get", fact["id"])
    assert code == 0 and "url:" in out and "https://docs.example/x" in out
    assert "UTC" in out and "{" not in out and "created_at" not in out
    assert time.strftime("%Y-%m-%d", time.gmtime()) in out


def test_ctrl_c_during_demo_leaves_nothing_and_a_rerun_succeeds(tmp_path):
    home = tmp_path / "home"
    command = [sys.executable, "-m", "tiermem.tui", "--home", str(home), "demo"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (home / "MEMORY-demo.md").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, err
    done = subprocess.run(
        [*command[:-1], "--json", "agents", "list"], capture_output=True, text=True
    )
    assert done.returncode == 4 or json.loads(done.stdout)["agents"] == []
    rerun = subprocess.run(command, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr


def test_failed_first_write_to_a_new_agent_leaves_no_agent(capsys, tmp_path):
    home = tmp_path / "home"
    store(capsys, home, "a fact")
    code, _, err = cli(
        capsys,
        home,
        "--agent-id",
        "typo",
        "store",
        "--text",
        "x",
        "--category",
        "c",
        "--importance",
        "7",
    )
    assert code == 3 and "created" not in err
    code, out, _ = cli(capsys, home, "--json", "agents", "list")
    assert [a["agent_id"] for a in json.loads(out)["agents"]] == ["default"]


def test_bad_encodings_in_input_files_are_one_line_exit_3(capsys, tmp_path):
    bad = tmp_path / "t.txt"
    bad.write_bytes(b"User: caf\xe9 au lait\n")
    for args in (
        ["conversation-end", str(bad)],
        ["distill", str(bad)],
        ["import", "--warm", str(bad)],
    ):
        code, _, err = cli(capsys, tmp_path / "home", *args)
        assert code == 3 and "UTF-8" in err and err.count("\n") == 1, args


def test_a_commands_own_option_of_a_global_name_stays_that_commands():
    from tiermem.tui.cli import app
    from tiermem.tui.cli.argv import hoist_globals

    assert hoist_globals(app, ["demo", "--agent-id", "d2", "--json"]) == [
        "--json",
        "demo",
        "--agent-id",
        "d2",
    ]
    assert hoist_globals(app, ["restore", "--agent-id", "a", "--home", "h"]) == [
        "--home",
        "h",
        "restore",
        "--agent-id",
        "a",
    ]
    assert hoist_globals(app, ["store", "--text", "x", "--", "--json"]) == [
        "store",
        "--text",
        "x",
        "--",
        "--json",
    ]
    assert hoist_globals(app, ["--agent-id", "a", "hot", "--agent-id", "b"]) == [
        "--agent-id",
        "a",
        "--agent-id",
        "b",
        "hot",  # the later one wins, as written
    ]
