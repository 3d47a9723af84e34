"""Modules loaded on first use, so a command that never needs them does not pay for them.

`lazy_import(name)` returns the module object at once and runs its code on the first attribute
access (the standard library's `importlib.util.LazyLoader`). The importing module names it at
its top, like any import, under a `TYPE_CHECKING` twin so type checkers see the real module.
A submodule whose package is not loaded yet is found on first use too (finding it would run the
package's own code).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["lazy_import"]


def lazy_import(name: str) -> ModuleType:
    """`name`, executed on first attribute access (or the module itself if already loaded)."""
    if name in sys.modules:
        return sys.modules[name]
    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:
        return _Deferred(name)
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


class _Deferred(ModuleType):
    """Stands for a submodule of a package not loaded yet: imports both on first access."""

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attribute)
