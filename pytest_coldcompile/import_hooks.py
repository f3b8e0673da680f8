"""Run a function on a module now if it is imported, else the moment it is imported.

Lets a cold child patch torch and triton without importing them (seconds) when the test
never uses them.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

_hooks: dict[str, list[Callable[[ModuleType], None]]] = {}
_lock = threading.RLock()


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of a watched module to run hooks after it."""

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _hooks or name in self._busy:
            return None
        self._busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            real_exec(module)
            _run(name, module)

        # Patch the instance, not the class: the loader object belongs to this spec only, and
        # module.__loader__ stays the real loader (linecache and inspect keep working).
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


_finder = _PostImportFinder()


def _run(name: str, module: ModuleType) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
        if not _hooks and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
    for hook in hooks:
        hook(module)


def when_imported(name: str, hook: Callable[[ModuleType], None]) -> None:
    """Call hook(module) now if module `name` is imported, else right after it is imported."""
    module = sys.modules.get(name)
    if module is not None:
        hook(module)
        return
    with _lock:
        _hooks.setdefault(name, []).append(hook)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)


def forget(name: str, hook: Callable[[ModuleType], None]) -> None:
    """Drop a hook that has not run yet."""
    with _lock:
        hooks = _hooks.get(name, [])
        if hook in hooks:
            hooks.remove(hook)
        if not hooks:
            _hooks.pop(name, None)
        if not _hooks and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
