"""The original config.json is read in place from the home: each key honoured, or named."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clikit import Cli

SEED = Path(__file__).parents[1] / "fixtures" / "seed" / "config.json"


def test_config_json_in_the_home_is_read_in_place(cli: Cli, home: Path) -> None:
    home.mkdir()
    seed = json.loads(SEED.read_text())
    seed["hot"]["max_lessons"] = 2
    seed["distillation"]["mode"] = "llm"
    (home / "config.json").write_text(json.dumps(seed))
    code, _, err = cli("--json", "hot", "--add-lesson", "one")
    assert code == 0, err
    moved = [line for line in err.splitlines() if line.startswith("warning: ")]
    # the seed's own keys without a setting here are each named, one line each
    assert len(moved) == 2
    assert any("distillation.aggression ignored" in line for line in moved)
    assert any("distillation.max_distilled_bytes ignored" in line for line in moved)
    assert not any("consolidation" in line or "agent_id" in line for line in moved)
    cli.json("hot", "--add-lesson", "two")
    cli.json("hot", "--add-lesson", "three")
    assert len(cli.json("hot")["hot"]["critical_lessons"]) == 2  # max_lessons = 2 honoured


def test_config_toml_overrides_config_json_and_odd_values_are_named(cli: Cli, home: Path) -> None:
    home.mkdir()
    seed = {
        "agent_id": "scout",
        "hot": {"max_lessons": 2},
        "consolidation": {"warm_eviction": "every minute"},
        "cold": {"backend": "s3"},
    }
    (home / "config.json").write_text(json.dumps(seed))
    (home / "config.toml").write_text("[hot]\nmax_lessons = 3\n")
    code, _, err = cli("hot", "--add-event", "config read")  # a write: it creates the agent
    assert code == 0
    assert "agent_id 'scout' ignored" in err
    assert "consolidation.warm_eviction 'every minute' ignored" in err
    assert "cold.backend 's3' ignored" in err
    for text in ("a", "b", "c"):
        cli.json("hot", "--add-lesson", f"lesson {text}")
    assert len(cli.json("hot")["hot"]["critical_lessons"]) == 3


def test_a_broken_config_json_is_a_one_line_config_error(cli: Cli, home: Path) -> None:
    home.mkdir()
    (home / "config.json").write_text("{nope")
    code, _, err = cli("hot", "--add-event", "never stored")
    assert code == 6 and "config.json" in err and "Traceback" not in err
    (home / "config.json").write_text('{"hot": {"max_lessons": "many"}}')
    code, _, err = cli("hot", "--add-event", "never stored")
    assert code == 6 and "hot.max_lessons" in err
