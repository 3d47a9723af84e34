"""`tiermem import --from FORMAT PATH` and `export --format mem0|basic-memory`, through the CLI."""

from __future__ import annotations

import datetime as dt
import json
import os
import pty
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clikit import cli, cli_json
from tiermem.core.errors import EXIT_USAGE, InvalidInput

FIXTURES = Path(__file__).parent.parent / "fixtures" / "import"
MEMORY_FORMATS = [
    ("openclaw", "openclaw"),
    ("basic-memory", "basic-memory"),
    ("mem0", "mem0"),
    ("mem0", "mem0-package"),
    ("mempalace", "mempalace-export"),
    ("mempalace", "mempalace-palace"),
]
CHAT_FORMATS = ["claude-code", "chatgpt", "claude-ai", "slack"]


def memories(capsys, home: Path) -> list[dict[str, Any]]:
    return list(cli_json(capsys, home, "export", "--format", "json")["memories"])


@pytest.mark.parametrize(("fmt", "folder"), MEMORY_FORMATS)
def test_a_memory_tool_import_is_idempotent_and_the_dry_run_writes_nothing(
    capsys, tmp_path: Path, fmt: str, folder: str
) -> None:
    home = tmp_path / "home"
    path = str(FIXTURES / folder)
    dry = cli_json(capsys, home, "import", "--from", fmt, "--dry-run", path)
    assert dry["dry_run"] is True and dry["new"] > 0
    assert sum(dry["categories"].values()) == dry["new"]
    assert not home.exists()  # the dry run created nothing
    first = cli_json(capsys, home, "import", "--from", fmt, path)
    assert first["stored"] + first["merged"] == dry["new"]
    stored = memories(capsys, home)
    assert len(stored) == first["stored"]
    again = cli_json(capsys, home, "import", "--from", fmt, path)
    assert again["stored"] == 0 and again["new"] == 0
    assert again["already_imported"] == dry["new"]
    after = memories(capsys, home)
    assert [m["access_count"] for m in after] == [m["access_count"] for m in stored]


def test_the_dry_run_names_categories_and_what_would_be_skipped(capsys, tmp_path: Path) -> None:
    code, out, _ = cli(
        capsys,
        tmp_path / "h",
        "import",
        "--from",
        "openclaw",
        "--dry-run",
        str(FIXTURES / "openclaw"),
    )
    assert code == 0
    assert "would import 5 facts" in out
    assert "decisions: 1" in out and "lessons: 1" in out
    assert "notes.md: not a daily note" in out


