"""Dreaming: enough unpromoted episodes become long-term facts with provenance, once per
debounce; the LLM synthesis falls back to the offline one and says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Clock
from tiermem.core import dreaming, episodes
from tiermem.core.config import config_from_mapping
from tiermem.core.engine import Memory
from tiermem.core.transcript import parse
from tiermem.tui.cli import run

TALKS = [
    "user: I prefer dark roast coffee in the morning before standup. Ledgerly billing came up.",
    "user: Ledgerly keeps its invoices in MySQL for now. I prefer dark roast coffee in the "
    "morning before standup.",
    "user: We decided to move Ledgerly invoices to PostgreSQL this quarter.",
    "user: Maya works on Ledgerly and always asks for tests before a release.",
    "user: Ledgerly support tickets doubled after the price change, said Tom.",
]


def converse(mem: Memory, text: str) -> None:
    mem.conversation_end(parse(text), text)


def test_five_episodes_become_facts_with_provenance_and_are_promoted(
    tmp_path: Path, clock: Clock
) -> None:
    with Memory(tmp_path / "home", clock=clock) as mem:
        for talk in TALKS[:4]:
            converse(mem, talk)
            clock.advance(0.01)
        assert episodes.count_unpromoted(mem.db, mem.agent_id) == 4  # below the threshold
        converse(mem, TALKS[4])  # the fifth: its quick consolidation dreams
        assert episodes.count_unpromoted(mem.db, mem.agent_id) == 0
        dreamt = [m for m in mem.memories.in_tier("warm") if m.category.startswith("dreams/")]
        ids = {e.id for e in episodes.recent(mem.db, mem.agent_id)}
        assert dreamt and all(
            set(m.source.removeprefix("dreaming: ").split(",")) <= ids for m in dreamt
        )
        kinds = {m.category for m in dreamt}
        assert {"dreams/preferences", "dreams/patterns", "dreams/changes"} <= kinds
        assert any("Recurring topic: Ledgerly" in m.text for m in dreamt)
        # said twice: restated once; said once: already a memory, never copied
        assert [m.text.count("dark roast") for m in dreamt if "dark roast" in m.text] == [1]
        assert not any("Maya" in m.text for m in dreamt if m.category != "dreams/patterns")
        # a superseded fact is never restated as current, only as what changed
        stale = [m for m in dreamt if "MySQL" in m.text]
        assert stale and all(
            m.category == "dreams/changes" and "PostgreSQL" in m.text for m in stale
        )


def test_dreaming_waits_for_the_debounce_unless_forced(
    tmp_path: Path, clock: Clock, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    with Memory(home, clock=clock) as mem:
        for talk in TALKS:
            converse(mem, talk)
        for i, talk in enumerate(TALKS):
            converse(mem, talk.replace("user:", f"user: Round {i}."))
        assert episodes.count_unpromoted(mem.db, mem.agent_id) == 5
        with mem.db.transaction():
            waited = dreaming.dream(mem)
        assert not waited.ran and "debounce" in waited.reason
    assert run(["--home", str(home), "--json", "episodes", "dream", "--force"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ran"] and len(out["episodes"]) == 5


def test_llm_synthesis_falls_back_and_says_so(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "m")
    config = config_from_mapping({"dreaming": {"synthesis": "llm"}}, "test")
    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        for talk in TALKS:
            report = mem.conversation_end(parse(talk), talk)
    assert report.consolidation is not None
    dream = report.consolidation.dream
    assert dream is not None and dream.ran and dream.mode == "rule" and dream.facts
    assert any("offline synthesis used" in n for n in dream.notes)


def test_llm_synthesis_writes_the_facts_when_the_endpoint_answers(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIERMEM_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("TIERMEM_LLM_MODEL", "m")
    config = config_from_mapping({"dreaming": {"synthesis": "llm", "min_episodes": 6}}, "test")
    facts = [{"kind": "preferences", "text": "The user likes dark roast coffee."}]
    content = json.dumps({"facts": facts})

    def answering(url: str, body: bytes, headers: dict[str, str], timeout: float) -> bytes:
        return json.dumps({"choices": [{"message": {"content": content}}]}).encode()

    with Memory(tmp_path / "home", clock=clock, config=config) as mem:
        for talk in TALKS:
            converse(mem, talk)
        with mem.db.transaction():
            report = dreaming.dream(mem, transport=answering)
    assert report.ran is False  # five episodes, six needed
    config6 = config_from_mapping({"dreaming": {"synthesis": "llm", "min_episodes": 5}}, "t")
    with Memory(tmp_path / "home", clock=clock, config=config6) as mem:
        with mem.db.transaction():
            report = dreaming.dream(mem, transport=answering)
        assert report.ran and report.mode == "llm" and len(report.facts) == 1
        fact = mem.get(report.facts[0])
        assert fact.category == "dreams/preferences" and fact.source.startswith("dreaming: ep-")
