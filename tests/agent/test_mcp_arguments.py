"""Over stdio with the SDK's client: every tool error starts with its kind, arguments of the
wrong type or range say which argument, and an argument a tool does not take is refused."""

from __future__ import annotations

from pathlib import Path

from mcp import ClientSession

from tests.agent.test_mcp import call, error, with_server

KINDS = ("InvalidInput: ", "NotFound: ", "LimitExceeded: ", "StorageError: ", "ConfigError: ")


def test_argument_errors_start_with_their_kind_and_name_the_argument(tmp_path: Path) -> None:
    async def body(s: ClientSession) -> None:
        too_high = await error(s, "memory_store", content="x", importance=2)
        assert too_high.startswith("InvalidInput: memory_store: importance: "), too_high
        assert "less than or equal to 1" in too_high
        missing = await error(s, "memory_store")
        assert missing.startswith("InvalidInput: memory_store: content: field required"), missing
        wrong = await error(s, "memory_recall", query="x", token_budget="lots")
        assert wrong.startswith("InvalidInput: memory_recall: token_budget: "), wrong
        assert "lots" not in wrong  # the value given is not echoed back
        texts = [
            too_high,
            missing,
            wrong,
            await error(s, "memory_get", id="nope"),
            await error(s, "memory_store", content="  "),
            await error(s, "memory_nothing"),
        ]
        assert all(t.startswith(KINDS) for t in texts), texts
        assert "Error executing tool" not in "\n".join(texts)

    with_server(tmp_path / "home", tmp_path / "stderr.log", body)
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()


def test_an_argument_the_tool_does_not_take_is_refused_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    async def body(s: ClientSession) -> None:
        refused = await error(s, "memory_store", content="Lena likes tea", session_id="c1")
        assert refused.startswith("InvalidInput: memory_store takes no argument 'session_id'")
        assert "(it takes: content, category," in refused  # what to correct the call to
        found = await call(s, "memory_recall", query="Lena tea")
        assert "Lena likes tea" not in str(found)
        typo = await error(s, "memory_recall", query="tea", sesion_id="c1")
        assert "'sesion_id'" in typo and "session_id" in typo
        stored = await call(s, "memory_store", content="Lena likes tea")
        assert stored["stored"]

    with_server(tmp_path / "home", tmp_path / "stderr.log", body)