def test_openclaw_daily_notes_are_dated_by_their_day(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli_json(capsys, home, "import", "--from", "openclaw", str(FIXTURES / "openclaw"))
    deployed = [m for m in memories(capsys, home) if m["text"].startswith("Deployed the billing")]
    assert len(deployed) == 1
    assert _day(deployed[0]["created_at"]) == "2026-03-02"
    assert deployed[0]["metadata"]["urls"] == ["https://staging.example.com"]


def test_basic_memory_observations_keep_their_note_and_kind(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli_json(capsys, home, "import", "--from", "basic-memory", str(FIXTURES / "basic-memory"))
    by_text = {m["text"]: m["category"] for m in memories(capsys, home)}
    decision = "Authentication Design: Using JWT tokens for stateless authentication"
    assert by_text[decision] == "decisions"
    assert (
        by_text["Authentication Design: Refresh tokens stored in HTTP-only cookies to prevent XSS"]
        == "projects"
    )
    assert by_text["Authentication Design implements API Security Requirements"] == "projects"
    assert not any(text.endswith(": ok") for text in by_text)


def test_mem0_categories_and_dates_are_kept(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli_json(capsys, home, "import", "--from", "mem0", str(FIXTURES / "mem0" / "memories.json"))
    coffee = next(m for m in memories(capsys, home) if "coffee" in m["text"])
    assert coffee["category"] == "food"
    assert _day(coffee["created_at"]) == "2025-11-03"


@pytest.mark.parametrize("folder", ["mempalace-palace", "mempalace-export"])
def test_a_palace_drawer_lands_under_its_wing_and_room(capsys, tmp_path: Path, folder: str) -> None:
    home = tmp_path / "home"
    cli_json(capsys, home, "import", "--from", "mempalace", str(FIXTURES / folder))
    stored = memories(capsys, home)
    assert {m["category"] for m in stored} == {"mpsrc/car", "mpsrc/garden"}
    car = next(m for m in stored if m["category"] == "mpsrc/car")
    assert car["text"].startswith("Car: The Renault Zoe needs its battery check")
    assert car["metadata"]["urls"] == ["https://garage.example.pt/booking"]
    assert car["metadata"]["paths"][0].endswith("mpsrc/car/zoe.md")
    assert "mpsrc/car" in json.dumps(cli_json(capsys, home, "tree"))


def test_a_real_palace_gives_its_drawers_and_skips_its_closets(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    palace = str(FIXTURES / "mempalace-palace")
    dry = cli_json(capsys, home, "import", "--from", "mempalace", "--dry-run", palace)
    assert dry["new"] == 2
    assert len(dry["skipped"]) == 2
    assert all("mempalace_closets" in reason for reason in dry["skipped"])
    cli_json(capsys, home, "import", "--from", "mempalace", palace)
    texts = [m["text"] for m in memories(capsys, home)]
    assert len(texts) == 2
    assert not any("→drawer" in t or t.startswith("#") for t in texts)


@pytest.mark.parametrize("fmt", CHAT_FORMATS)
def test_a_chat_history_goes_through_conversation_end_once_dated_by_the_chat(
    capsys, tmp_path: Path, fmt: str
) -> None:
    home = tmp_path / "home"
    path = str(FIXTURES / fmt)
    dry = cli_json(capsys, home, "import", "--from", fmt, "--dry-run", path)
    assert dry["conversations"] >= 1 and not home.exists()
    first = cli_json(capsys, home, "import", "--from", fmt, path)
    assert first["conversations"] == dry["conversations"]
    assert first["facts_from_conversations"] >= 1
    stored = memories(capsys, home)
    records = [m for m in stored if m["category"] == "conversations"]
    assert len(records) == dry["conversations"]
    assert all(_day(m["created_at"]) < "2026-11-01" for m in stored)
    again = cli_json(capsys, home, "import", "--from", fmt, path)
    assert again["conversations"] == 0 and again["already_imported"] == dry["conversations"]
    assert len(memories(capsys, home)) == len(stored)


def test_chatgpt_reads_the_branch_the_user_last_saw(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli_json(capsys, home, "import", "--from", "chatgpt", str(FIXTURES / "chatgpt"))
    texts = " ".join(m["text"] for m in memories(capsys, home))
    assert "Alfama apartment" in texts and "abandoned branch" not in texts
    mia = next(m for m in memories(capsys, home) if "Mia" in m["text"])
    assert _day(mia["created_at"]) == "2025-01-01"


def test_claude_code_keeps_text_and_leaves_tool_results_out(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = cli_json(capsys, home, "import", "--from", "claude-code", str(FIXTURES / "claude-code"))
    assert any("line 5: not JSON" in s for s in out["skipped"])
    texts = [m["text"] for m in memories(capsys, home)]
    assert "We decided to switch the test runner from nose to pytest." in texts
    assert not any("Successfully installed" in t for t in texts)


def test_no_progress_bar_on_a_pipe(capsys, tmp_path: Path) -> None:
    code, out, err = cli(
        capsys, tmp_path / "h", "import", "--from", "slack", str(FIXTURES / "slack")
    )
    assert code == 0 and err.startswith("tiermem: created agent") and err.count("\n") == 1
    assert "conversations" in out and "%" not in out


@pytest.mark.parametrize(
    ("fmt", "make", "message"),
    [
        ("mem0", lambda p: p.write_text("{not json"), "invalid JSON"),
        ("mem0", lambda p: p.write_text('{"x": 1}'), "not a mem0 export"),
        ("chatgpt", lambda p: p.write_bytes(b"\x00\x01"), "binary"),
        ("slack", lambda p: p.write_text("[]"), "not a folder"),
        ("mempalace", lambda p: p.mkdir(), "no MemPalace drawers"),
    ],
)
def test_bad_input_is_one_line_and_the_invalid_input_exit_with_nothing_stored(
    capsys, tmp_path: Path, fmt: str, make, message: str
) -> None:
    home = tmp_path / "home"
    cli_json(capsys, home, "store", "--text", "kept fact about the garden", "--category", "notes")
    bad = tmp_path / "bad.json"
    make(bad)
    code, out, err = cli(capsys, home, "import", "--from", fmt, str(bad))
    assert code == InvalidInput.exit_code, (out, err)
    assert message in err and len(err.strip().splitlines()) == 1
    assert [m["text"] for m in memories(capsys, home)] == ["kept fact about the garden"]


def test_a_palace_that_is_not_chromadb_is_refused(capsys, tmp_path: Path) -> None:
    palace = tmp_path / "palace"
    palace.mkdir()
    sqlite3.connect(palace / "chroma.sqlite3").execute("CREATE TABLE x (y)").connection.close()
    code, _, err = cli(capsys, tmp_path / "home", "import", "--from", "mempalace", str(palace))
    assert code == InvalidInput.exit_code and "not a ChromaDB palace" in err


def test_export_to_mem0_reimports_as_the_same_facts(capsys, tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    cli_json(capsys, home, "import", "--from", "mem0", str(FIXTURES / "mem0"))
    out = tmp_path / "mem0.json"
    cli_json(capsys, home, "export", "--format", "mem0", "-o", str(out))
    results = json.loads(out.read_text())["results"]
    assert {r["memory"] for r in results} == {m["text"] for m in memories(capsys, home)}
    assert all(r["user_id"] == "default" and r["created_at"] for r in results)
    cli_json(capsys, other, "import", "--from", "mem0", str(out))
    assert {m["text"] for m in memories(capsys, other)} == {r["memory"] for r in results}


def test_export_to_basic_memory_is_a_project_basic_memory_reads(capsys, tmp_path: Path) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    cli_json(capsys, home, "import", "--from", "mempalace", str(FIXTURES / "mempalace-export"))
    folder = tmp_path / "bm"
    written = cli_json(capsys, home, "export", "--format", "basic-memory", "-o", str(folder))
    assert written["notes"] == 3  # hot-memory.md and one note per room
    note = (folder / "mpsrc" / "car.md").read_text()
    assert note.startswith("---\ntitle: car\n") and "- [car] Car: The Renault Zoe" in note
    dry = cli_json(capsys, other, "import", "--from", "basic-memory", "--dry-run", str(folder))
    assert dry["new"] >= 2


def test_export_basic_memory_needs_an_output_folder(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli_json(capsys, home, "store", "--text", "a fact to export", "--category", "ci")
    code, _, err = cli(capsys, home, "export", "--format", "basic-memory")
    assert code == EXIT_USAGE and "--output" in err


def test_a_growing_claude_code_session_adds_only_its_new_facts(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    session = tmp_path / "s.jsonl"
    shutil.copy(next((FIXTURES / "claude-code").rglob("*.jsonl")), session)
    cli_json(capsys, home, "import", "--from", "claude-code", str(session))
    before = len(memories(capsys, home))
    line = {
        "type": "user",
        "sessionId": "3f1c9a2e-5d1b-4c7e-9a10-2b3c4d5e6f70",
        "timestamp": "2026-01-14T11:00:00Z",
        "message": {
            "role": "user",
            "content": "Lesson learned: never skip the flaky test quarantine.",
        },
    }
    with session.open("a") as handle:
        handle.write(json.dumps(line) + "\n")
    again = cli_json(capsys, home, "import", "--from", "claude-code", str(session))
    assert again["conversations"] == 1
    texts = [m["text"] for m in memories(capsys, home)]
    assert len(texts) > before and texts.count("I prefer short test names.") == 1


def _day(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).date().isoformat()


def test_the_output_of_the_real_mem0_package_imports_with_its_dates(capsys, tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = FIXTURES / "mem0-package" / "get_all.json"
    results = json.loads(path.read_text())["results"]
    cli_json(capsys, home, "import", "--from", "mem0", str(path))
    stored = {m["text"]: m for m in memories(capsys, home)}
    assert set(stored) == {r["memory"] for r in results}
    hugo = stored["Decided to migrate the blog from Jekyll to Hugo"]
    assert hugo["category"] == "decisions" and _day(hugo["created_at"]) == "2026-11-25"


def test_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    args = ["--home", str(tmp_path / "home"), "import", "--from", "slack", str(FIXTURES / "slack")]
    with subprocess.Popen(
        [sys.executable, "-m", "tiermem.tui", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=terminal,
    ) as proc:
        os.close(terminal)
        out, _ = proc.communicate(timeout=120)
        seen = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        os.close(controller)
    assert proc.returncode == 0
    assert b"conversations" in seen and b"100%" in seen
    assert b"2 conversations" in out


def test_dry_run_without_a_format_is_refused(capsys, tmp_path: Path) -> None:
    code, _, err = cli(capsys, tmp_path / "home", "import", "--dry-run", str(FIXTURES / "mem0"))
    assert code == InvalidInput.exit_code and "--dry-run goes with --from FORMAT" in err


def test_from_without_a_path_is_refused(capsys, tmp_path: Path) -> None:
    code, _, err = cli(capsys, tmp_path / "home", "import", "--from", "mem0")
    assert code == InvalidInput.exit_code and "--from mem0 needs a PATH" in err
