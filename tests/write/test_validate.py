"""validate: missing URLs, commands and next steps in daily notes; the exit code tells."""

from __future__ import annotations

from pathlib import Path

from tests.clikit import cli, cli_json
from tiermem.core.validate import check_text

GOOD = """# 2026-01-05
- Deployed the app with `npm run deploy` to https://app.example.com
- Signed up for the Grafana dashboard: https://grafana.example.com/d/1

## Next steps
- [ ] Add alerts
"""

BAD = """# 2026-01-06
- Set up the new dashboard for the team
- Ran the migration on staging
- Checked GitHub for the failing build
"""


def kinds(text: str) -> list[tuple[int, str]]:
    return [(w.line, w.kind) for w in check_text(text, Path("x.md")).warnings]


def test_complete_note_has_no_warnings() -> None:
    assert kinds(GOOD) == []


def test_missing_urls_commands_and_next_steps() -> None:
    assert kinds(BAD) == [
        (2, "missing-url"),
        (3, "missing-command"),
        (4, "missing-url"),
        (0, "missing-next-steps"),
    ]
    warnings = check_text(BAD, Path("x.md")).warnings
    assert "'GitHub'" in warnings[2].message and "https://" in warnings[2].suggestion
    assert "backticks" in warnings[1].suggestion


def test_a_url_or_command_on_the_next_line_counts() -> None:
    note = "- The status page\n  https://status.example.com\n- Ran it:\n  $ make migrate\n- TODO: more\n"
    assert kinds(note) == []


def test_cli_validate_exit_codes(capsys, home: Path, tmp_path: Path) -> None:
    good, bad = tmp_path / "2026-01-05.md", tmp_path / "2026-01-06.md"
    good.write_text(GOOD)
    bad.write_text(BAD)
    assert cli_json(capsys, home, "validate", str(good))["ok"] is True
    out = cli_json(capsys, home, "validate", str(bad), code=1)
    assert out["warnings"] == 4 and out["files"][0]["warnings"][0]["line"] == 2
    every = cli_json(capsys, home, "validate", "--all", "--dir", str(tmp_path), code=1)
    assert [f["file"] for f in every["files"]] == [str(good), str(bad)]
    code, text, _ = cli(capsys, home, "validate", str(bad))
    assert code == 1 and f"{bad}:2: warning: mentions 'dashboard' without a URL" in text
    binary = tmp_path / "2026-01-07.md"
    binary.write_bytes(b"\x00\x01")
    out = cli_json(capsys, home, "validate", str(binary), code=1)
    assert "binary" in out["files"][0]["error"]
    code, _, err = cli(capsys, home, "validate")  # a read: no home yet
    assert code == 4 and "no memory home" in err
    cli_json(capsys, home, "store", "--text", "a fact", "--category", "c")
    code, _, err = cli(capsys, home, "validate")  # today's note does not exist
    assert code == 4 and "no daily note for today" in err
    code, _, err = cli(capsys, home, "validate", str(good), "--all")
    assert code == 3 and "not both" in err
