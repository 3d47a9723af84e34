"""`tiermem demo`: the demo agent built from the shipped dataset, deterministic for a given
clock, with months of memories over a tree, hot state, metrics history and sync conflicts."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tiermem.core.conflicts import list_conflicts
from tiermem.core.db import available_driver
from tiermem.core.engine import Memory
from tiermem.core.interchange import export_json
from tiermem.core.scoring import DAY
from tiermem.core.tree import normalize_path
from tiermem.ops.demo import DATASET, build_demo, load_dataset
from tiermem.tui.cli import run

NOW = 1_780_000_000.0  # 2026-05-28 20:26 UTC


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("demo") / "home"
    with Memory(home, "default") as mem:
        mem.store("The owner's own fact stays untouched", "owner", 0.5)
    build_demo(home, "demo", now=NOW, driver=available_driver())
    return home


def state(home: Path, driver: str) -> dict[str, Any]:
    with Memory(home, "demo", clock=lambda: NOW, driver=driver) as mem:
        exported = json.loads("".join(export_json(mem)))
        return {
            "export": exported,
            "metrics": [vars(d) for d in mem.metrics_history(400)],
            "conflicts": [c.to_dict() for c in list_conflicts(mem.db, "demo", True)],
            "md": mem.memory_md(),
        }


def test_the_dataset_is_shipped_and_sound() -> None:
    assert (DATASET / "agent.json").is_file() and (DATASET / "memories.jsonl").is_file()
    data = load_dataset()
    texts = [f.fact.text for f in data.facts]
    assert len(texts) == len(set(texts)) >= 120
    assert max(f.day for f in data.facts) >= 120 and min(f.day for f in data.facts) == 0
    tree = {path for path, _ in data.tree}
    assert {normalize_path(f.fact.category) for f in data.facts} <= tree
    assert len(data.conflicts) >= 2 and len(data.queries) >= 10


def test_demo_has_a_life(demo_home: Path) -> None:
    s = state(demo_home, available_driver())
    memories = s["export"]["memories"]
    tiers = {m["tier"] for m in memories}
    assert {"warm", "cold"} <= tiers
    ages = [(NOW - m["created_at"]) / DAY for m in memories]
    assert max(ages) > 140 and min(ages) < 1  # five months, up to today
    assert sum(m["access_count"] > 0 for m in memories) > 30  # retrievals reinforced them
    assert len(s["export"]["tree"]) >= 25
    hot = s["export"]["hot"]
    assert hot["identity"]["agent_name"] == "Juno"
    assert len(hot["active_context"]["projects"]) == 3
    assert hot["active_context"]["tasks"] and hot["active_context"]["events"]
    assert len(hot["critical_lessons"]) >= 4
    assert len(s["metrics"]) >= 150
    assert sum(d["retrievals"] for d in s["metrics"]) > 200
    assert {d["warm_count"] for d in s["metrics"]} != {0}
    open_ = [c for c in s["conflicts"] if not c["resolved"]]
    assert len(open_) == 2 and len(s["conflicts"]) == 3
    assert {c["item"] for c in open_} >= {"owner_profile"}
    assert any(c["item"].startswith("project/") for c in open_)


def test_other_agents_are_untouched_and_a_second_demo_is_refused(capsys, demo_home: Path) -> None:
    with Memory(demo_home, "default") as mem:
        assert [h.memory.text for h in mem.retrieve("owner fact untouched").hits] == [
            "The owner's own fact stays untouched"
        ]
    code = run(["--home", str(demo_home), "demo"])
    assert code == 3
    assert "already has memories" in capsys.readouterr().err


def test_deterministic_across_builds_and_drivers(demo_home: Path, tmp_path: Path) -> None:
    other = tmp_path / "again"
    # the same home as the fixture's: another agent's fact shares the full-text statistics
    with Memory(other, "default", driver="sqlite3") as mem:
        mem.store("The owner's own fact stays untouched", "owner", 0.5)
    build_demo(other, "demo", now=NOW, driver="sqlite3")
    assert state(other, "sqlite3") == state(demo_home, available_driver())


def test_cli_json_with_the_global_agent_id(capsys, tmp_path: Path) -> None:
    code = run(["--home", str(tmp_path / "h"), "--agent-id", "juno", "--json", "demo"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["agent_id"] == "juno" and doc["stored"] >= 120 and doc["conflicts"] == 3
    assert doc["tiers"]["cold_count"] > 0 and doc["tiers"]["warm_count"] > 0


def test_the_tui_shows_the_demo(demo_home: Path) -> None:
    """First run: every screen opens on the demo agent (real Textual, Pilot), the tree and the
    memories have rows, and the sync screen lists the conflicts."""
    from textual.widgets import DataTable

    from tests.tui.conftest import settle
    from tiermem.tui.app import TiermemApp
    from tiermem.tui.app.widgets.memory_table import MemoryTable

    app = TiermemApp(demo_home, "demo", clock=lambda: NOW, watch=False)
    seen: dict[str, object] = {}

    async def main() -> None:
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await settle(pilot)
            for key in "123456":
                await pilot.press(key)
                await settle(pilot)
                seen[key] = type(app.screen).__name__
                if key == "3":
                    seen["memories"] = app.screen.query_one(MemoryTable).row_count
                if key == "6":
                    seen["conflicts"] = app.screen.query_one("#conflicts", DataTable).row_count

    asyncio.run(main())
    assert seen["1"] == "DashboardScreen" and seen["6"] == "SyncScreen"
    assert len({seen[k] for k in "123456"}) == 6
    assert isinstance(seen["memories"], int) and seen["memories"] > 20
    assert seen["conflicts"] == 3  # two open, one resolved


def test_the_memory_count_it_prints_is_what_the_home_holds(capsys, tmp_path: Path) -> None:
    home = tmp_path / "h"
    code = run(["--home", str(home), "demo"])
    out, err = capsys.readouterr()
    assert code == 0, err
    said = re.search(r"(\d+) memories \((\d+) warm, (\d+) cold", out)
    assert said is not None, out
    total, warm, cold = (int(x) for x in said.groups())
    assert run(["--home", str(home), "--json", "agents", "list"]) == 0
    held = {a["agent_id"]: a["memories"] for a in json.loads(capsys.readouterr().out)["agents"]}
    assert total == warm + cold == held["demo"]
