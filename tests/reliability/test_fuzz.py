"""Fuzzing every decoder and input surface with Hypothesis: only declared errors, never a crash.

Surfaces: CLI arguments (in-process `tiermem.tui.cli.run`), config files, seed JSON imports,
daily notes, transcripts (and conversation-end over them), critical-state documents (what a
restore decodes), record envelopes and key wraps, recovery keys, Hrana responses, and MCP tool
arguments. "Declared" means: a `TiermemError` (its exit code for the CLI, never 70 = internal
error), an MCP `ToolError`, or a documented result; never another exception, never a traceback.

The default suite runs QUICK examples per surface; `-m fuzz` runs TIERMEM_FUZZ_EXAMPLES (10,000)
each. In CI the `ci` Hypothesis profile (tests/conftest.py) derandomizes the runs; elsewhere a
failure prints its reproduction (`@reproduce_failure`) and `pytest --hypothesis-seed=N` replays.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import Record, env_int
from tiermem.core import snapshot
from tiermem.core.config import config_from_mapping, load_config
from tiermem.core.engine import Memory
from tiermem.core.errors import TiermemError
from tiermem.core.ingest import ingest_note
from tiermem.core.interchange import import_seed
from tiermem.core.transcript import decode_text, parse
from tiermem.core.validate import check_text
from tiermem.sync import crypto
from tiermem.sync.vault.hrana import HranaClient, HranaError
from tiermem.tui import cli

QUICK = 25
FULL = env_int("TIERMEM_FUZZ_EXAMPLES", 10_000)
DECLARED_EXIT_CODES = {0, 1, 2, 3, 4, 5, 6, 7, *range(12, 18), *range(20, 28)}

json_leaf = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text()
json_values = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
words = st.sampled_from(
    [
        "user:",
        "assistant:",
        "decided",
        "deploy",
        "https://example.com/x",
        "`make test`",
        "#",
        "##",
        "- [ ]",
        "- [x]",
        "```",
        "é",
        "\x00",
        "\ufeff",
        "---",
        "TODO",
        "lesson:",
        "\n",
        " ",
        "0.9",
    ]
)
markdownish = st.lists(words | st.text(max_size=20), max_size=40).map(" ".join)


def run_surface(body: Callable[..., None], examples: int, **strategies: Any) -> None:
    """Run `body` under Hypothesis with `examples` examples (profile settings otherwise)."""
    test = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )(given(**strategies)(body))
    test()


@contextlib.contextmanager
def expected_errors(*types: type[BaseException]) -> Iterator[None]:
    try:
        yield
    except BaseException as exc:  # only the declared types are swallowed
        if not isinstance(exc, (TiermemError, *types)):
            raise


# -- the surfaces --------------------------------------------------------------------------


def fuzz_cli(tmp: Path, examples: int) -> None:
    home = tmp / "home"
    (tmp / "notes").mkdir()
    (tmp / "notes" / "2026-01-02.md").write_text("- decided to deploy on Friday\n")
    (tmp / "talk.txt").write_text("User: we use oolong tea\nAssistant: noted\n")
    commands = [
        ["store"],
        ["retrieve"],
        ["cold"],
        ["get"],
        ["hot"],
        ["tree"],
        ["consolidate"],
        ["metrics"],
        ["import"],
        ["export"],
        ["distill"],
        ["extract-metadata"],
        ["search-url"],
        ["urls"],
        ["validate"],
        ["ingest-daily"],
        ["conversation-end"],
        ["doctor"],
        ["sync", "status"],
        ["hot", "--add-lesson"],
        ["tree", "--add"],
        ["store", "--text"],
    ]
    tokens = st.sampled_from(
        [
            "--text",
            "--category",
            "--importance",
            "--url",
            "--limit",
            "--tier",
            "--budget",
            "--json",
            "--mode",
            "--format",
            "--output",
            "--days",
            "--add",
            "--remove",
            "--warm",
            "--hot",
            "--tree",
            "--config",
            "--set",
            "--add-event",
            "--add-task",
            "--complete",
            "--all",
            "--folder",
            "--llm",
            "--explain",
            "-h",
            "--",
            "-",
            "notes",
            "talk.txt",
            "notes/2026-01-02.md",
            "quick",
            "full",
            "warm",
            "cold",
            "all",
            "json",
            "markdown",
            "a/b/c",
            "{}",
            '{"k": 1}',
            "0",
            "-1",
            "1e309",
            "nan",
            "0.5",
            "2",
        ]
    ) | st.text(max_size=30).filter(
        # argv cannot hold NUL (exec takes C strings); absolute paths could leave the tmp folder
        lambda s: "\x00" not in s and not s.startswith(("/", "~", ".."))
    )

    def body(command: list[str], args: list[str], as_json: bool) -> None:
        argv = ["--home", str(home), *(["--json"] if as_json else []), *command, *args]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.run(argv)
        assert code in DECLARED_EXIT_CODES, (argv, code, err.getvalue())
        assert "Traceback" not in err.getvalue() + out.getvalue(), argv
        if code not in (0, 1):
            assert err.getvalue().startswith("tiermem: error: ") or code == 2, (
                argv,
                err.getvalue(),
            )

    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(b""))
    cwd = Path.cwd()
    os.chdir(tmp)  # any file a fuzzed --output names is written here
    try:
        run_surface(
            body,
            examples,
            command=st.sampled_from(commands),
            args=st.lists(tokens, max_size=6),
            as_json=st.booleans(),
        )
    finally:
        os.chdir(cwd)
        sys.stdin = old_stdin


def fuzz_config(tmp: Path, examples: int) -> None:
    path = tmp / "config.toml"
    tomlish = st.lists(
        st.sampled_from(
            [
                "[hot]",
                "[tree]",
                "[scoring]",
                "[retrieval]",
                "max_bytes = ",
                "mode = ",
                "tau_days = ",
                "hot_threshold = ",
                '"x"',
                "0",
                "-1",
                "1e400",
                "true",
                "[[a]]",
                "=",
                "\n",
                "nope = 1",
                "[llm]",
                "base_url = ",
            ]
        )
        | st.text(max_size=15),
        max_size=20,
    ).map("".join)
    sections = st.sampled_from(
        [
            "hot",
            "warm",
            "cold",
            "tree",
            "scoring",
            "retrieval",
            "dedup",
            "distill",
            "llm",
            "ingest",
            "x",
        ]
    )

    def body(text: str, mapping: dict[str, Any]) -> None:
        path.write_text(text, encoding="utf-8")
        with expected_errors():
            load_config(path)
        with expected_errors():
            config_from_mapping(mapping, "fuzz")

    run_surface(
        body,
        examples,
        text=tomlish | st.text(),
        mapping=st.dictionaries(
            sections,
            st.dictionaries(st.text(max_size=20), json_values, max_size=4) | json_values,
            max_size=4,
        ),
    )


def fuzz_seed_import(tmp: Path, examples: int) -> None:
    mem = Memory(tmp / "home")
    files = {kind: tmp / f"{kind}.json" for kind in ("warm", "tree", "hot", "config")}
    fact = st.fixed_dictionaries(
        {},
        optional={
            "text": json_values | st.text(),
            "category": json_values | st.text(),
            "importance": json_values,
            "created_at": json_values,
            "access_count": json_values,
            "metadata": json_values,
        },
    )
    warm = st.lists(fact, max_size=5) | json_values
    hot = st.fixed_dictionaries(
        {},
        optional={
            "identity": json_values,
            "owner_profile": json_values,
            "active_context": st.fixed_dictionaries(
                {},
                optional={
                    "projects": st.lists(json_values, max_size=3),
                    "events": st.lists(json_values, max_size=3),
                    "tasks": st.lists(json_values, max_size=3),
                },
            )
            | json_values,
            "critical_lessons": st.lists(json_values | st.text(), max_size=3),
        },
    )

    def body(data: dict[str, Any], raw: bytes | None) -> None:
        for kind, value in data.items():
            files[kind].write_text(json.dumps(value), encoding="utf-8")
        if raw is not None:
            files["warm"].write_bytes(raw)
        given_files = {kind: files[kind] for kind in data} | (
            {"warm": files["warm"]} if raw is not None else {}
        )
        with expected_errors():
            import_seed(mem, **given_files)

    try:
        run_surface(
            body,
            examples,
            data=st.fixed_dictionaries(
                {},
                optional={
                    "warm": warm,
                    "tree": st.dictionaries(st.text(max_size=30), json_values, max_size=5)
                    | json_values,
                    "hot": hot | json_values,
                    "config": json_values,
                },
            ),
            raw=st.none() | st.binary(max_size=200),
        )
    finally:
        mem.close()


def fuzz_daily_notes(tmp: Path, examples: int) -> None:
    mem = Memory(tmp / "home")
    folder = tmp / "memory"
    folder.mkdir()

    def body(data: bytes, text: str, day: int) -> None:
        path = folder / f"2026-01-{day:02d}.md"
        for payload in (data, text.encode("utf-8", "surrogatepass")):
            report = ingest_note(mem, path, payload)  # never raises: a per-file report
            assert report.status in ("ingested", "updated", "unchanged", "skipped", "error")
        with expected_errors():
            check_text(text, path)

    try:
        run_surface(
            body,
            examples,
            data=st.binary(max_size=300),
            text=markdownish | st.text(),
            day=st.integers(1, 28),
        )
    finally:
        mem.close()


def fuzz_transcripts(tmp: Path, examples: int) -> None:
    mem = Memory(tmp / "home")
    message = st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["session", "message", "x"]) | st.text(max_size=5),
            "id": json_values,
            "role": st.sampled_from(["user", "assistant", "tool", "system"]) | st.text(max_size=5),
            "content": json_values
            | st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "type": st.sampled_from(["text", "thinking", "toolCall", "tool_use"]),
                        "text": json_values,
                        "arguments": json_values | st.text(),
                        "input": json_values,
                    },
                ),
                max_size=3,
            ),
            "message": json_values,
            "tool_calls": json_values,
        },
    )
    jsonl = st.lists(message.map(json.dumps) | st.text(max_size=20), max_size=6).map("\n".join)

    def body(data: bytes, text: str) -> None:
        with expected_errors():
            decode_text("fuzz", data)
        transcript = parse(text)  # never raises: malformed lines are warnings
        if transcript.messages or transcript.tool_commands:
            with expected_errors():
                mem.conversation_end(transcript, text, mode="rule")

    try:
        run_surface(
            body, examples, data=st.binary(max_size=200), text=jsonl | markdownish | st.text()
        )
    finally:
        mem.close()


def fuzz_critical_state(tmp: Path, examples: int) -> None:
    mem = Memory(tmp / "home", "restored")
    good = snapshot.dump(mem)

    def body(state: Any, patch: dict[str, Any]) -> None:
        with expected_errors():
            snapshot.load(mem, state)
        with expected_errors():
            snapshot.load(mem, good | patch)
        assert mem.trees.load().check() == []

    try:
        run_surface(
            body,
            examples,
            state=json_values,
            patch=st.dictionaries(
                st.sampled_from(["format", "agent_id", "hot", "tree"]), json_values, max_size=2
            ),
        )
    finally:
        mem.close()


def fuzz_envelopes(tmp: Path, examples: int) -> None:
    vault = bytes(range(32))
    context = crypto.RecordContext("agent", "critical", b"\x01" * 16, "v1", b"\x02" * 16)
    sealed = crypto.seal_record(vault, 1, context, b'{"format": 1}')
    wrap = crypto.wrap_with_recovery_key(vault, bytes(32), crypto.WrapContext("agent", 1, b"w"))

    def body(data: bytes, flips: list[tuple[int, int]], text: str) -> None:
        mutated = bytearray(sealed)
        for position, value in flips:
            mutated[position % len(mutated)] ^= value or 1
        for blob in (data, bytes(mutated), sealed[: len(data)]):
            with expected_errors():
                crypto.parse_envelope(blob)
            try:
                plain = crypto.open_record(vault, context, blob)
            except crypto.CryptoError:
                pass
            else:
                assert blob == sealed and plain == b'{"format": 1}'
            with expected_errors():
                crypto.parse_wrap(blob)
        mutated_wrap = bytearray(wrap)
        for position, value in flips:
            mutated_wrap[position % len(mutated_wrap)] ^= value or 1
        for blob in (data, bytes(mutated_wrap)):
            try:
                key = crypto.unwrap_with_recovery_key(
                    blob, bytes(32), crypto.WrapContext("agent", 1, b"w")
                )
            except crypto.CryptoError:
                pass
            else:
                assert key == vault and blob == wrap
        with expected_errors():
            crypto.parse_recovery_key(text)

    run_surface(
        body,
        examples,
        data=st.binary(max_size=300),
        flips=st.lists(
            st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4
        ),
        text=st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZOIL- iu", max_size=70)
        | st.text(max_size=70),
    )


def fuzz_hrana(tmp: Path, examples: int) -> None:
    value = st.fixed_dictionaries(
        {"type": st.sampled_from(["null", "integer", "float", "text", "blob", "x"])},
        optional={"value": json_values, "base64": st.text(max_size=12) | json_values},
    )
    result = st.fixed_dictionaries(
        {},
        optional={
            "cols": st.lists(
                st.fixed_dictionaries({}, optional={"name": json_values, "decltype": json_values}),
                max_size=3,
            )
            | json_values,
            "rows": st.lists(st.lists(value, max_size=3), max_size=3) | json_values,
            "affected_row_count": json_values,
            "last_insert_rowid": json_values,
            "step_results": st.lists(json_values, max_size=8),
            "step_errors": st.lists(
                json_values | st.fixed_dictionaries({"message": json_values, "code": json_values}),
                max_size=8,
            ),
        },
    )
    stream = st.fixed_dictionaries(
        {"type": st.sampled_from(["ok", "error", "x"])},
        optional={
            "response": st.fixed_dictionaries(
                {"type": st.sampled_from(["execute", "batch", "close"])},
                optional={"result": result | json_values},
            )
            | json_values,
            "error": json_values,
        },
    )
    document = st.fixed_dictionaries(
        {},
        optional={
            "results": st.lists(stream, max_size=3) | json_values,
            "baton": json_values,
            "error": json_values,
        },
    )
    body_bytes = document.map(lambda d: json.dumps(d).encode()) | st.binary(max_size=100)
    headers = st.dictionaries(
        st.sampled_from(["Retry-After", "Location", "Content-Type"]),
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=30),
        max_size=2,
    )

    def body(status: int, content: bytes, extra: dict[str, str], use_batch: bool) -> None:
        transport = httpx.MockTransport(
            lambda request: httpx.Response(status, content=content, headers=extra)
        )
        with HranaClient(
            "http://127.0.0.1:9", "tiermem-sentinel-token-7Qx2Vd9Lm4", transport=transport
        ) as client:
            try:
                if use_batch:
                    client.batch([("SELECT 1", ()), ("SELECT ?", (2,))])
                else:
                    client.execute("SELECT 1")
            except HranaError as exc:
                assert "tiermem-sentinel-token" not in str(exc)

    run_surface(
        body,
        examples,
        status=st.sampled_from([200, 200, 200, 400, 401, 403, 404, 429, 500, 503, 302])
        | st.integers(100, 599),
        content=body_bytes,
        extra=headers,
        use_batch=st.booleans(),
    )


def fuzz_mcp(tmp: Path, examples: int) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    from tiermem.tui.mcp import build_server, tool_list

    server, state = build_server(tmp / "home", "default", None)
    tools = {t.name: list(t.input_schema.get("properties", {})) for t in tool_list(server)}
    names = sorted(tools)

    @st.composite
    def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
        name = draw(st.sampled_from(names))
        keys = st.sampled_from(tools[name]) if tools[name] else st.text(max_size=5)
        args = draw(
            st.dictionaries(
                keys | st.text(max_size=5),
                json_values
                | st.sampled_from(["read", "update", "warm", "brief", "critical", "identity"]),
                max_size=5,
            )
        )
        return name, args

    def body(call: tuple[str, dict[str, Any]]) -> None:
        name, args = call
        with contextlib.suppress(ToolError):
            asyncio.run(server.call_tool(name, args))

    try:
        run_surface(body, examples, call=calls())
    finally:
        state.close()


SURFACES: dict[str, Callable[[Path, int], None]] = {
    "cli": fuzz_cli,
    "config": fuzz_config,
    "seed-import": fuzz_seed_import,
    "daily-notes": fuzz_daily_notes,
    "transcripts": fuzz_transcripts,
    "critical-state": fuzz_critical_state,
    "envelopes": fuzz_envelopes,
    "hrana": fuzz_hrana,
    "mcp": fuzz_mcp,
}


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    """A folder in memory (/dev/shm) where there is one: thousands of examples commit with
    fsync, which a RAM folder makes free without changing what is written."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="tiermem-fuzz-", dir=shm))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("surface", list(SURFACES))
def test_fuzz_quick(surface: str, fast_tmp: Path) -> None:
    SURFACES[surface](fast_tmp, QUICK)


@pytest.mark.fuzz
@pytest.mark.parametrize("surface", list(SURFACES))
def test_fuzz(surface: str, fast_tmp: Path, figures: Record) -> None:
    started = time.monotonic()
    SURFACES[surface](fast_tmp, FULL)
    figures(f"{surface}: {FULL} examples, only declared errors; {time.monotonic() - started:.0f} s")
