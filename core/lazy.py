"""Modules loaded on first use, so a command that never needs them does not pay for them.

`lazy_import(name)` returns a stand-in at once; its first attribute access imports the module
with a plain `import`. The importing module names it at its top, like any import, under a
`TYPE_CHECKING` twin so type checkers see the real module.

The stand-in never enters `sys.modules`, so the import itself is the interpreter's own: an import
cut short (Ctrl-C in the middle of it) leaves no half-run module behind, and the next use simply
imports again. (`importlib.util.LazyLoader` runs the module's code inside the entry it put in
`sys.modules`; an interrupt there left that half-run module for every later importer.)
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

__all__ = ["lazy_import"]


def lazy_import(name: str) -> ModuleType:
    """`name`, imported on first attribute access (or the module itself if already loaded)."""
    loaded = sys.modules.get(name)
    return loaded if loaded is not None else _Deferred(name)


class _Deferred(ModuleType):
    """Stands for a module not imported yet: imports it on the first attribute it is asked for."""

    def __getattr__(self, attribute: str) -> Any:
        module = self.__dict__.get("_module")
        if module is None:
            module = importlib.import_module(self.__name__)
            self.__dict__["_module"] = module
        return getattr(module, attribute)
