"""The settings of one run, resolved with one precedence:

    command-line flag > environment variable > config.toml > default

`Settings.load` applies it: the home comes from `--home`, else `TIERMEM_HOME`, else the platform's
user data folder; every config key is the flag's value when one was given, else its environment
variable's (`tiermem.core.environment.VARIABLES` names which variable overrides which key), else
config.toml's, else the default. A bad value in any layer is a one-line `ConfigError` naming
where it came from.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiermem.core.config import Config, config_from_mapping, read_config_mapping
from tiermem.core.environment import VARIABLES, Environment, environment
from tiermem.core.paths import Home, default_home

ENV_SOURCE = "environment"
FLAG_SOURCE = "command line"


@dataclass(frozen=True)
class Settings:
    """Home, environment and effective config of one run. The config is left out of `repr`:
    it may hold an API key."""

    home: Path
    env: Environment
    config: Config = field(repr=False)

    @classmethod
    def load(
        cls,
        home: Path | None = None,
        *,
        flags: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Resolve everything; `flags` maps dotted config keys ("llm.model") to flag values."""
        env = environment(environ)
        root = home if home is not None else default_home(env)
        path = Home(root).config_path
        data = read_config_mapping(path)
        config = config_from_mapping(data, str(path))
        env_layer = {key: value for key, value in env_overrides(env).items() if value}
        for source, layer in ((ENV_SOURCE, env_layer), (FLAG_SOURCE, dict(flags or {}))):
            if layer:
                data = overlay(data, layer)
                config = config_from_mapping(data, source)
        return cls(root, env, config)


def env_overrides(env: Environment) -> dict[str, str]:
    """Dotted config key → the value of the variable that overrides it ("" when unset)."""
    return {var.config_key: env.get(var.name) or "" for var in VARIABLES if var.config_key}


def overlay(data: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """`data` with each dotted key of `layer` set (a copy: the layers below stay as read)."""
    merged = copy.deepcopy(dict(data))
    for dotted, value in layer.items():
        section, _, key = dotted.partition(".")
        block = merged.setdefault(section, {})
        if not key or not isinstance(block, dict):
            merged[dotted] = value  # let validation name the bad key
            continue
        block[key] = value
    return merged
