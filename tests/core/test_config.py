"""Config: the seed's defaults, strict validation with one-line errors, seed config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem.core.config import (
    Config,
    config_from_mapping,
    load_config,
    render_toml,
    seed_config_to_mapping,
)
from tiermem.core.errors import ConfigError


def test_defaults_are_seed_000_values() -> None:
    c = Config()
    assert (c.hot.max_bytes, c.hot.max_lessons, c.hot.max_events, c.hot.max_pending_tasks) == (
        5120,
        20,
        10,
        10,
    )
    assert (c.warm.max_bytes, c.warm.retention_days) == (51200, 30.0)
    assert (c.scoring.tau_days, c.scoring.reinforcement) == (30.0, 0.1)
    assert (c.scoring.hot_threshold, c.scoring.warm_threshold, c.scoring.cold_threshold) == (
        0.7,
        0.3,
        0.05,
    )
    assert c.cold.retention_years == 10.0
    assert (c.tree.max_nodes, c.tree.max_depth, c.tree.max_children, c.tree.max_bytes) == (
        50,
        4,
        10,
        2048,
    )
    assert c.tree.prune_idle_days == 60.0


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path / "config.toml") == Config()


def test_override_one_value(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[hot]\nmax_lessons = 5\n")
    cfg = load_config(path)
    assert cfg.hot.max_lessons == 5 and cfg.hot.max_bytes == 5120


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[hot]\nmax_lesons = 5\n", "hot"),
        ("[hot]\nmax_bytes = 'big'\n", "hot.max_bytes"),
        ("[hot]\nmax_bytes = -1\n", "hot.max_bytes"),
        ("[scoring]\nhot_threshold = 0.1\n", "thresholds"),
        ("[nosuch]\nx = 1\n", "nosuch"),
        ("hot = [", "invalid TOML"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message and expected in message and "\n" not in message


def test_non_utf8_config(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b"\xff\xfe[hot]")
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(path)


def test_seed_config_json_translates() -> None:
    seed = {
        "agent_id": "default",
        "hot": {"max_bytes": 4096, "max_lessons": 15, "max_events": 8, "max_tasks": 7},
        "warm": {"max_kb": 40, "retention_days": 20, "eviction_threshold": 0.25},
        "cold": {"backend": "turso", "retention_years": 5},
        "scoring": {"half_life_days": 14, "reinforcement_boost": 0.2},
        "tree": {"max_nodes": 40, "max_depth": 3, "max_size_bytes": 1500},
        "distillation": {"mode": "rule"},
    }
    cfg = config_from_mapping(seed_config_to_mapping(seed), "config.json")
    assert cfg.hot.max_pending_tasks == 7 and cfg.warm.max_bytes == 40 * 1024
    assert cfg.scoring.tau_days == 14 and cfg.scoring.warm_threshold == 0.25
    assert cfg.tree.max_bytes == 1500 and cfg.cold.retention_years == 5


def test_render_toml_round_trips(tmp_path: Path) -> None:
    cfg = config_from_mapping({"hot": {"max_lessons": 3}}, "x")
    path = tmp_path / "config.toml"
    path.write_text(render_toml(cfg))
    assert load_config(path) == cfg


def test_seed_config_with_wrong_types_is_refused() -> None:
    seed = json.loads('{"hot": {"max_bytes": "lots"}}')
    with pytest.raises(ConfigError, match=r"hot\.max_bytes"):
        config_from_mapping(seed_config_to_mapping(seed), "config.json")
