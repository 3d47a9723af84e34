"""What every CLI command module shares: the global options and the output convention."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import msgspec

from tiermem.core.engine import Memory


@dataclass
class Options:
    home: Path | None
    agent_id: str
    json: bool

    def open(self) -> Memory:
        return Memory(self.home, self.agent_id)


pass_options = click.make_pass_decorator(Options)


def emit(opts: Options, payload: dict[str, Any], text: str | Callable[[], str]) -> None:
    if opts.json:
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=_json_default) + "\n")
    else:
        sys.stdout.write((text() if callable(text) else text).rstrip("\n") + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")
