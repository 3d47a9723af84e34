"""Modules loaded on first use, so a command that never needs them does not pay for them.

`lazy_import(name)` returns the module object at once and runs its code on the first attribute
access (the standard library's `importlib.util.LazyLoader`). The importing module names it at
its top, like any import, under a `TYPE_CHECKING` twin so type checkers see the real module.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

__all__ = ["lazy_import"]


def lazy_import(name: str) -> ModuleType:
    """`name`, executed on first attribute access (or the module itself if already loaded)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
