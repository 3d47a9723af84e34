"""Metadata extraction (URLs, commands, paths) and its use by store, search-url and urls."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clikit import cli, cli_json
from tiermem.core.engine import Memory
from tiermem.core.metadata import extract, looks_like_command


def test_urls_lose_sentence_punctuation_but_keep_their_own_brackets() -> None:
    text = (
        "See https://en.wikipedia.org/wiki/Foo_(bar), (docs: https://x.org/a?b=1&c=2). "
        "Also www.example.com/path. and https://x.org/a?b=1&c=2 again."
    )
    assert extract(text).urls == [
        "https://en.wikipedia.org/wiki/Foo_(bar)",
        "https://x.org/a?b=1&c=2",
        "www.example.com/path",
    ]


def test_commands_come_from_backticks_prompts_and_shell_blocks() -> None:
    text = (
        "Run `git push origin main` and `main.py` (a file, not a command).\n"
        "$ docker compose up -d\n"
        "```bash\n$ npm install\nmake build\n# a comment\n```\n"
        "```python\nprint('not a command')\n```\n"
        "Say `hello world` or `make`."
    )
    assert extract(text).commands == [
        "npm install",
        "make build",
        "git push origin main",
        "make",
        "docker compose up -d",
    ]


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        ("sudo systemctl restart nginx", True),
        ("FOO=1 python3 app.py", True),
        ("./deploy.sh --prod", True),
        ("ls", True),
        ("hello world", False),
        ("git", False),
        ("./deploy.sh", False),
    ],
)
def test_looks_like_command(span: str, expected: bool) -> None:
    assert looks_like_command(span) is expected


def test_paths_need_two_segments_a_prefix_or_an_extension() -> None:
    text = (
        "Edit /etc/nginx/nginx.conf, ~/notes.txt, ./run.sh and src/app/main.py; "
        "not and/or, 50/50, km/h, /help or https://host/a/b.html; C:\\Users\\me\\x.txt too."
    )
    assert extract(text).paths == [
        "/etc/nginx/nginx.conf",
        "~/notes.txt",
        "./run.sh",
        "src/app/main.py",
        "C:\\Users\\me\\x.txt",
    ]


def test_store_merges_extracted_metadata_with_the_given_one(mem: Memory) -> None:
    outcome = mem.store(
        "Dashboard at https://grafana.example.com/d/1, restart with `systemctl restart app`",
        "ops",
        0.6,
        urls=["https://status.example.com"],
        paths=["/srv/app"],
    )
    record = mem.get(outcome.id)
    assert record.urls == ("https://status.example.com", "https://grafana.example.com/d/1")
    assert record.commands == ("systemctl restart app",)
    assert record.paths == ("/srv/app",)


def test_extracted_metadata_is_capped_not_refused(mem: Memory) -> None:
    text = " ".join(f"https://example.org/{i}" for i in range(80))
    record = mem.get(mem.store(text, "links").id)
    assert len(record.urls) == 50 and record.urls[0] == "https://example.org/0"


def test_cli_extract_metadata_search_url_and_urls(capsys, home: Path, tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text(
        "Deployed via `npm run deploy`; docs https://docs.example.org/x; see ./README.md\n"
    )
    found = cli_json(capsys, home, "extract-metadata", str(note))
    assert found == {
        "file": str(note),
        "urls": ["https://docs.example.org/x"],
        "commands": ["npm run deploy"],
        "paths": ["./README.md"],
    }
    stored = cli_json(
        capsys,
        home,
        "store",
        "--text",
        "Staging lives at https://staging.example.com/app",
        "--category",
        "ops",
        "--url",
        "https://ci.example.com/job/7",
        "--command",
        "make deploy",
    )
    assert stored["metadata"] == {
        "urls": ["https://ci.example.com/job/7", "https://staging.example.com/app"],
        "commands": ["make deploy"],
        "paths": [],
    }
    hits = cli_json(capsys, home, "search-url", "STAGING.example")
    assert [h["id"] for h in hits["results"]] == [stored["id"]]
    assert cli_json(capsys, home, "search-url", "nowhere")["results"] == []
    listed = cli_json(capsys, home, "urls")
    assert listed["count"] == 2
    assert {u["url"] for u in listed["urls"]} == {
        "https://ci.example.com/job/7",
        "https://staging.example.com/app",
    }
    code, _, err = cli(capsys, home, "search-url", "  ")
    assert code == 3 and "fragment is empty" in err


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"\x00\x01binary\x00", "binary"), (b"caf\xe9 au lait", "not UTF-8"), (b"  \n", "empty")],
)
def test_extract_metadata_bad_files(capsys, home: Path, tmp_path: Path, content, needle) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    code, out, err = cli(capsys, home, "extract-metadata", str(bad))
    assert code == 3 and needle in err and err.count("\n") == 1 and "Traceback" not in out + err
