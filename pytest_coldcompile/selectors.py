"""The launch-selector registry: entry points, register_selector(), and the events selectors emit.

A selector is any object with ``name``, ``reset()`` and ``subscribe(listener) -> unsubscribe``;
events are duck-typed and copied into plain LaunchEvent records.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from pytest_coldcompile import import_hooks
from pytest_coldcompile.protocol import ENTRY_POINT_GROUP, KINDS, LaunchEvent


class SelectorError(RuntimeError):
    """A selector could not be loaded, checked or reset; the message names it."""


_registered: list[Any] = []
_entry_points: list[importlib.metadata.EntryPoint] | None = None
_loaded: dict[str, Any] = {}  # entry point name -> selector
_on_load: list[Callable[[Any], None]] = []


def _check(obj: Any, what: str, error: type[Exception] = SelectorError) -> None:
    missing = [a for a in ("name", "reset", "subscribe") if not hasattr(obj, a)]
    if missing:
        raise error(
            f"{what} is not a launch selector: {obj!r} lacks {', '.join(missing)} "
            "(a selector needs name, reset() and subscribe(listener) -> unsubscribe)"
        )


def register_selector(obj: Any) -> Any:
    """Register a launch selector (typically from a conftest); returns it, so it can decorate."""
    _check(obj, "register_selector() argument", TypeError)
    if not any(s is obj for s in _registered):
        _registered.append(obj)
        for callback in list(_on_load):
            callback(obj)
    return obj


def entry_points() -> list[importlib.metadata.EntryPoint]:
    """The entry points of the selector group, listed once per process (importing nothing)."""
    global _entry_points
    if _entry_points is None:
        _entry_points = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    return _entry_points


def _load(ep: importlib.metadata.EntryPoint) -> Any:
    if ep.name in _loaded:
        return _loaded[ep.name]
    where = f"selector entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP!r}"
    try:
        obj = ep.load()
        if not hasattr(obj, "reset") and callable(obj):
            obj = obj()  # a factory: call it once for the selector
    except Exception as exc:
        module = sys.modules.get(ep.module)
        name = (ep.attr or "").split(".")[0]
        if isinstance(exc, AttributeError) and module is not None and name and not hasattr(
            module, name
        ):
            # Loaded by the module's own import (watch_entry_points), while Python still marks
            # it as initializing: its message would blame a circular import that is not there.
            raise SelectorError(f"{where} failed to load: AttributeError: module "
                                f"{ep.module!r} has no attribute {name!r}") from None
        raise SelectorError(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
    _check(obj, where)
    _loaded[ep.name] = obj
    for callback in list(_on_load):
        callback(obj)
    return obj


def load_entry_points(only_imported: bool = False) -> list[Any]:
    """Load the entry-point selectors (with only_imported: those whose module is imported)."""
    out = []
    for ep in entry_points():
        if only_imported and ep.module not in sys.modules:
            continue
        out.append(_load(ep))
    return out


def pending_entry_points() -> list[importlib.metadata.EntryPoint]:
    """Entry points whose selector is not loaded yet."""
    return [ep for ep in entry_points() if ep.name not in _loaded]


def loaded() -> list[Any]:
    """Every selector loaded so far: entry points first, then register_selector() ones."""
    seen: list[Any] = []
    for obj in [*_loaded.values(), *_registered]:
        if not any(s is obj for s in seen):
            seen.append(obj)
    return seen


def all_selectors() -> list[Any]:
    """Every selector in use: loaded ones, and entry points whose module is imported.

    An entry point whose module is not imported is loaded the moment it is (on_load callbacks
    see it then): importing a project's kernels is that project's choice, never the plugin's.
    """
    load_entry_points(only_imported=True)
    watch_entry_points()
    return loaded()


_watched: set[str] = set()  # entry point names with a post-import hook in place


def watch_entry_points(raise_errors: bool = False) -> None:
    """Load each pending entry point right after its module is imported, in this process.

    A selector that fails to load raises SelectorError from the importer's `import` with
    raise_errors (a cold child, where an unreset selector would break the promise); otherwise
    the next all_selectors() call raises it, where a test asked for selectors.
    """
    for ep in pending_entry_points():
        if ep.name in _watched:
            continue
        _watched.add(ep.name)

        def load(_module: ModuleType, ep: importlib.metadata.EntryPoint = ep) -> None:
            _watched.discard(ep.name)
            try:
                _load(ep)
            except SelectorError:
                if raise_errors:
                    raise

        import_hooks.when_imported(ep.module, load)


def on_load(callback: Callable[[Any], None]) -> Callable[[], None]:
    """Call callback(selector) for every selector loaded or registered from now on."""
    _on_load.append(callback)
    return lambda: _on_load.remove(callback) if callback in _on_load else None


def reset(selector: Any) -> None:
    name = getattr(selector, "name", repr(selector))
    try:
        selector.reset()
    except Exception as exc:
        raise SelectorError(
            f"launch selector {name!r} failed to reset: {type(exc).__name__}: {exc}"
        ) from exc


def subscribe(selectors: Iterable[Any], sink: Callable[[LaunchEvent], None]) -> Callable[[], None]:
    """Subscribe sink to every selector; returns one function that unsubscribes from all."""
    undo: list[Callable[[], Any]] = []
    for sel in selectors:
        name = str(getattr(sel, "name", ""))

        def listener(event: Any, _name: str = name) -> None:
            sink(LaunchEvent.from_event(event, _name))

        try:
            undo.append(sel.subscribe(listener))
        except Exception as exc:
            raise SelectorError(
                f"launch selector {name!r} failed to subscribe: {type(exc).__name__}: {exc}"
            ) from exc

    def unsubscribe() -> None:
        for u in reversed(undo):
            if callable(u):
                u()

    return unsubscribe


class EventTally:
    """Counts events for the cold-test summary, the largest admitted shared memory, and which
    launches were admitted or fell back (what a baseline compares: another tile, same bytes)."""

    def __init__(self) -> None:
        self.counts = {"probed": 0, "admitted": 0, "fallback": 0}
        self.max_admitted_shared: int | None = None
        self._launches: set[str] = set()

    def __call__(self, event: LaunchEvent) -> None:
        bucket = KINDS.get(event.kind)
        if bucket is None:
            return
        self.counts[bucket] += 1
        shared = event.resources.get("shared")
        if bucket == "admitted" and isinstance(shared, int):
            self.max_admitted_shared = max(shared, self.max_admitted_shared or 0)
        if bucket in ("admitted", "fallback"):
            config = json.dumps(dict(event.config), sort_keys=True, default=str)
            self._launches.add(f"{event.kind} {event.op} {config}")

    @property
    def launches(self) -> list[str]:
        """Each distinct admission and fallback as "KIND OP CONFIG", sorted."""
        return sorted(self._launches)
